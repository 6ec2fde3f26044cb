//! The figure a held render waits for: through `rendergate serve
//! --check-interval 0s`, from writing a `rendered` line to reading its
//! `verdict` line, against bare `haproxy -dr -c -f haproxy.cfg` on the same
//! files (its own copy as working directory, an empty environment), the two
//! alternated in one run, fresh content each round, at 100, 1,000 and
//! 10,000 backends, for a pass and for a refusal.
//!
//! `cargo bench -p rendergate --bench verdict` (`-- --quick`: 11 rounds
//! instead of 31; `-- --rounds N`; `-- --backends 10000`: only that size,
//! or a comma-separated list). The figure is the median of the
//! differences of each round's two runs, so that the machine's drift from
//! round to round cancels out. `RENDERGATE_TEST_HAPROXY` names the haproxy (default:
//! `haproxy` on PATH, else /usr/sbin/haproxy); `RENDERGATE_BENCH_SERVE_ARGS`
//! gives `serve` more flags (`--no-sandbox`: what the sandbox costs). Prints
//! one row per case: medians, their difference and ratio.

mod common;

use common::{bare, config, haproxy, median, ms};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Gate {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Gate {
    fn start() -> Gate {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rendergate"))
            .args(["serve", "--check-interval", "0s", "--log-level", "error", "--haproxy"])
            .arg(haproxy())
            .args(
                std::env::var("RENDERGATE_BENCH_SERVE_ARGS").unwrap_or_default().split_whitespace(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start rendergate serve");
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let mut hello = String::new();
        output.read_line(&mut hello).unwrap();
        assert!(hello.contains("\"hello\""), "{hello}");
        Gate { child, input, output }
    }

    /// From writing the `rendered` line to reading its verdict; whether it passed.
    fn judge(&mut self, render: &str, config: &str) -> (Duration, bool) {
        let mut line =
            serde_json::json!({"type": "rendered", "plan": render, "render": render, "config": config})
                .to_string();
        // the line and its newline in one write, as a controller writes a
        // line (the Go client does): a newline of its own would wake serve twice
        line.push('\n');
        let started = Instant::now();
        self.input.write_all(line.as_bytes()).unwrap();
        self.input.flush().unwrap();
        let mut out = String::new();
        loop {
            out.clear();
            assert!(self.output.read_line(&mut out).unwrap() > 0, "serve ended");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            if v["type"] == "verdict" && v["render"] == render {
                return (started.elapsed(), v["ok"] == true);
            }
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The quiet before each measurement: the gate makes the next check's
/// child a moment after a verdict (a few milliseconds of work), which a
/// bare run started at once would share the cores with.
const PAUSE: Duration = Duration::from_millis(20);

fn main() {
    let (rounds, sizes) = common::rounds_and_sizes(&[100, 1_000, 10_000]);
    let mut gate = Gate::start();
    println!(
        "serve rendered → verdict against bare haproxy -dr -c, medians of {rounds}, {}",
        haproxy()
    );
    println!(
        "| render | gate (median) | bare (median) | median of (gate − bare), pair by pair | of bare |"
    );
    println!("|---|---|---|---|---|");
    let mut round = 0;
    for backends in sizes {
        for refused in [false, true] {
            let (mut gate_times, mut bare_times) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                round += 1;
                let config = config(backends, refused, round);
                let render = format!("r-{round}");
                // renders some time apart, as from a controller: neither
                // run shares the cores with what the other left running
                std::thread::sleep(PAUSE);
                let (g, passed) = gate.judge(&render, &config);
                std::thread::sleep(PAUSE);
                let (b, bare_passed) = bare(&config);
                assert_eq!(passed, !refused, "the gate's verdict at {backends} backends");
                assert_eq!(bare_passed, !refused, "bare's verdict at {backends} backends");
                gate_times.push(g);
                bare_times.push(b);
            }
            // each round's gate against the bare run right after it: the
            // machine's drift between rounds cancels out
            let mut differences: Vec<f64> =
                gate_times.iter().zip(&bare_times).map(|(g, b)| ms(*g) - ms(*b)).collect();
            differences.sort_by(f64::total_cmp);
            let difference = differences[differences.len() / 2];
            let (g, b) = (median(gate_times), median(bare_times));
            let kind = if refused { "refused" } else { "pass" };
            println!(
                "| {backends} backends, {kind} | {:.1} ms | {:.1} ms | {:+.2} ms | {:.1}% |",
                ms(g),
                ms(b),
                difference,
                difference / ms(b) * 100.0
            );
        }
    }
}
