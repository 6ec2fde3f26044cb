//! The tokio adapter with a scripted checker, on paused time: spacing, the
//! timeout (waiting for the check slot included), cancellation on leadership
//! loss, and draining at the end of input. The real checker is proven by the
//! end-to-end tests; these pin down timing exactly.

use rendergate::check::{CheckFuture, Checked, Checker};
use rendergate::{CheckOutcome, Event, Gate, GateConfig, Output, PolicySeat, Render};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

/// Judges a render by its config: `pass`, `refuse`, `slow` (passes after
/// 100 ms) or `hang` (never answers). Records when each check started and
/// how many checks were dropped unfinished. Its identity is what the test
/// sets; a check answers with the identity it started with.
#[derive(Default)]
struct Scripted {
    starts: Mutex<Vec<(String, Instant)>>,
    dropped: Arc<AtomicUsize>,
    judge: Mutex<Arc<str>>,
}

impl Scripted {
    fn set_judge(&self, judge: &str) {
        *self.judge.lock().unwrap() = judge.into();
    }
}

struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Checker for Scripted {
    fn identity(&self) -> Arc<str> {
        self.judge.lock().unwrap().clone()
    }
    fn check<'a>(&'a self, render: &'a Render, _deadline: Instant) -> CheckFuture<'a> {
        self.starts.lock().unwrap().push((render.id().to_owned(), Instant::now()));
        let guard = DropCount(self.dropped.clone());
        let judge = self.identity();
        Box::pin(async move {
            let outcome = match render.config() {
                b"pass" => CheckOutcome::Passed { message: String::new() },
                b"refuse" => CheckOutcome::Refused { message: "[ALERT] no".into() },
                b"slow" => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    CheckOutcome::Passed { message: String::new() }
                }
                _ => std::future::pending().await,
            };
            std::mem::forget(guard); // finished: not a drop
            Checked { outcome, judge }
        })
    }
}

fn start(config: GateConfig) -> (Arc<Scripted>, Gate, mpsc::Receiver<Output>) {
    let checker = Arc::new(Scripted::default());
    let (gate, outputs) = Gate::start(config, checker.clone(), PolicySeat::default());
    (checker, gate, outputs)
}

fn rendered(id: &str, config: &str) -> Event {
    Event::Rendered(Render::new(format!("plan-{id}"), id, config, vec![]))
}

