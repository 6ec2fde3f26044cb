//! The counting rows of BENCHMARKS.md as tests (counts, not timings):
//! a burst of 100 renders arriving during one check runs at most 2 checks,
//! the same content rendered 100 times runs exactly 1, through the library
//! API (a counting fake checker) and through the real binary (`serve` with
//! real haproxy, counting verdicts with `remembered:false`); and a long event
//! stream through the sans-IO core keeps its retained state within bounds.

#[path = "../../examples/gen_render.rs"]
mod gen_render;
#[allow(dead_code)]
#[path = "../../tests/e2e/support.rs"]
mod support;

use rendergate::check::{CheckFuture, Checked, Checker};
use rendergate::core::{self, CoreConfig, Effect};
use rendergate::{CheckOutcome, Event, Gate, GateConfig, Output, PodReport, PolicySeat, Render};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Passes every render after 100 ms, counting the checks it ran.
#[derive(Default)]
struct Counting {
    checks: AtomicUsize,
}

impl Checker for Counting {
    fn identity(&self) -> Arc<str> {
        "counting".into()
    }
    fn check<'a>(
        &'a self,
        _render: &'a Render,
        _deadline: tokio::time::Instant,
    ) -> CheckFuture<'a> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Checked {
                outcome: CheckOutcome::Passed { message: String::new() },
                judge: self.identity(),
            }
        })
    }
}

/// Runs `events` through `Gate::start`: the first alone, the rest while its
/// check is in flight (paused time: 10 ms in); then finishes. Returns the
/// checks run and the verdicts published.
async fn run_library(first: Event, rest: Vec<Event>) -> (usize, Vec<rendergate::Verdict>) {
    let checker = Arc::new(Counting::default());
    let config = GateConfig { check_interval: Duration::ZERO, ..GateConfig::default() };
    let (gate, outputs) = Gate::start(config, checker.clone(), PolicySeat::default());
    let collector = tokio::spawn(collect(outputs));
    gate.send(first).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(checker.checks.load(Ordering::SeqCst), 1, "the first check is in flight");
    for e in rest {
        gate.send(e).await.unwrap();
    }
    gate.finish().await;
    let verdicts = collector.await.unwrap();
    (checker.checks.load(Ordering::SeqCst), verdicts)
}

async fn collect(mut outputs: mpsc::Receiver<Output>) -> Vec<rendergate::Verdict> {
    let mut verdicts = vec![];
    while let Some(o) = outputs.recv().await {
        if let Output::Verdict(v) = o {
            verdicts.push(v);
        }
    }
    verdicts
}

fn rendered(plan: &str, id: &str, config: &str) -> Event {
    Event::Rendered(Render::new(plan, id, config, vec![]))
}

#[tokio::test(start_paused = true)]
async fn library_a_burst_of_100_renders_during_one_check_runs_at_most_2_checks() {
    let burst = (1..=100)
        .map(|i| rendered(&format!("plan-{i}"), &format!("r-{i}"), &format!("content {i}")))
        .collect();
    let (checks, verdicts) = run_library(rendered("plan-0", "r-0", "content 0"), burst).await;
    assert!(checks <= 2, "{checks} checks");
    assert_eq!(verdicts.last().map(|v| v.render.as_str()), Some("r-100"), "the newest is judged");
}

#[tokio::test(start_paused = true)]
async fn library_the_same_content_rendered_100_times_runs_1_check() {
    // The same plan and content each time (verdict memory is keyed by plan,
    // content and judge), under a new render id, all during the first check.
    let same = (2..=100).map(|i| rendered("plan-1", &format!("r-{i}"), "same content")).collect();
    let (checks, verdicts) = run_library(rendered("plan-1", "r-1", "same content"), same).await;
    assert_eq!(checks, 1);
    assert!(verdicts.iter().filter(|v| !v.remembered).count() == 1, "{verdicts:?}");
}

