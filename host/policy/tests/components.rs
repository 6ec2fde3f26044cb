//! Policy components, for real: the guests of guest-policy/ built for
//! wasm32-wasip2 (by the `policy-artifacts` crate), loaded by the wasmtime
//! host, run against their fixtures, against hostile guests, hot reloaded,
//! and cached (the binary's policy commands: host/tests/policy_cli.rs).

use policy_artifacts as built;
use rendergate_policy::PolicyMetrics;
use rendergate_policy::cache::{CacheUse, ComponentCache};
use rendergate_policy::fixture::{self, CaseResult};
use rendergate_policy::reload::Reloader;
use rendergate_policy::{
    ComponentPolicy, Fleet, NativeDefault, PodState, Policy, PolicyFailure, PolicyLimits,
    PolicySeat, Trigger,
};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn fixtures(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/policies/{name}.json"))
}

/// The metrics in Prometheus' text format, as `/metrics` shows them.
fn text(metrics: &PolicyMetrics) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    out
}

fn load(path: &str) -> ComponentPolicy {
    ComponentPolicy::load(Path::new(path), PolicyLimits::default(), None)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn failure(path: &str, limits: PolicyLimits) -> PolicyFailure {
    let policy = ComponentPolicy::load(Path::new(path), limits, None).expect("loads");
    policy.decide(&refusal(), &fleet(3)).expect_err("the hostile guest must fail").failure
}

fn pod(i: usize) -> PodState {
    PodState {
        pod: format!("ns/haproxy-{i}").into(),
        applied_plan: Some("plan-2".into()),
        running_plan: Some(if i.is_multiple_of(2) { "plan-1" } else { "plan-2" }.into()),
        baseline_plan: Some("plan-1".into()),
    }
}

fn fleet(pods: usize) -> Fleet {
    Fleet {
        held: Default::default(),
        pods: std::sync::Arc::new((0..pods).map(pod).collect()),
        passed_plans: vec!["plan-1".into()].into(),
        refused_plans: vec!["plan-2".into()].into(),
    }
}

fn refusal() -> Trigger {
    Trigger::Verdict(policy_core::Verdict {
        plan: "plan-2".into(),
        render: "r-2".into(),
        outcome: policy_core::Outcome::Refused,
        newest: true,
        pinned: false,
        remembered: false,
        message: String::new(),
    })
}

#[test]
fn the_native_default_and_the_scoped_revert_guest_pass_the_same_fixtures() {
    let text = std::fs::read_to_string(fixtures("scoped-revert")).unwrap();
    let cases = fixture::parse(&text).unwrap();
    let guest = load(built::SCOPED_REVERT);
    assert_eq!(guest.name(), "scoped-revert");
    for case in &cases {
        assert_eq!(fixture::run(&NativeDefault, case), CaseResult::Passed, "native: {}", case.name);
        assert_eq!(fixture::run(&guest, case), CaseResult::Passed, "wasm: {}", case.name);
    }
}

#[test]
fn hostile_guests_fail_with_the_right_typed_error() {
    let slow = PolicyLimits { fuel: u64::MAX / 2, ..PolicyLimits::default() };
    let started = Instant::now();
    assert_eq!(failure(built::HOSTILE_SPIN, slow.clone()), PolicyFailure::Deadline);
    assert_eq!(failure(built::HOSTILE_SLOW, slow.clone()), PolicyFailure::Deadline);
    assert!(
        started.elapsed() < Duration::from_millis(2000),
        "two 50 ms deadlines took {:?}",
        started.elapsed()
    );
    let starved = PolicyLimits {
        fuel: 1_000_000,
        deadline: Duration::from_secs(10),
        ..PolicyLimits::default()
    };
    assert_eq!(failure(built::HOSTILE_SPIN, starved), PolicyFailure::Fuel);
    // A long deadline, so the memory limit, not time, is what stops them on a busy machine.
    let patient = PolicyLimits { deadline: Duration::from_secs(10), ..PolicyLimits::default() };
    assert_eq!(failure(built::HOSTILE_GROW, patient.clone()), PolicyFailure::Memory);
    assert_eq!(failure(built::HOSTILE_HUGE, patient.clone()), PolicyFailure::Memory);
    let roomy = PolicyLimits {
        memory: 512 << 20,
        deadline: Duration::from_secs(5),
        ..PolicyLimits::default()
    };
    assert!(matches!(
        failure(built::HOSTILE_HUGE, roomy),
        PolicyFailure::TooLarge { .. } | PolicyFailure::Fuel
    ));
    let PolicyFailure::Trap(why) = failure(built::HOSTILE_RECURSE, patient.clone()) else {
        panic!()
    };
    assert!(why.contains("stack"), "{why}");
    let PolicyFailure::Trap(why) = failure(built::HOSTILE_PANIC, patient) else { panic!() };
    assert!(why.contains("this policy always panics"), "the guest's panic message is kept: {why}");
    let Err(PolicyFailure::BadComponent(why)) =
        ComponentPolicy::load(Path::new(built::HOSTILE_OTHER_WORLD), PolicyLimits::default(), None)
    else {
        panic!()
    };
    assert!(why.contains("rendergate:policy"), "{why}");
}

#[test]
fn a_failing_policy_gets_the_default_decision_and_is_counted() {
    let metrics = PolicyMetrics::default();
    let mut seat = PolicySeat::new(Arc::new(load(built::HOSTILE_PANIC)));
    let settled = seat.decide(&refusal(), &fleet(4), &metrics);
    let expected = policy_core::decide(&refusal(), &fleet(4));
    assert_eq!(settled.revert, expected.revert);
    assert_eq!(settled.revert.len(), 2, "pods 0 and 2 took plan-2 without loading it");
    assert_eq!(metrics.failures("hostile-panic", "trap"), 1);
    assert!(
        text(&metrics).contains(
            "rendergate_policy_failures_total{policy=\"hostile-panic\",reason=\"trap\"} 1"
        )
    );
    let fell_back =
        "rendergate_policy_fallbacks_total{policy=\"hostile-panic\",fallback=\"default\"} 1";
    assert!(text(&metrics).contains(fell_back), "{}", text(&metrics));
}

#[test]
fn a_rule_breaking_decision_loses_every_item_and_each_rule_is_counted() {
    let metrics = PolicyMetrics::default();
    let mut seat = PolicySeat::new(Arc::new(load(built::HOSTILE_RULE_BREAKER)));
    let mut f = fleet(2);
    f.passed_plans = ["plan-1".into(), "plan-3".into()].into();
    let settled = seat.decide(&refusal(), &f, &metrics);
    assert!(settled.promote.is_empty() && settled.revert.is_empty(), "{settled:?}");
    assert!(settled.failure.is_none());
    assert_eq!(settled.dropped.len(), 6);
    for (rule, n) in [("unknown-pod", 2), ("plan-not-passed", 2), ("target-not-passed", 2)] {
        assert_eq!(metrics.items_dropped("hostile-rule-breaker", rule), n, "{rule}");
    }
}

#[test]
fn a_guest_decides_a_fleet_of_ten_thousand_within_the_default_limits() {
    // The guests allocate by bumping a pointer and never free (policy-guest's
    // `bump-allocator`): the whole decision must still fit the default memory
    // limit, and agree with the native default item for item. (The deadline
    // is widened: a debug build beside other tests is no measure of time.)
    let limits = PolicyLimits { deadline: Duration::from_secs(10), ..PolicyLimits::default() };
    let policy =
        ComponentPolicy::load(Path::new(built::SCOPED_REVERT), limits, None).expect("loads");
    let f = fleet(10_000);
    let (decision, cost) = policy.decide_metered(&refusal(), &f).expect("fits the default limits");
    assert_eq!(decision, NativeDefault.decide(&refusal(), &f).unwrap());
    assert_eq!(decision.revert.len(), 5_000, "the half that did not load plan-2 is reverted");
    assert!(cost.fuel < PolicyLimits::default().fuel, "{cost:?}");
    assert!(cost.peak_memory > 0 && cost.peak_memory <= PolicyLimits::default().memory, "{cost:?}");
}

#[test]
fn the_fleet_revert_guest_keeps_its_notes() {
    let policy = load(built::FLEET_REVERT);
    let d = policy.decide(&refusal(), &fleet(2)).unwrap();
    assert_eq!(d.notes, ["plan-2 refused: 1 pod(s) back to plan-1"], "{d:?}");
    // No passed plan: the default's reverts to baselines, and the note saying so.
    let mut unknown = fleet(2);
    unknown.passed_plans = Arc::from([]);
    let d = policy.decide(&refusal(), &unknown).unwrap();
    assert_eq!(d.revert, policy_core::decide(&refusal(), &unknown).revert);
    assert_eq!(d.notes, ["no passed plan known: reverting to baselines"], "{d:?}");
    // Through the seat, the notes reach what the gate logs.
    let settled =
        PolicySeat::new(Arc::new(policy)).decide(&refusal(), &unknown, &PolicyMetrics::default());
    assert_eq!(settled.notes, ["no passed plan known: reverting to baselines"]);
}

#[test]
fn every_decision_gets_a_fresh_store() {
    let policy = load(built::HOSTILE_STATEFUL);
    for _ in 0..3 {
        let d = policy.decide(&refusal(), &fleet(1)).unwrap();
        assert_eq!(d.notes, ["call 1"]);
    }
}

#[test]
fn the_host_survives_hostile_guests_in_a_running_gate() {
    // The gate keeps deciding with the default while the guest fails.
    let mut seat = PolicySeat::new(Arc::new(load(built::HOSTILE_SPIN)));
    let metrics = PolicyMetrics::default();
    for _ in 0..3 {
        let settled = seat.decide(&refusal(), &fleet(2), &metrics);
        assert_eq!(settled.revert.len(), 1);
    }
    assert_eq!(
        metrics.failures("hostile-spin", "deadline") + metrics.failures("hostile-spin", "fuel"),
        3
    );
}

#[test]
fn hot_reload_keeps_the_old_policy_for_a_broken_candidate_and_takes_a_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let live_path = dir.path().join("policy.wasm");
    std::fs::copy(built::SCOPED_REVERT, &live_path).unwrap();
    let metrics = Arc::new(PolicyMetrics::default());
    let (mut reloader, live) =
        Reloader::start(live_path.clone(), PolicyLimits::default(), None, metrics.clone()).unwrap();
    assert_eq!(live.current().name(), "scoped-revert");
    assert_eq!(reloader.poll(), Ok(false), "unchanged");

    std::fs::copy(built::HOSTILE_OTHER_WORLD, &live_path).unwrap();
    assert!(reloader.poll().is_err(), "another world must be refused");
    assert_eq!(live.current().name(), "scoped-revert", "the old policy keeps deciding");
    std::fs::write(&live_path, b"\0asm garbage").unwrap();
    assert!(reloader.poll().is_err());
    assert_eq!(live.current().name(), "scoped-revert");
    assert_eq!(metrics.reloads(false), 2);

    // One that implements the world but fails the samples is taken, with a
    // warning and a metric, as at start: the seat's fallback covers it.
    std::fs::copy(built::HOSTILE_PANIC, &live_path).unwrap();
    assert_eq!(reloader.poll(), Ok(true));
    assert_eq!(live.current().name(), "hostile-panic");
    assert_eq!(metrics.sample_failures("hostile-panic"), 5, "every sample fails");
    let text = text(&metrics);
    assert!(
        text.contains(
            "rendergate_policy_sample_failures_total{policy=\"hostile-panic\",reason=\"trap\"} 5"
        ),
        "{text}"
    );
    assert_eq!(metrics.reloads(true), 1);

    std::fs::copy(built::FLEET_REVERT, &live_path).unwrap();
    assert_eq!(reloader.poll(), Ok(true));
    let policy = live.current();
    assert_eq!(policy.name(), "fleet-revert");
    let d = policy.decide(&refusal(), &fleet(2)).unwrap();
    assert!(
        d.revert.iter().all(|r| r.target == policy_core::RevertTarget::Plan("plan-1".into())),
        "{d:?}"
    );
    assert_eq!(metrics.reloads(true), 2);
}

