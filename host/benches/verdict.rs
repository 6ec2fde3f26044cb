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

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// `RENDERGATE_TEST_HAPROXY`, else `haproxy` on PATH, else /usr/sbin/haproxy.
fn haproxy() -> String {
    if let Ok(path) = std::env::var("RENDERGATE_TEST_HAPROXY") {
        return path;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("haproxy"))
        .find(|p| p.is_file());
    on_path.map_or_else(|| "/usr/sbin/haproxy".into(), |p| p.display().to_string())
}

/// `backends` backends of one server each behind one frontend; `refused`
/// adds a `use_backend` HAProxy refuses (the last line, so the whole config
/// is parsed). `round` makes each round's content new, so no verdict comes
/// from memory.
fn config(backends: usize, refused: bool, round: usize) -> String {
    let mut cfg = format!(
        "# round {round}\nglobal\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n\
frontend f\n  bind 127.0.0.1:18080\n  default_backend b0\n"
    );
    if refused {
        cfg.push_str("  use_backend nope if { path /nope }\n");
    }
    for i in 0..backends {
        cfg.push_str(&format!("backend b{i}\n  server s 127.0.0.1:{}\n", 10_000 + i % 50_000));
    }
    cfg
}

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

/// Bare haproxy over the same config, laid out on its own.
fn bare(config: &str) -> (Duration, bool) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("haproxy.cfg"), config).unwrap();
    let started = Instant::now();
    let status = Command::new(haproxy())
        .args(["-dr", "-c", "-f", "haproxy.cfg"])
        .current_dir(dir.path())
        .env_clear()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run haproxy");
    (started.elapsed(), matches!(status.code(), Some(0 | 2)))
}

/// The quiet before each measurement: the gate makes the next check's
/// child a moment after a verdict (a few milliseconds of work), which a
/// bare run started at once would share the cores with.
const PAUSE: Duration = Duration::from_millis(20);

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let asked =
        args.iter().position(|a| a == "--rounds").and_then(|i| args.get(i + 1)?.parse().ok());
    let rounds = asked.unwrap_or(if quick { 11 } else { 31 });
    // `--backends 10000` (or `100,1000`): only these sizes
    let sizes: Vec<usize> = args
        .iter()
        .position(|a| a == "--backends")
        .and_then(|i| args.get(i + 1))
        .map(|list| list.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1_000, 10_000]);
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
