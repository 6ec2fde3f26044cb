//! One check, as a CI job or a pre-commit hook runs it: `rendergate check
//! DIR` as a whole process, against bare `haproxy -dr -c -f haproxy.cfg` on
//! the same files, the two alternated in one run, fresh content each round,
//! at 100 and 1,000 backends (a pass).
//!
//! `cargo bench -p rendergate --bench one_shot` (`-- --quick`: 11 rounds
//! instead of 31; `-- --rounds N`; `-- --backends 100,1000`).
//! `RENDERGATE_TEST_HAPROXY` names the haproxy. The figure is the median of
//! each round's ratio (check over bare), so that the machine's drift from
//! round to round cancels out; the medians of each are printed beside it,
//! and the median of each round's difference (what the gate adds, in ms:
//! the ratio moves with bare's own time, which drifts on a busy machine),
//! and of the gate's own time: the check's wall time less HAProxy's own run
//! in it (from the word to its exit, the `rendergate::timing` trace), which
//! HAProxy's drift does not move.

mod common;

use common::{bare, config, haproxy, haproxy_run, median, ms};
use std::io::Seek;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `rendergate check` over `config`, laid out on its own: how long it
/// took, whether it passed, and HAProxy's own run in it.
fn check(config: &str) -> (Duration, bool, Duration) {
    let (dir, trace) = (tempfile::tempdir().unwrap(), tempfile::tempfile().unwrap());
    std::fs::write(dir.path().join("haproxy.cfg"), config).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_rendergate"));
    command.args(["check", "--log-level", "rendergate::timing=trace", "--haproxy", &haproxy()]);
    command.arg(dir.path()).stdout(Stdio::null()).stderr(trace.try_clone().unwrap());
    let started = Instant::now();
    let status = command.status().expect("run rendergate check");
    let took = started.elapsed();
    let mut trace = trace;
    trace.rewind().unwrap();
    let trace = std::io::read_to_string(trace).unwrap();
    (took, status.success(), haproxy_run(&trace))
}

/// The quiet before each run: neither shares the cores with the other.
const PAUSE: Duration = Duration::from_millis(20);

fn main() {
    let (rounds, sizes) = common::rounds_and_sizes(&[100, 1_000]);
    println!("rendergate check against bare haproxy -dr -c, {rounds} rounds, {}", haproxy());
    println!(
        "| render | check (median) | bare (median) | check / bare, median pair by pair | check − bare, median pair by pair | the gate's own time (median) |"
    );
    println!("|---|---|---|---|---|---|");
    let mut round = 0;
    for backends in sizes {
        let (mut checks, mut bares, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let (mut differences, mut own) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            round += 1;
            let config = config(backends, false, round, 0);
            std::thread::sleep(PAUSE);
            let (c, passed, run) = check(&config);
            own.push(c.saturating_sub(run));
            std::thread::sleep(PAUSE);
            let (b, bare_passed) = bare(&config, &[]);
            assert!(passed && bare_passed, "both pass at {backends} backends");
            ratios.push(ms(c) / ms(b));
            differences.push(ms(c) - ms(b));
            checks.push(c);
            bares.push(b);
        }
        ratios.sort_by(f64::total_cmp);
        differences.sort_by(f64::total_cmp);
        println!(
            "| {backends} backends | {:.1} ms | {:.1} ms | {:.3} | {:+.2} ms | {:.2} ms |",
            ms(median(checks)),
            ms(median(bares)),
            ratios[ratios.len() / 2],
            differences[differences.len() / 2],
            ms(median(own))
        );
    }
}