#[test]
fn the_pool_holds_sixteen_live_components_shaped_like_python_ones() {
    // A componentize-py component instantiates 14 core modules, one of which
    // defines the memory the others share. 64 core instances held four.
    use wasm_encoder::{
        InstanceSection, MemorySection, MemoryType, Module, ModuleArg, ModuleSection,
    };
    let mut with_memory = Module::new();
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    with_memory.section(&memories);
    let mut component = wasm_encoder::Component::new();
    component.section(&ModuleSection(&with_memory));
    component.section(&ModuleSection(&Module::new()));
    let mut instances = InstanceSection::new();
    instances.instantiate(0, std::iter::empty::<(&str, ModuleArg)>());
    for _ in 1..14 {
        instances.instantiate(1, std::iter::empty::<(&str, ModuleArg)>());
    }
    component.section(&instances);
    let engine = rendergate_policy::component::engine(PolicyLimits::default().memory).unwrap();
    let component =
        wasmtime::component::Component::from_binary(&engine, &component.finish()).unwrap();
    let linker = wasmtime::component::Linker::<()>::new(&engine);
    let mut live = Vec::new();
    for n in 1..=16 {
        let mut store = wasmtime::Store::new(&engine, ());
        linker
            .instantiate(&mut store, &component)
            .unwrap_or_else(|e| panic!("live component {n}: {e:#}"));
        live.push(store);
    }
}