async fn verdict(outputs: &mut mpsc::Receiver<Output>) -> rendergate::Verdict {
    loop {
        match outputs.recv().await.expect("an output") {
            Output::Verdict(v) => return v,
            _ => continue,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn check_starts_are_spaced_by_the_interval() {
    let config = GateConfig { check_interval: Duration::from_secs(1), ..GateConfig::default() };
    let (checker, gate, mut outputs) = start(config);
    let t0 = Instant::now();
    gate.send(rendered("r-1", "pass")).await.unwrap();
    verdict(&mut outputs).await;
    gate.send(rendered("r-2", "pass")).await.unwrap();
    verdict(&mut outputs).await;
    let starts = checker.starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 2);
    assert!(starts[0].1 - t0 < Duration::from_millis(10));
    assert_eq!(starts[1].1 - starts[0].1, Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_new_judge_is_asked_again_and_answers_are_remembered_under_the_judge_that_gave_them() {
    let config = GateConfig { check_interval: Duration::ZERO, ..GateConfig::default() };
    let (checker, gate, mut outputs) = start(config);
    let same_content = |id: &str| Event::Rendered(Render::new("plan-1", id, "slow", vec![]));
    checker.set_judge("haproxy-1");
    gate.send(same_content("r-1")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await; // the check runs with haproxy-1
    checker.set_judge("haproxy-2"); // replaced meanwhile
    let v = verdict(&mut outputs).await;
    assert_eq!((v.render.as_str(), v.remembered), ("r-1", false));

    // haproxy-1 answered: haproxy-2 is asked, then remembered
    gate.send(same_content("r-2")).await.unwrap();
    let v = verdict(&mut outputs).await;
    assert_eq!((v.render.as_str(), v.remembered), ("r-2", false));
    gate.send(same_content("r-3")).await.unwrap();
    let v = verdict(&mut outputs).await;
    assert_eq!((v.render.as_str(), v.remembered), ("r-3", true));
    assert_eq!(checker.starts.lock().unwrap().len(), 2);

    // haproxy-1 back in place: its answer is still remembered
    checker.set_judge("haproxy-1");
    gate.send(same_content("r-4")).await.unwrap();
    let v = verdict(&mut outputs).await;
    assert_eq!((v.render.as_str(), v.remembered), ("r-4", true));
    assert_eq!(checker.starts.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_timeout_covers_waiting_for_the_check_slot() {
    let slot = Arc::new(Semaphore::new(1));
    let held = slot.clone().acquire_owned().await.unwrap(); // another gate's check
    let config = GateConfig {
        check_timeout: Duration::from_secs(3),
        check_slot: slot,
        ..GateConfig::default()
    };
    let (checker, gate, mut outputs) = start(config);
    let t0 = Instant::now();
    gate.send(rendered("r-1", "pass")).await.unwrap();
    let v = verdict(&mut outputs).await;
    assert_eq!(Instant::now() - t0, Duration::from_secs(3));
    assert!(
        matches!(&v.outcome, CheckOutcome::Unavailable { reason } if reason.contains("timed out after 3s")),
        "{v:?}"
    );
    assert!(checker.starts.lock().unwrap().is_empty(), "the checker never got the slot");
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_check_times_out_and_is_dropped() {
    let config = GateConfig { check_timeout: Duration::from_secs(2), ..GateConfig::default() };
    let (checker, gate, mut outputs) = start(config);
    gate.send(rendered("r-1", "hang")).await.unwrap();
    let v = verdict(&mut outputs).await;
    assert_eq!(v.outcome.label(), "unavailable");
    assert_eq!(v.duration, Duration::from_secs(2));
    assert_eq!(checker.dropped.load(Ordering::SeqCst), 1);
    assert_eq!(gate.metrics().checks("unavailable"), 1);
    assert_eq!(gate.metrics().rejected(), 0);
}

/// r-1's check is running when the term ends and r-2 comes in: r-2's
/// verdict must come next, with r-1's check stopped (its future dropped).
async fn lose_the_term_during_a_check(config: GateConfig) -> (Gate, mpsc::Receiver<Output>) {
    let (checker, gate, mut outputs) = start(config);
    gate.send(rendered("r-1", "slow")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await; // the check is running
    gate.send(Event::LostLeadership).await.unwrap();
    gate.send(rendered("r-2", "refuse")).await.unwrap();
    let v = verdict(&mut outputs).await;
    assert_eq!(v.render, "r-2", "r-1's check was cancelled, not published");
    assert_eq!(
        checker.dropped.load(Ordering::SeqCst),
        1,
        "r-1's check was stopped, not left running"
    );
    (gate, outputs)
}

#[tokio::test(start_paused = true)]
async fn a_check_in_flight_when_leadership_is_lost_publishes_nothing() {
    let (gate, mut outputs) = lose_the_term_during_a_check(GateConfig::default()).await;
    assert!(matches!(outputs.recv().await, Some(Output::Latch(_))));
    gate.finish().await;
    assert_eq!(outputs.recv().await, None);
}

#[tokio::test(start_paused = true)]
async fn a_lost_term_and_a_new_render_in_one_batch_stop_the_old_check_first() {
    // No spacing: the new render's check starts within the same batch of
    // events, so the old one must be stopped between the two events.
    let (gate, _outputs) = lose_the_term_during_a_check(GateConfig {
        check_interval: Duration::ZERO,
        ..GateConfig::default()
    })
    .await;
    gate.finish().await;
}

#[tokio::test(start_paused = true)]
async fn finish_drains_the_queue_and_closes_the_outputs() {
    let (checker, gate, mut outputs) = start(GateConfig::default());
    gate.send(rendered("r-1", "slow")).await.unwrap();
    gate.send(rendered("r-2", "hang-never-started")).await.unwrap();
    gate.send(rendered("r-3", "refuse")).await.unwrap();
    let metrics = gate.metrics().clone();
    gate.finish().await;
    let mut seen = vec![];
    while let Some(o) = outputs.recv().await {
        if let Output::Verdict(v) = o {
            seen.push((v.render, v.outcome.label()));
        }
    }
    assert_eq!(seen, [("r-1".to_owned(), "pass"), ("r-3".to_owned(), "refused")]);
    assert_eq!(checker.starts.lock().unwrap().len(), 2);
    assert_eq!(metrics.rejected(), 1);
    assert!(metrics.render().contains("rendergate_config_pinned{reason=\"refused\"} 0"));
}
