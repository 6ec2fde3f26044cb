//! The policy worker: a thread of its own that runs the seat's decisions, one
//! at a time and in the order they were asked, so the task that reads events
//! and drives the gate never waits on a policy (docs/embedding.md, "Where
//! decisions run").
//!
//! A plain thread, not a task of the gate's runtime: a decision is CPU work
//! bounded only by its deadline, and a component's async host calls run on a
//! runtime of the worker's own ([`super::component`]). The built-in default
//! ([`super::Policy::inline`]) is decided in place by the driver with
//! [`settle`]: it takes well under a microsecond, less than the trip here.

use super::{Fleet, Name, PolicySeat, Promote, Revert, Trigger, rules};
use crate::metrics::PolicyMetrics;
use std::sync::Arc;
use tokio::sync::mpsc;

/// One decision asked of the worker; `seq` numbers them in order.
struct Job {
    seq: u64,
    trigger: Trigger,
    fleet: Fleet,
}

/// One decision, after the host's rules, as the gate publishes it.
#[derive(Debug)]
pub struct Decided {
    pub seq: u64,
    /// The policy that decided (after a hot reload, not always the one in force now).
    pub policy: String,
    pub promote: Vec<Promote>,
    /// For each promotion, the render whose content passed (the line names it).
    pub promoted_renders: Vec<Option<Name>>,
    pub revert: Vec<Revert>,
}

/// The handle the driver holds. Dropping it ends the thread once the
/// decisions already asked are done.
pub struct PolicyWorker {
    jobs: std::sync::mpsc::Sender<Job>,
    results: mpsc::UnboundedReceiver<Decided>,
    next: u64,
}

impl PolicyWorker {
    pub fn start(mut seat: PolicySeat, metrics: Arc<PolicyMetrics>) -> PolicyWorker {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        let (done, results) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("rg-policy".into()) // thread names: 15 bytes at most (epoch.rs)
            .spawn(move || {
                for job in queue {
                    let decided = settle(&mut seat, job.seq, &job.trigger, &job.fleet, &metrics);
                    if done.send(decided).is_err() {
                        return; // the gate has stopped
                    }
                }
            })
            .expect("start the policy worker thread");
        PolicyWorker { jobs, results, next: 0 }
    }

    /// Queues a decision; returns its number. The caller bounds how many
    /// are outstanding (the driver stops reading events past its limit).
    pub fn ask(&mut self, trigger: Trigger, fleet: Fleet) -> u64 {
        let seq = self.next;
        self.next += 1;
        // The thread only ends when this handle is dropped or the results'
        // receiver is: neither while `self` is here to ask.
        let _ = self.jobs.send(Job { seq, trigger, fleet });
        seq
    }

    /// The next decision, in the order asked; `None` only if the thread is gone.
    pub async fn next(&mut self) -> Option<Decided> {
        self.results.recv().await
    }
}

/// Decides one trigger with `seat`. A panic here is a host bug, not the
/// guest's (a guest's trap is an error value): the default decides instead,
/// so the trigger still gets its decision.
pub fn settle(
    seat: &mut PolicySeat,
    seq: u64,
    trigger: &Trigger,
    fleet: &Fleet,
    metrics: &PolicyMetrics,
) -> Decided {
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        seat.decide(trigger, fleet, metrics)
    }));
    let settled = decided.unwrap_or_else(|_| {
        tracing::error!(
            policy = seat.name(),
            "the policy seat panicked; the default policy decided instead"
        );
        PolicySeat::default().decide(trigger, fleet, metrics)
    });
    for note in &settled.notes {
        tracing::debug!(policy = seat.name(), "note: {note}");
    }
    // Counted here, where the gate's decisions and nothing else pass: each
    // item becomes one `promote` or `revert` line (docs/operations.md).
    metrics.applied(seat.decided_by(), &settled.promote, &settled.revert);
    let promoted_renders =
        settled.promote.iter().map(|p| rules::promoted_render(p, trigger, fleet)).collect();
    Decided {
        seq,
        policy: seat.decided_by().to_owned(),
        promote: settled.promote,
        promoted_renders,
        revert: settled.revert,
    }
}