#[test]
fn the_cache_skips_compilation_and_never_trusts_a_bad_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::open(&dir.path().join("cache")).unwrap();
    let engine = &rendergate_policy::component::engine(PolicyLimits::default().memory).unwrap();
    let bytes = std::fs::read(built::OBSERVE_ONLY).unwrap();
    let (_, first) = cache.load_or_compile_traced(engine, &bytes).unwrap();
    assert_eq!(first, CacheUse::Compiled);
    let (_, second) = cache.load_or_compile_traced(engine, &bytes).unwrap();
    assert_eq!(second, CacheUse::Hit);
    // Corrupt the compiled artifact: it must be rebuilt, not deserialized.
    let artifact = std::fs::read_dir(cache.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .unwrap();
    let mut compiled = std::fs::read(&artifact).unwrap();
    let middle = compiled.len() / 2;
    compiled[middle] ^= 0xff;
    std::fs::write(&artifact, &compiled).unwrap();
    let (policy, third) = cache.load_or_compile_traced(engine, &bytes).unwrap();
    assert_eq!(third, CacheUse::Rebuilt);
    drop(policy);
    assert_eq!(
        cache.load_or_compile_traced(engine, &bytes).unwrap().1,
        CacheUse::Hit,
        "the rebuilt entry is good"
    );
}