#[tokio::test(start_paused = true)]
async fn library_the_same_content_rendered_100_times_in_sequence_runs_1_check() {
    let checker = Arc::new(Counting::default());
    let config = GateConfig { check_interval: Duration::ZERO, ..GateConfig::default() };
    let (gate, outputs) = Gate::start(config, checker.clone(), PolicySeat::default());
    let collector = tokio::spawn(collect(outputs));
    for i in 1..=100 {
        gate.send(rendered("plan-1", &format!("r-{i}"), "same content")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await; // past the check
    }
    gate.finish().await;
    let verdicts = collector.await.unwrap();
    assert_eq!(checker.checks.load(Ordering::SeqCst), 1);
    assert_eq!(verdicts.len(), 100);
    assert_eq!(verdicts.iter().filter(|v| v.remembered).count(), 99);
}

// --- the real binary, with real haproxy ----------------------------------

/// `rendergate serve` over `input`; the parsed verdict lines.
fn serve(input: &str) -> Vec<serde_json::Value> {
    let out = support::run(
        &["serve", "--check-interval", "0s", "--haproxy", &support::haproxy()],
        input,
        &[],
    );
    assert!(out.status.success(), "serve failed: {}", String::from_utf8_lossy(&out.stderr));
    support::lines(&out).into_iter().filter(|v| v["type"] == "verdict").collect()
}

fn generated(seed: u64, backends: usize) -> gen_render::Generated {
    gen_render::generate(&gen_render::Args {
        seed,
        backends,
        servers: 2,
        maps: 2,
        map_entries: 200,
        ..Default::default()
    })
}

fn checks_run(verdicts: &[serde_json::Value]) -> usize {
    verdicts.iter().filter(|v| v["remembered"] == false).count()
}

#[test]
fn serve_a_burst_of_100_renders_during_one_check_runs_at_most_2_checks() {
    // A first render of 1,000 backends keeps haproxy busy while the burst
    // (100 renders of different content, piped at once) arrives.
    let mut input = generated(1, 1000).ndjson_line("plan-0", "r-0", "c-0");
    for i in 1..=100 {
        input.push_str(&generated(100 + i, 20).ndjson_line(
            &format!("plan-{i}"),
            &format!("r-{i}"),
            &format!("c-{i}"),
        ));
    }
    let verdicts = serve(&input);
    assert!(checks_run(&verdicts) <= 2, "{verdicts:?}");
    assert!(verdicts.iter().all(|v| v["ok"] == true), "{verdicts:?}");
    assert_eq!(verdicts.last().unwrap()["render"], "r-100");
}

#[test]
fn serve_the_same_content_rendered_100_times_runs_1_check() {
    let render = generated(7, 100);
    let input: String = (1..=100)
        .map(|i| render.ndjson_line("plan-1", &format!("r-{i}"), &format!("c-{i}")))
        .collect();
    let verdicts = serve(&input);
    assert_eq!(checks_run(&verdicts), 1, "{verdicts:?}");
    assert_eq!(verdicts[0]["ok"], true, "{verdicts:?}");
}

// --- bounded state through the sans-IO core ------------------------------

/// 200,000 events over 10,000 pods: renders every 500 events, pods applying
/// recent renders (mostly repeating their last report, as controllers do),
/// pods terminating and being rediscovered, checks answered after a while.
/// The retained renders, the verdict memory and the pods stay bounded.
/// (A decision shares the fleet instead of copying it, so the stream costs
/// no time in proportion to the fleet, even in a debug build.)
#[test]
fn a_long_stream_keeps_the_retained_state_bounded() {
    const EVENTS: u64 = 200_000;
    const PODS: u64 = 10_000;
    let config = CoreConfig { check_interval: Duration::ZERO, ..CoreConfig::default() };
    let (superseded_limit, memory_capacity) = (config.superseded_limit, config.memory_capacity);
    let mut gate = core::Gate::new(config, "judge");
    let t0 = Instant::now();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut renders = 0u64;
    let mut pending: Option<(core::CheckId, u64)> = None; // the check in flight, answered 50 events later
    let mut last: Vec<Option<PodReport>> = vec![None; PODS as usize];
    let (mut max_renders, mut max_memory, mut max_pods) = (0, 0, 0);
    for n in 0..EVENTS {
        let now = t0 + Duration::from_millis(n);
        let event = if n.is_multiple_of(500) {
            renders += 1;
            // Every 7th render repeats an earlier content; every 11th is refused.
            let content = if renders.is_multiple_of(7) {
                format!("content {}", renders % 5)
            } else {
                format!("content {renders}")
            };
            let config =
                if renders.is_multiple_of(11) { format!("refuse {content}") } else { content };
            Event::Rendered(Render::new(
                format!("plan-{renders}"),
                format!("r-{renders}"),
                config,
                vec![],
            ))
        } else if n.is_multiple_of(50_021) {
            let alive =
                (0..PODS).filter(|p| p % 3 != n % 3).map(|p| format!("ns/pod-{p}")).collect();
            Event::PodsDiscovered { pods: alive }
        } else if n.is_multiple_of(1_009) {
            let pod = next() % PODS;
            last[pod as usize] = None;
            Event::PodTerminated { pod: format!("ns/pod-{pod}") }
        } else {
            let pod = next() % PODS;
            // 1 report in 50 is new; the rest repeat the pod's last report.
            let report = match &last[pod as usize] {
                Some(r) if !next().is_multiple_of(50) => r.clone(),
                _ => {
                    let back = next() % 3;
                    let held = renders.saturating_sub(back).max(1);
                    PodReport {
                        pod: format!("ns/pod-{pod}").into(),
                        render: Some(format!("r-{held}").into()),
                        plan: format!("plan-{held}").into(),
                        running_plan: Some(format!("plan-{}", held.saturating_sub(1)).into()),
                        baseline_plan: Some(format!("plan-{}", held.saturating_sub(2)).into()),
                    }
                }
            };
            last[pod as usize] = Some(report.clone());
            Event::Applied(report)
        };
        gate.handle_event(now, event);
        if let Some((id, at)) = pending
            && n >= at
        {
            let refused =
                gate.in_flight().is_some_and(|r| r.render.config().starts_with(b"refuse"));
            let outcome = if refused {
                CheckOutcome::Refused { message: "[ALERT] no".into() }
            } else if n.is_multiple_of(13) {
                CheckOutcome::Unavailable { reason: "timed out".into() }
            } else {
                CheckOutcome::Passed { message: String::new() }
            };
            pending = None;
            gate.handle_check_result(now, id, outcome, "judge", Duration::from_millis(50));
        }
        if gate.poll_timeout().is_some_and(|t| t <= now) {
            gate.handle_timeout(now);
        }
        while let Some(effect) = gate.poll_effect() {
            if let Effect::StartCheck(request) = effect {
                pending = Some((request.id, n + 50));
            }
        }
        let held = gate.pods().len();
        assert!(
            gate.renders().len() <= 1 + superseded_limit + held + 1,
            "event {n}: {} renders retained, {held} pods",
            gate.renders().len()
        );
        max_renders = max_renders.max(gate.renders().len());
        max_memory = max_memory.max(gate.memory().len());
        max_pods = max_pods.max(gate.pods().len());
        assert!(gate.memory().len() <= memory_capacity, "event {n}");
        assert!(gate.pods().len() as u64 <= PODS, "event {n}");
    }
    assert!(renders >= 400);
    assert!(max_pods as u64 > PODS * 9 / 10, "the stream reached the fleet size: {max_pods}");
    assert_eq!(max_memory, memory_capacity, "memory filled up and stayed at its bound");
    // Pods hold only the newest three renders, so few renders are retained.
    assert!(max_renders <= 1 + superseded_limit + 3 + 1, "{max_renders} renders retained");
}
