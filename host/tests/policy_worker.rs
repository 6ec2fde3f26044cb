//! The policy worker through the library API: a slow policy delays
//! decisions, never the task that drives the gate, and each verdict's
//! outputs still come whole and in trigger order (docs/embedding.md, "Where
//! decisions run").

use rendergate::check::{CheckFuture, Checked, Checker};
use rendergate::core::PodReport;
use rendergate::policy::{Decision, Fleet, Policy, PolicyError, Trigger};
use rendergate::{CheckOutcome, Event, Gate, GateConfig, Output, PolicySeat, Render};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Passes `pass`, refuses anything else, at once.
struct Judge;

impl Checker for Judge {
    fn identity(&self) -> Arc<str> {
        "judge".into()
    }
    fn check<'a>(&'a self, render: &'a Render, _deadline: Instant) -> CheckFuture<'a> {
        let outcome = match render.config() {
            b"pass" => CheckOutcome::Passed { message: String::new() },
            _ => CheckOutcome::Refused { message: "[ALERT] no".into() },
        };
        Box::pin(async move { Checked { outcome, judge: "judge".into() } })
    }
}

/// The default decision, after 100 ms of blocking.
struct Slow;

impl Policy for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn decide(&self, trigger: &Trigger, fleet: &Fleet) -> Result<Decision, PolicyError> {
        std::thread::sleep(Duration::from_millis(100));
        Ok(policy_core::decide(trigger, fleet))
    }
}

fn applied(pod: usize, plan: &str, running: &str) -> Event {
    Event::Applied(PodReport {
        pod: format!("ns/haproxy-{pod}").into(),
        render: None,
        plan: plan.into(),
        running_plan: Some(running.into()),
        baseline_plan: Some("plan-0".into()),
    })
}

fn kind(output: &Output) -> String {
    match output {
        Output::Verdict(v) => format!("verdict {} {}", v.plan, v.outcome.label()),
        Output::Latch(_) => "latch".into(),
        Output::Release { .. } => "release".into(),
        Output::Promote { promote: p, .. } => format!("promote {}", p.pod),
        Output::Revert(r) => format!("revert {}", r.pod),
        Output::Shadow(d) => format!("shadow {}", d.trigger.kind()),
    }
}

// A current-thread runtime: a decision run on the gate's own task would stall
// everything on it, the ticker below included.
#[tokio::test]
async fn a_slow_policy_delays_decisions_not_the_task_that_drives_the_gate() {
    let config = GateConfig { check_interval: Duration::ZERO, ..GateConfig::default() };
    let (gate, mut outputs) = Gate::start(config, Arc::new(Judge), PolicySeat::new(Arc::new(Slow)));
    gate.send(Event::Rendered(Render::new("plan-1", "r-1", "pass", vec![]))).await.unwrap();
    let first = outputs.recv().await.unwrap();
    assert_eq!(kind(&first), "verdict plan-1 pass");

    // Four pods take plan-1, then plan-2, which is refused: 5 decisions of 100 ms.
    for pod in 0..4 {
        gate.send(applied(pod, "plan-1", "plan-0")).await.unwrap();
    }
    for pod in 0..4 {
        gate.send(applied(pod, "plan-2", "plan-1")).await.unwrap();
    }
    gate.send(Event::Rendered(Render::new("plan-2", "r-2", "refuse", vec![]))).await.unwrap();
    let ticker = tokio::spawn(async {
        let mut worst = Duration::ZERO;
        let mut last = Instant::now();
        for _ in 0..60 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            worst = worst.max(last.elapsed());
            last = Instant::now();
        }
        worst
    });
    let mut seen = vec![];
    while seen.len() < 4 + 2 + 4 {
        seen.push(kind(&outputs.recv().await.unwrap()));
    }
    let worst = ticker.await.unwrap();
    gate.finish().await;

    let mut expected: Vec<String> = (0..4).map(|i| format!("promote ns/haproxy-{i}")).collect();
    expected.push("verdict plan-2 refused".into());
    expected.push("latch".into());
    expected.extend((0..4).map(|i| format!("revert ns/haproxy-{i}")));
    assert_eq!(seen, expected, "trigger order; the verdict's outputs together");
    // Each decision blocks for 100 ms; on the gate's task it would stall the runtime that long.
    assert!(worst < Duration::from_millis(80), "the runtime stalled for {worst:?}");
}
