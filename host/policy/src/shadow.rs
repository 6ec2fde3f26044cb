//! The shadow policy (`--shadow-policy`, docs/policies.md "Shadow policies"):
//! a second policy that decides every trigger too, held to the same host
//! rules as the live one, so that only a difference of strategy shows. Its
//! decisions are compared with the live ones ([`Actions::same_set`]), never
//! applied.
//!
//! It decides on a thread of its own, not the live policy worker's: a slow or
//! spinning shadow then costs only its own thread, and no live decision ever
//! waits behind one of its decisions. Its queue is bounded twice: in
//! triggers, and in the pods of the fleets they hold (each waiting trigger
//! keeps its own snapshot). A shadow that falls behind either bound is not
//! asked the next triggers (each counted as a failure, reason `backlog`), so
//! it never holds more memory, nor the gate's end, than that many decisions. A shadow's failure (trap, deadline,
//! fuel, memory...) is logged and counted; that trigger is not compared, and
//! the live decision is untouched whatever the shadow does.

use super::{Fleet, LivePolicy, Promote, Revert, Trigger, rules};
use crate::metrics::PolicyMetrics;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use tokio::sync::mpsc;

/// A decision after the host's rules: what is, or would be, applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Actions {
    pub promote: Vec<Promote>,
    pub revert: Vec<Revert>,
}

impl Actions {
    /// Whether both promote and revert the same items, in any order and
    /// counting a repeat once (docs/protocol.md: compared as sets).
    pub fn same_set(&self, other: &Actions) -> bool {
        same_items(&self.promote, &self.revert, &other.promote, &other.revert)
    }
}

/// Whether two decisions promote and revert the same items, compared as
/// sets (notes aside): how the shadow and `policy bench` compare decisions.
pub fn same_decision(a: &super::Decision, b: &super::Decision) -> bool {
    same_items(&a.promote, &a.revert, &b.promote, &b.revert)
}

fn same_items(
    a_promote: &[Promote],
    a_revert: &[Revert],
    b_promote: &[Promote],
    b_revert: &[Revert],
) -> bool {
    fn set<T: Eq + std::hash::Hash>(items: &[T]) -> HashSet<&T> {
        items.iter().collect()
    }
    set(a_promote) == set(b_promote) && set(a_revert) == set(b_revert)
}

/// Which trigger a decision was for, as the `shadow` line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShadowTrigger {
    Verdict { plan: String },
    Applied { pod: String },
}

impl ShadowTrigger {
    pub fn of(trigger: &Trigger) -> ShadowTrigger {
        match trigger {
            Trigger::Verdict(v) => ShadowTrigger::Verdict { plan: v.plan.clone() },
            Trigger::Applied(p) => ShadowTrigger::Applied { pod: p.pod.to_string() },
        }
    }

    /// `verdict` or `applied`: the line's `trigger` and the metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            ShadowTrigger::Verdict { .. } => "verdict",
            ShadowTrigger::Applied { .. } => "applied",
        }
    }
}

/// One trigger asked of the shadow; `key` is the asker's.
struct Job {
    key: u64,
    trigger: Trigger,
    fleet: Fleet,
}

/// The shadow's answer for one trigger.
#[derive(Debug)]
pub struct Shadowed {
    pub key: u64,
    /// The shadow's name, as it decided.
    pub shadow: String,
    /// Its decision after the host's rules; `None` if it failed.
    pub actions: Option<Actions>,
}

/// The handle the gate holds. Dropping it ends the thread after the
/// decision it is making: the ones still queued are never compared.
pub struct ShadowWorker {
    jobs: SyncSender<Job>,
    results: mpsc::UnboundedReceiver<Shadowed>,
    /// Asked and not yet answered.
    outstanding: usize,
    /// The pods in the fleet of each trigger asked and not yet answered, in
    /// the order asked (answers come in that order), and their sum.
    waiting: VecDeque<usize>,
    waiting_pods: usize,
    /// The most pods the waiting triggers' fleets may hold together.
    pod_budget: usize,
    metrics: Arc<PolicyMetrics>,
    shadow: LivePolicy,
    stopped: Arc<AtomicBool>,
}

