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
//! the ratio moves with bare's own time, which drifts on a busy machine).

mod common;

use common::{bare, config, haproxy, median, ms};
use std::process::Command;
use std::time::Duration;

/// `rendergate check` over `config`, laid out on its own.
fn check(config: &str) -> (Duration, bool) {
    let (took, status) = common::timed(config, |dir| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rendergate"));
        command.args(["check", "--haproxy", &haproxy()]).arg(dir);
        command
    });
    (took, status.success())
}

/// The quiet before each run: neither shares the cores with the other.
const PAUSE: Duration = Duration::from_millis(20);

fn main() {
    let (rounds, sizes) = common::rounds_and_sizes(&[100, 1_000]);
    println!("rendergate check against bare haproxy -dr -c, {rounds} rounds, {}", haproxy());
    println!(
        "| render | check (median) | bare (median) | check / bare, median pair by pair | check − bare, median pair by pair |"
    );
    println!("|---|---|---|---|---|");
    let mut round = 0;
    for backends in sizes {
        let (mut checks, mut bares, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let mut differences = Vec::new();
        for _ in 0..rounds {
            round += 1;
            let config = config(backends, false, round);
            std::thread::sleep(PAUSE);
            let (c, passed) = check(&config);
            std::thread::sleep(PAUSE);
            let (b, bare_passed) = bare(&config);
            assert!(passed && bare_passed, "both pass at {backends} backends");
            ratios.push(ms(c) / ms(b));
            differences.push(ms(c) - ms(b));
            checks.push(c);
            bares.push(b);
        }
        ratios.sort_by(f64::total_cmp);
        differences.sort_by(f64::total_cmp);
        println!(
            "| {backends} backends | {:.1} ms | {:.1} ms | {:.3} | {:+.2} ms |",
            ms(median(checks)),
            ms(median(bares)),
            ratios[ratios.len() / 2],
            differences[differences.len() / 2]
        );
    }
}
