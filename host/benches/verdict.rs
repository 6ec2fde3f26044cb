//! The figure a held render waits for: through `rendergate serve
//! --check-interval 0s`, from writing a `rendered` line to reading its
//! `verdict` line, against bare `haproxy -dr -c -f haproxy.cfg` on the same
//! files (its own copy as working directory, an empty environment), the two
//! alternated in one run, fresh content each round, at 100, 1,000 and
//! 10,000 backends, for a pass and for a refusal.
//!
//! `cargo bench -p rendergate --bench verdict` (`-- --quick`: 11 rounds
//! instead of 31; `-- --rounds N`; `-- --backends 10000`: only that size,
//! or a comma-separated list; `-- --worlds root,config-dir`: a gate in
//! each world, see below; `-- --maps 20`: each render reads 20 map files
//! of its own, as HAPTIC's renders read theirs). The figure is the median
//! of the differences of each round's two runs, so that the machine's drift
//! from round to round cancels out. Which of the two goes first alternates
//! from round to round, and the run that goes first can be slower (here,
//! by up to 2 ms at times): the rounds where the gate went first and those
//! where bare did give a median each, and the figure is their mean (both
//! are printed), since a median over the two kinds together lands on one
//! side or the other.
//! `RENDERGATE_TEST_HAPROXY` names the haproxy (default: `haproxy` on PATH,
//! else /usr/sbin/haproxy); `RENDERGATE_BENCH_SERVE_ARGS` gives `serve` more
//! flags (`--no-sandbox`: what the sandbox costs). Prints one row per case
//! and world: medians, their difference and ratio, and the gate's own
//! time: each verdict's wait less HAProxy's own run in it (from the word
//! to its exit, by the `rendergate::timing` trace), which HAProxy's drift
//! from run to run does not move.
//!
//! `--worlds`: `root` (the default) is the gate's strongest world on this
//! host; `config-dir` is the world of a pod under containerd's
//! RuntimeDefault (no namespaces, each render laid out in `--config-dir`,
//! an empty directory of the bench's own), made here by
//! `RENDERGATE_SANDBOX_DISABLE=userns,netns,mountns`. Given both, one gate
//! runs in each and they take turns within every round, so the two worlds'
//! figures come from the same minutes.

mod common;

use common::{bare, config, haproxy, haproxy_run, map_files, median, ms};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Gate {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    /// Its stderr: the timing trace, read as it grows (by a description
    /// of its own, whose offset the gate's writes do not move).
    trace: std::fs::File,
    /// A line read in part, completed by the next read.
    carry: String,
    _trace_file: tempfile::NamedTempFile,
}

impl Gate {
    /// `serve` in `world` (`root` or `config-dir`, whose directory is
    /// `config_dir`).
    fn start(world: &str, config_dir: &std::path::Path) -> Gate {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rendergate"));
        command.args(["serve", "--check-interval", "0s", "--haproxy"]).arg(haproxy()).args(
            std::env::var("RENDERGATE_BENCH_SERVE_ARGS").unwrap_or_default().split_whitespace(),
        );
        match world {
            "root" => {}
            "config-dir" => {
                command.arg("--config-dir").arg(config_dir);
                command.env("RENDERGATE_SANDBOX_DISABLE", "userns,netns,mountns");
            }
            other => panic!("--worlds: {other:?} is neither root nor config-dir"),
        }
        command.args(["--log-level", "error,rendergate::timing=trace"]);
        let trace_file = tempfile::NamedTempFile::new().unwrap();
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(trace_file.reopen().unwrap())
            .spawn()
            .expect("start rendergate serve");
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let mut hello = String::new();
        output.read_line(&mut hello).unwrap();
        assert!(hello.contains("\"hello\""), "{hello}");
        let trace = trace_file.reopen().unwrap();
        Gate { child, input, output, trace, carry: String::new(), _trace_file: trace_file }
    }