impl Drop for ShadowWorker {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

impl ShadowWorker {
    /// Starts the thread; at most `backlog` triggers wait for it, with at
    /// most `pod_budget` pods in their fleets together (one trigger at least,
    /// whatever its fleet).
    pub fn start(
        shadow: LivePolicy,
        metrics: Arc<PolicyMetrics>,
        backlog: usize,
        pod_budget: usize,
    ) -> ShadowWorker {
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job>(backlog);
        let (done, results) = mpsc::unbounded_channel();
        let stopped = Arc::new(AtomicBool::new(false));
        let (live, counted, stop) = (shadow.clone(), metrics.clone(), stopped.clone());
        std::thread::Builder::new()
            .name("rg-shadow".into()) // thread names: 15 bytes at most (epoch.rs)
            .spawn(move || {
                for job in queue {
                    if stop.load(Ordering::Relaxed) {
                        return; // the gate has stopped
                    }
                    let shadowed = decide(&live, job, &counted);
                    if done.send(shadowed).is_err() {
                        return; // the gate has stopped
                    }
                }
            })
            .expect("start the shadow policy thread");
        ShadowWorker {
            jobs,
            results,
            outstanding: 0,
            waiting: VecDeque::new(),
            waiting_pods: 0,
            pod_budget,
            metrics,
            shadow,
            stopped,
        }
    }

    /// Asks the shadow about a trigger; false if it was not asked (it is too
    /// far behind: counted and logged).
    pub fn ask(&mut self, key: u64, trigger: Trigger, fleet: Fleet) -> bool {
        let pods = fleet.pods.len();
        let over_budget = self.outstanding > 0 && self.waiting_pods + pods > self.pod_budget;
        let sent = !over_budget && self.jobs.try_send(Job { key, trigger, fleet }).is_ok();
        if !sent {
            let shadow = self.shadow.current();
            self.metrics.shadow_failed(shadow.name(), "backlog");
            tracing::warn!(
                shadow = shadow.name(),
                reason = "backlog",
                "the shadow policy is too far behind: this trigger is not compared"
            );
            return false;
        }
        self.outstanding += 1;
        self.waiting.push_back(pods);
        self.waiting_pods += pods;
        true
    }

