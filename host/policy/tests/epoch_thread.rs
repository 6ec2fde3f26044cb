//! The epoch thread runs only while a component is loaded: its own test
//! binary, since it counts the process's threads by name.

use policy_artifacts as built;
use policy_core::{Outcome, Verdict};
use rendergate_policy::{ComponentPolicy, Fleet, Policy, PolicyFailure, PolicyLimits, Trigger};
use std::path::Path;
use std::time::{Duration, Instant};

/// Threads of this process named as the epoch thread.
fn epoch_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == rendergate_policy::epoch::THREAD_NAME)
        .count()
}

/// Waits until `n` epoch threads run (a new thread names itself once it
/// starts, and a joined one leaves /proc a moment later).
fn expect_epoch_threads(n: usize, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while epoch_threads() != n {
        assert!(
            Instant::now() < deadline,
            "{why}: {} epoch threads, expected {n}",
            epoch_threads()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_epoch_thread_runs_while_a_component_is_loaded_and_only_then() {
    expect_epoch_threads(0, "no component loaded yet");
    let first =
        ComponentPolicy::load(Path::new(built::SCOPED_REVERT), PolicyLimits::default(), None)
            .unwrap();
    expect_epoch_threads(1, "a component is loaded");
    let second =
        ComponentPolicy::load(Path::new(built::QUORUM_PROMOTE), PolicyLimits::default(), None)
            .unwrap();
    expect_epoch_threads(1, "one engine, one thread");
    drop(first);
    expect_epoch_threads(1, "the second component still needs it");
    drop(second);
    expect_epoch_threads(0, "every component was dropped");
    // A component loaded again gets a ticking epoch again: a spinning guest is still stopped.
    // Fuel enough for hours: only the epoch, ticking again, can stop it.
    let limits = PolicyLimits { fuel: u64::MAX / 2, ..PolicyLimits::default() };
    let spin = ComponentPolicy::load(Path::new(built::HOSTILE_SPIN), limits, None).unwrap();
    expect_epoch_threads(1, "a component is loaded again");
    let failure =
        spin.decide(&refusal(), &Fleet::default()).expect_err("spins past its deadline").failure;
    assert_eq!(failure, PolicyFailure::Deadline);
    drop(spin);
    expect_epoch_threads(0, "the last component was dropped");
}

fn refusal() -> Trigger {
    Trigger::Verdict(Verdict {
        plan: "plan-2".into(),
        render: "r-2".into(),
        outcome: Outcome::Refused,
        newest: true,
        pinned: false,
        remembered: false,
        message: String::new(),
    })
}
