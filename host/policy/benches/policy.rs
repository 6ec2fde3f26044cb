//! Policy decision latency: the wasm `scoped-revert` guest (fresh store and
//! instance per decision) against the native default, for fleets of 10 to
//! 10,000 pods, called directly and through the gate's policy worker (the
//! round trip from the driver's side: hand-off, the seat's rules, the answer
//! back); fuel burned per decision; and loading a component cold (compile)
//! against warm (precompiled cache). The fleets and the refusal are
//! `rendergate_policy::bench`'s, the ones `rendergate policy bench` measures.
//!
//! `cargo bench -p rendergate --bench policy` (add `-- --quick` for fewer rounds).

use policy_core::{Fleet, Trigger};
use rendergate_policy::PolicyMetrics;
use rendergate_policy::bench::{TriggerKind, fleet, percentiles};
use rendergate_policy::cache::ComponentCache;
use rendergate_policy::worker::PolicyWorker;
use rendergate_policy::{ComponentPolicy, NativeDefault, Policy, PolicyLimits, PolicySeat};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn refusal(fleet: &Fleet) -> Trigger {
    TriggerKind::Refused.trigger(fleet)
}

/// p50 and p99 of `rounds` timed calls (after a warm-up).
fn measure(rounds: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..rounds.min(20) {
        f();
    }
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    percentiles(&mut times)
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let limits = PolicyLimits { deadline: Duration::from_secs(5), ..PolicyLimits::default() };
    let wasm = ComponentPolicy::load(
        std::path::Path::new(policy_artifacts::SCOPED_REVERT),
        limits.clone(),
        None,
    )
    .unwrap();
    let seated =
        ComponentPolicy::load(std::path::Path::new(policy_artifacts::SCOPED_REVERT), limits, None)
            .unwrap();
    let metrics = Arc::new(PolicyMetrics::default());
    let mut seat = PolicySeat::new(Arc::new(seated));
    let mut worker = PolicyWorker::start(seat.clone(), metrics.clone());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    println!("## Decision latency: one refusal over the whole fleet (µs)\n");
    println!(
        "| pods | wasm p50 | wasm p99 | seat p50 | via worker p50 | via worker p99 | native p50 | native p99 | ratio p50 | fuel burned |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for pods in [10, 100, 1_000, 10_000] {
        let rounds = match (pods, quick) {
            (10_000, _) => 40,
            (_, true) => 200,
            (1_000, false) => 300,
            _ => 2_000,
        };
        let f = fleet(pods);
        let t = refusal(&f);
        let (_, cost) = wasm.decide_metered(&t, &f).unwrap();
        let fuel = cost.fuel;
        assert_eq!(
            wasm.decide(&t, &f).unwrap(),
            NativeDefault.decide(&t, &f).unwrap(),
            "same decision"
        );
        let (wp50, wp99) = measure(rounds, || {
            wasm.decide(&t, &f).unwrap();
        });
        // The seat on this thread: the wasm decision plus the host's rules.
        let (sp50, _) = measure(rounds, || {
            seat.decide(&t, &f, &metrics);
        });
        let (vp50, vp99) = measure(rounds, || {
            runtime.block_on(async {
                worker.ask(t.clone(), f.clone());
                worker.next().await.unwrap();
            })
        });
        let (np50, np99) = measure(rounds, || {
            NativeDefault.decide(&t, &f).unwrap();
        });
        let ratio = wp50.as_secs_f64() / np50.as_secs_f64();
        println!(
            "| {pods} | {} | {} | {} | {} | {} | {} | {} | {ratio:.0}x | {fuel} |",
            us(wp50),
            us(wp99),
            us(sp50),
            us(vp50),
            us(vp99),
            us(np50),
            us(np99)
        );
    }

    println!("\n## Loading scoped-revert (ms)\n");
    let bytes = std::fs::read(policy_artifacts::SCOPED_REVERT).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = &rendergate_policy::component::engine(PolicyLimits::default().memory).unwrap();
    let cold = Instant::now();
    let cache = ComponentCache::open(dir.path()).unwrap();
    cache.load_or_compile(engine, &bytes).unwrap();
    let cold = cold.elapsed();
    let (warm, _) = measure(if quick { 5 } else { 20 }, || {
        cache.load_or_compile(engine, &bytes).unwrap();
    });
    println!("| cold compile | warm cache (p50) | ratio |\n|---:|---:|---:|");
    println!(
        "| {:.1} | {:.2} | {:.0}x |",
        cold.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e3,
        cold.as_secs_f64() / warm.as_secs_f64()
    );
}