    /// From writing the `rendered` line to reading its verdict; whether it
    /// passed; HAProxy's own run in it.
    fn judge(
        &mut self,
        render: &str,
        config: &str,
        maps: &[(String, String)],
    ) -> (Duration, bool, Duration) {
        let files: Vec<_> = maps
            .iter()
            .map(|(path, content)| serde_json::json!({"kind": "map", "path": path, "content": content}))
            .collect();
        let mut line = serde_json::json!({"type": "rendered", "plan": render, "render": render, "config": config, "files": files})
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
                let took = started.elapsed();
                // traced before the verdict was written; the file is read
                // on from where the last verdict left it
                self.trace.read_to_string(&mut self.carry).unwrap();
                let lines = self.carry.rfind('\n').map_or(0, |end| end + 1);
                let trace: String = self.carry.drain(..lines).collect();
                return (took, v["ok"] == true, haproxy_run(&trace));
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

/// `--maps N`: each render reads N map files of its own (0 by default).
fn maps() -> usize {
    let args: Vec<String> = std::env::args().collect();
    let asked = args.iter().position(|a| a == "--maps").and_then(|i| args.get(i + 1));
    asked.map_or(0, |n| n.parse().expect("--maps takes a number"))
}

/// The worlds asked for (`--worlds root,config-dir`), `root` by default.
fn worlds() -> Vec<String> {
    let args: Vec<String> = std::env::args().collect();
    let list = args.iter().position(|a| a == "--worlds").and_then(|i| args.get(i + 1));
    let worlds: Vec<String> =
        list.map_or_else(|| vec!["root".to_owned()], |l| l.split(',').map(str::to_owned).collect());
    // two gates in one world would share its config directory
    let mut unique = worlds.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), worlds.len(), "--worlds names a world twice: {worlds:?}");
    worlds
}

fn main() {
    let (rounds, sizes) = common::rounds_and_sizes(&[100, 1_000, 10_000]);
    let maps = maps();
    let config_dir = tempfile::tempdir().unwrap();
    let worlds = worlds();
    let mut gates: Vec<Gate> = worlds.iter().map(|w| Gate::start(w, config_dir.path())).collect();
    println!(
        "serve rendered → verdict against bare haproxy -dr -c, medians of {rounds}, {} map files a render, {}",
        maps,
        haproxy()
    );
    println!(
        "| render | world | gate (median) | bare (median) | gate − bare, pair by pair | of bare | gate first / bare first | the gate's own time (median) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut round = 0;
    for backends in sizes {
        for refused in [false, true] {
            // per world: the gate's times and those of the bare run paired with each
            let mut times = vec![(Vec::new(), Vec::new(), Vec::new(), Vec::new()); gates.len()];
            for _ in 0..rounds {
                round += 1;
                let config = config(backends, refused, round, maps);
                let files = map_files(maps, round);
                let render = format!("r-{round}");
                for turn in 0..gates.len() {
                    // the worlds take turns going first, and so do gate and bare
                    let which = (turn + round) % gates.len();
                    let gate_first = (round / gates.len()).is_multiple_of(2);
                    let gate = &mut gates[which];
                    // renders some time apart, as from a controller: neither
                    // run shares the cores with what the other left running
                    let mut judge = || {
                        std::thread::sleep(PAUSE);
                        gate.judge(&render, &config, &files)
                    };
                    let alone = || {
                        std::thread::sleep(PAUSE);
                        bare(&config, &files)
                    };
                    let ((g, passed, run), (b, bare_passed)) = if gate_first {
                        let g = judge();
                        (g, alone())
                    } else {
                        let b = alone();
                        (judge(), b)
                    };
                    assert_eq!(passed, !refused, "the gate's verdict at {backends} backends");
                    assert_eq!(bare_passed, !refused, "bare's verdict at {backends} backends");
                    times[which].0.push(g);
                    times[which].1.push(b);
                    times[which].2.push(g.saturating_sub(run));
                    times[which].3.push(gate_first);
                }
            }
            for (world, (gate_times, bare_times, own, firsts)) in worlds.iter().zip(times) {
                // each gate run against its own bare run: the machine's
                // drift between rounds cancels out; per order, then the mean
                let pairs = gate_times.iter().zip(&bare_times).zip(&firsts);
                let of_order = |first: bool| {
                    let mut d: Vec<f64> = pairs
                        .clone()
                        .filter(|(_, gate_first)| **gate_first == first)
                        .map(|((g, b), _)| ms(*g) - ms(*b))
                        .collect();
                    d.sort_by(f64::total_cmp);
                    d[d.len() / 2]
                };
                let (gate_first, bare_first) = (of_order(true), of_order(false));
                let difference = (gate_first + bare_first) / 2.0;
                let (g, b) = (median(gate_times), median(bare_times));
                let kind = if refused { "refused" } else { "pass" };
                println!(
                    "| {backends} backends, {kind} | {world} | {:.1} ms | {:.1} ms | {:+.2} ms | {:.1}% | {:+.2} / {:+.2} ms | {:.2} ms |",
                    ms(g),
                    ms(b),
                    difference,
                    difference / ms(b) * 100.0,
                    gate_first,
                    bare_first,
                    ms(median(own))
                );
            }
        }
    }
}