/// The cache keeps the entries used last: a component stored into a full
/// cache pushes out the entry used longest ago, and a hit counts as a use.
#[test]
fn the_cache_keeps_the_entries_used_last() {
    use rendergate_policy::cache::KEPT;
    let dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::open(&dir.path().join("cache")).unwrap();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let entry = |name: &str, when| {
        let path = cache.dir().join(name);
        std::fs::write(&path, "x").unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
    };
    // a full cache of other policies, used over the last hour
    for i in 0..KEPT {
        let when = hour_ago + Duration::from_secs(60 * i as u64);
        entry(&format!("old{i}.cwasm"), when);
        entry(&format!("old{i}.sha256"), when);
    }
    let engine = &rendergate_policy::component::engine(PolicyLimits::default().memory).unwrap();
    let bytes = std::fs::read(built::OBSERVE_ONLY).unwrap();
    assert_eq!(cache.load_or_compile_traced(engine, &bytes).unwrap().1, CacheUse::Compiled);
    let names = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(cache.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cwasm"))
            .collect();
        names.sort();
        names
    };
    let listed = names();
    assert_eq!(listed.len(), KEPT, "{listed:?}");
    assert!(
        !listed.contains(&"old0.cwasm".to_owned()),
        "the entry used longest ago stays: {listed:?}"
    );
    assert!(!cache.dir().join("old0.sha256").exists());
    // a hit makes the new entry the last used again
    let new = listed.iter().find(|n| !n.starts_with("old")).unwrap().clone();
    let artifact = cache.dir().join(&new);
    std::fs::File::options().write(true).open(&artifact).unwrap().set_modified(hour_ago).unwrap();
    assert_eq!(cache.load_or_compile_traced(engine, &bytes).unwrap().1, CacheUse::Hit);
    let used = std::fs::metadata(&artifact).unwrap().modified().unwrap();
    assert!(used > hour_ago + Duration::from_secs(3000), "the hit did not mark the entry used");
}