    /// Asked and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// The next answer, in the order asked; `None` only if the thread is gone.
    pub async fn next(&mut self) -> Option<Shadowed> {
        let shadowed = self.results.recv().await;
        match shadowed {
            Some(_) => {
                self.outstanding -= 1;
                self.waiting_pods -= self.waiting.pop_front().unwrap_or(0);
            }
            None => {
                self.outstanding = 0;
                self.waiting.clear();
                self.waiting_pods = 0;
            }
        }
        shadowed
    }
}

/// The shadow's decision on one trigger, after the host's rules. A panic
/// here is a host bug (a guest's trap is an error value): no decision.
fn decide(shadow: &LivePolicy, job: Job, metrics: &PolicyMetrics) -> Shadowed {
    let policy = shadow.current();
    let name = policy.name().to_owned();
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        policy.decide(&job.trigger, &job.fleet)
    }));
    let actions = match decided {
        Ok(Ok(decision)) => {
            let checked = rules::enforce(decision, &job.fleet);
            // The shadow's dropped items are its own business: the live
            // policy's drop counter stays the live policy's.
            for dropped in &checked.dropped {
                tracing::debug!(
                    shadow = name,
                    rule = dropped.rule,
                    "shadow: dropped {}",
                    dropped.item
                );
            }
            Some(Actions { promote: checked.promote, revert: checked.revert })
        }
        Ok(Err(e)) => {
            metrics.shadow_failed(&name, e.failure.reason());
            tracing::warn!(
                shadow = name,
                reason = e.failure.reason(),
                "the shadow policy failed: {}; this trigger is not compared",
                e.failure
            );
            None
        }
        Err(_) => {
            metrics.shadow_failed(&name, "host-panic");
            tracing::error!(shadow = name, "the shadow's decision panicked in the host");
            None
        }
    };
    Shadowed { key: job.key, shadow: name, actions }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Decision, NativeDefault, Policy, PolicyError, PolicyFailure, RevertTarget};

    fn promote(pod: &str) -> Promote {
        Promote { pod: pod.into(), plan: "p1".into() }
    }

    fn revert(pod: &str, target: RevertTarget) -> Revert {
        Revert { pod: pod.into(), plan: "p2".into(), target }
    }

    #[test]
    fn actions_compare_as_sets() {
        let a = Actions {
            promote: vec![promote("a"), promote("b")],
            revert: vec![revert("c", RevertTarget::Baseline)],
        };
        let reordered = Actions {
            promote: vec![promote("b"), promote("a"), promote("a")],
            revert: a.revert.clone(),
        };
        assert!(a.same_set(&reordered));
        let other_target = Actions {
            promote: a.promote.clone(),
            revert: vec![revert("c", RevertTarget::Plan("p1".into()))],
        };
        assert!(!a.same_set(&other_target));
        let fewer = Actions { promote: vec![promote("a")], revert: a.revert.clone() };
        assert!(!a.same_set(&fewer));
        assert!(!a.same_set(&Actions::default()));
    }

    struct Broken;
    impl Policy for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        fn decide(&self, _: &Trigger, _: &Fleet) -> Result<Decision, PolicyError> {
            Err(PolicyError { policy: "broken".into(), failure: PolicyFailure::Fuel })
        }
    }

    fn applied(pod: &str) -> (Trigger, Fleet) {
        let state = policy_core::PodState {
            pod: pod.into(),
            applied_plan: Some("p1".into()),
            running_plan: None,
            baseline_plan: None,
        };
        let fleet = Fleet {
            held: Default::default(),
            pods: vec![state.clone()].into(),
            passed_plans: vec!["p1".into()].into(),
            refused_plans: Arc::from([]),
        };
        (Trigger::Applied(state), fleet)
    }

    #[tokio::test]
    async fn a_failing_shadow_answers_none_and_is_counted() {
        let metrics = Arc::new(PolicyMetrics::default());
        let mut worker =
            ShadowWorker::start(LivePolicy::new(Arc::new(Broken)), metrics.clone(), 4, 100);
        let (trigger, fleet) = applied("ns/a");
        assert!(worker.ask(7, trigger, fleet));
        let answer = worker.next().await.unwrap();
        assert_eq!((answer.key, answer.shadow.as_str(), answer.actions), (7, "broken", None));
        assert_eq!(metrics.shadow_failures("broken", "fuel"), 1);
        assert_eq!(worker.outstanding(), 0);
    }

    #[tokio::test]
    async fn a_shadow_past_its_backlog_is_not_asked_and_that_is_counted() {
        /// Says when it starts deciding, then holds its decision until told.
        struct Held {
            started: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
            release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
        }
        impl Policy for Held {
            fn name(&self) -> &str {
                "held"
            }
            fn decide(&self, t: &Trigger, f: &Fleet) -> Result<Decision, PolicyError> {
                let _ = self.started.lock().unwrap().send(());
                let _ = self.release.lock().unwrap().recv();
                NativeDefault.decide(t, f)
            }
        }
        let (started, deciding) = std::sync::mpsc::channel();
        let (release, held) = std::sync::mpsc::channel();
        let metrics = Arc::new(PolicyMetrics::default());
        let policy =
            Held { started: std::sync::Mutex::new(started), release: std::sync::Mutex::new(held) };
        // A queue of one trigger, and room for 3 pods in all.
        let mut worker =
            ShadowWorker::start(LivePolicy::new(Arc::new(policy)), metrics.clone(), 1, 3);
        let ask = |worker: &mut ShadowWorker, key, pods: usize| {
            let (trigger, mut fleet) = applied("ns/a");
            fleet.pods = vec![fleet.pods[0].clone(); pods].into();
            worker.ask(key, trigger, fleet)
        };
        assert!(ask(&mut worker, 0, 1));
        deciding.recv().unwrap(); // the thread holds trigger 0: the queue is empty
        assert!(!ask(&mut worker, 1, 3), "1 + 3 pods: past the pod budget");
        assert!(ask(&mut worker, 2, 2), "one fits the queue, 1 + 2 pods the budget");
        assert!(!ask(&mut worker, 3, 0), "past the queue");
        assert_eq!(metrics.shadow_failures("held", "backlog"), 2);
        assert_eq!(worker.outstanding(), 2);
        for key in [0, 2] {
            release.send(()).unwrap();
            let answer = worker.next().await.unwrap();
            assert_eq!(answer.key, key);
        }
        assert_eq!(worker.outstanding(), 0);
        assert!(ask(&mut worker, 4, 50), "alone, any fleet is asked");
    }
}