#[test]
fn a_guest_that_sleeps_is_cut_at_its_deadline_not_after_its_sleep() {
    // hostile-sleep sleeps 200 ms in a WASI poll, where no epoch is checked.
    let policy = load(built::HOSTILE_SLEEP);
    for _ in 0..3 {
        let started = Instant::now();
        let e = policy.decide(&refusal(), &fleet(3)).expect_err("the sleep outlasts the deadline");
        assert_eq!(e.failure, PolicyFailure::Deadline);
        assert!(started.elapsed() < Duration::from_millis(150), "took {:?}", started.elapsed());
    }
}

#[test]
fn the_policy_worker_decides_in_order_and_a_sleeping_guest_costs_one_deadline_each() {
    use rendergate_policy::worker::PolicyWorker;
    let metrics = Arc::new(PolicyMetrics::default());
    let mut worker =
        PolicyWorker::start(PolicySeat::new(Arc::new(load(built::HOSTILE_SLEEP))), metrics.clone());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let started = Instant::now();
    let asked: Vec<u64> = (1..=20).map(|n| worker.ask(refusal(), fleet(n))).collect();
    let decided: Vec<_> =
        runtime.block_on(async { futures_collect(&mut worker, asked.len()).await });
    let took = started.elapsed();
    assert_eq!(decided.iter().map(|d| d.seq).collect::<Vec<_>>(), asked, "in the order asked");
    for (n, d) in (1..=20).zip(&decided) {
        assert_eq!(
            d.revert.len(),
            (0..n).filter(|i| i % 2 == 0).count(),
            "the default's decision for {n} pods"
        );
    }
    assert_eq!(metrics.failures("hostile-sleep", "deadline"), 20);
    // 20 deadlines of 50 ms, not 20 sleeps of 200 ms.
    assert!(took < Duration::from_millis(2500), "took {took:?}");
}

async fn futures_collect(
    worker: &mut rendergate_policy::worker::PolicyWorker,
    n: usize,
) -> Vec<rendergate_policy::worker::Decided> {
    let mut decided = Vec::new();
    while decided.len() < n {
        decided.push(worker.next().await.expect("the worker answers"));
    }
    decided
}

#[test]
fn a_printing_guest_decides_on_any_thread_even_inside_a_tokio_runtime() {
    // wasmtime-wasi's sync stdio once started a runtime inside the caller's and panicked.
    let policy = Arc::new(load(built::HOSTILE_PRINT));
    assert_eq!(
        policy.decide(&refusal(), &fleet(2)).unwrap(),
        NativeDefault.decide(&refusal(), &fleet(2)).unwrap()
    );
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let inside = policy.clone();
    let decided = runtime.block_on(async move {
        tokio::spawn(async move { inside.decide(&refusal(), &fleet(2)) }).await
    });
    assert_eq!(decided.unwrap().unwrap(), NativeDefault.decide(&refusal(), &fleet(2)).unwrap());
    let flood = load(built::HOSTILE_FLOOD);
    let default = NativeDefault.decide(&refusal(), &fleet(2)).unwrap();
    let dropped = rendergate_policy::stdio::dropped_bytes_counter();
    let before = dropped.get();
    assert_eq!(
        flood.decide(&refusal(), &fleet(2)).unwrap(),
        default,
        "a mebibyte of stderr is dropped, not a trap"
    );
    // what was dropped is counted for /metrics (rendergate_policy_output_dropped_bytes_total)
    let counted = dropped.get() - before;
    assert!(counted >= (1 << 20) - rendergate_policy::stdio::GUEST_OUTPUT_CAP as u64, "{counted}");
}
