//! Policies that print, flood stderr, read stdin or sleep, run through the
//! real `rendergate serve --policy`, from the start and by hot reload, with
//! fleets of 1, 4 and 100 pods: every render gets its verdict, every trigger
//! a decision, `serve` exits 0 with every output written, the guest's output
//! is in the log (stderr) and never on stdout (docs/policies.md, "What a
//! policy may print", and "Limits").

use policy_artifacts as built;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod sample;
use sample::{haproxy, rendered};

const BIN: &str = env!("CARGO_BIN_EXE_rendergate");
const SIZES: [usize; 3] = [1, 4, 100];

fn applied(pod: usize, plan: &str, running: &str) -> Value {
    json!({"type": "applied", "pod": format!("ns/haproxy-{pod}"), "plan": plan,
           "running_plan": running, "baseline_plan": "plan-0"})
}

/// A running `rendergate serve`: stdout and stderr read by threads.
struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    log: Vec<String>,
    seen: Vec<Value>,
}

impl Serve {
    fn start(policy: &Path, extra: &[&str]) -> Serve {
        let cache = std::env::temp_dir().join("rendergate-test-policy-cache");
        let mut child = std::process::Command::new(BIN)
            .args(["serve", "--check-interval", "0s", "--haproxy", &haproxy(), "--policy"])
            .arg(policy)
            .arg("--policy-cache")
            .arg(cache)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rendergate serve");
        let stdout = lines_of(child.stdout.take().unwrap());
        let stderr = lines_of(child.stderr.take().unwrap());
        let hello = stdout.recv_timeout(Duration::from_secs(30)).expect("serve's hello line");
        assert!(hello.starts_with(r#"{"type":"hello","#), "serve's first line: {hello}");
        Serve { stdin: child.stdin.take(), child, stdout, stderr, log: vec![], seen: vec![] }
    }

    fn send(&mut self, line: &Value) {
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    fn send_raw(&mut self, line: &str) {
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// Output lines up to and including the next verdict.
    fn until_verdict(&mut self) {
        self.stdin.as_mut().unwrap().flush().unwrap();
        loop {
            let line =
                self.stdout.recv_timeout(Duration::from_secs(30)).expect("a verdict within 30 s");
            let value: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
            let done = value["type"] == "verdict";
            self.seen.push(value);
            if done {
                return;
            }
        }
    }

    /// Log lines until one contains `text`.
    fn until_logged(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let line =
                self.stderr.recv_timeout(deadline.saturating_duration_since(Instant::now())).unwrap_or_else(|e| {
                    panic!(
                        "no log line with {text:?} ({e}: 30 s or the end of the log); log so far:\n{}",
                        self.log.join("\n")
                    )
                });
            let done = line.contains(text);
            self.log.push(line);
            if done {
                return;
            }
        }
    }

    /// Ends the input; every output line, the whole log, and the exit status.
    fn finish(mut self) -> (Vec<Value>, String, std::process::ExitStatus) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        let mut outputs = std::mem::take(&mut self.seen);
        for line in self.stdout.iter() {
            outputs.push(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON on stdout: {line}: {e}")),
            );
        }
        self.log.extend(self.stderr.iter());
        (outputs, self.log.join("\n"), status)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines_of(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The fleet's part of the run, after plan-1's verdict: `pods` pods take
/// plan-1 (each is promoted), then plan-2, which is refused (each is reverted).
/// 2 × pods + 1 triggers.
fn fleet_reports(serve: &mut Serve, pods: usize) {
    for i in 0..pods {
        serve.send(&applied(i, "plan-1", "plan-0"));
    }
    for i in 0..pods {
        serve.send(&applied(i, "plan-2", "plan-1"));
    }
    serve.send(&rendered("plan-2", true));
}

/// What the default decides for that run, line by line.
fn expected(pods: usize) -> Vec<(String, String)> {
    let mut lines = vec![("verdict".to_string(), "plan-1 ok".to_string())];
    lines.extend((0..pods).map(|i| ("promote".into(), format!("ns/haproxy-{i} plan-1"))));
    lines.push(("verdict".into(), "plan-2 refused".into()));
    lines.push(("latch".into(), "pessimistic".into()));
    // A verdict's decision goes over the fleet, which is kept sorted by pod.
    let mut reverts: Vec<String> = (0..pods).map(|i| format!("ns/haproxy-{i} plan-2")).collect();
    reverts.sort();
    lines.extend(reverts.into_iter().map(|r| ("revert".into(), r)));
    lines
}

fn summary(outputs: &[Value]) -> Vec<(String, String)> {
    outputs
        .iter()
        .map(|o| {
            let kind = o["type"].as_str().unwrap().to_string();
            let what = match kind.as_str() {
                "verdict" => {
                    format!(
                        "{} {}",
                        o["plan"].as_str().unwrap(),
                        if o["ok"] == true { "ok" } else { "refused" }
                    )
                }
                "latch" => o["state"].as_str().unwrap().to_string(),
                _ => format!(
                    "{} {}",
                    o["pod"].as_str().unwrap_or("?"),
                    o["plan"].as_str().unwrap_or("?")
                ),
            };
            (kind, what)
        })
        .collect()
}

/// How the policy arrives.
#[derive(Clone, Copy, Debug)]
enum Arrival {
    AtStart,
    /// The gate starts with scoped-revert; the guest replaces its file, and
    /// the gate's polling of the file takes it. (Not SIGHUP: sent before the
    /// gate's handler is in place, it would end the process.)
    HotReload,
}

/// Runs one hostile guest through serve with `pods` pods; checks what every
/// such run must show and returns the log for the guest-specific checks.
fn run(guest: &str, name: &str, pods: usize, arrival: Arrival, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file: PathBuf = dir.path().join("policy.wasm");
    let first = match arrival {
        Arrival::AtStart => guest,
        Arrival::HotReload => built::SCOPED_REVERT,
    };
    std::fs::copy(first, &file).unwrap();
    let mut args = vec!["--policy-poll", "50ms"];
    args.extend_from_slice(extra);
    let mut serve = Serve::start(&file, &args);
    serve.send(&rendered("plan-1", false));
    serve.until_verdict();
    if let Arrival::HotReload = arrival {
        let staged = dir.path().join("staged.wasm");
        std::fs::copy(guest, &staged).unwrap();
        std::fs::rename(&staged, &file).unwrap();
        serve.until_logged(&format!("policy reloaded policy=\"{name}\""));
    }
    fleet_reports(&mut serve, pods);
    let (outputs, log, status) = serve.finish();
    let context = format!("{guest} ({arrival:?}, {pods} pods)");
    assert!(status.success(), "{context}: serve exited with {status}\n{log}");
    let (got, want) = (summary(&outputs), expected(pods));
    if let Some(at) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "{context}: output {at} is {:?}, not {:?} (every render its verdict, every trigger its decision): {got:?}\n{log}",
            got.get(at),
            want.get(at)
        );
    }
    let stdout = outputs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
    assert!(!stdout.contains("hostile"), "{context}: guest output on stdout:\n{stdout}");
    assert!(
        log.contains(&format!("policy=\"{name}\"")),
        "{context}: the log names the policy:\n{log}"
    );
    assert!(!log.contains("panicked"), "{context}:\n{log}");
    log
}

fn every_run(guest: &str, name: &str, check: impl Fn(&str, usize)) {
    for arrival in [Arrival::AtStart, Arrival::HotReload] {
        for pods in SIZES {
            let log = run(guest, name, pods, arrival, &[]);
            check(&log, pods);
        }
    }
}

fn guest_lines<'a>(log: &'a str, text: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    log.lines().filter(move |l| l.contains("guest: ") && l.contains(text))
}

#[test]
fn a_guest_that_prints_on_every_call_decides_and_its_lines_go_to_the_log() {
    every_run(built::HOSTILE_PRINT, "hostile-print", |log, pods| {
        // Every trigger of the fleet's part, on both streams, tagged with the trigger kind.
        for stream in ["stdout", "stderr"] {
            let said = format!("hostile-print: {stream}: deciding for {pods} pods");
            let lines: Vec<&str> = guest_lines(log, &said).collect();
            assert!(lines.len() > pods, "{stream}: {} lines for {pods} pods:\n{log}", lines.len());
            assert!(lines.iter().all(|l| l.contains(&format!("stream=\"{stream}\""))), "{lines:?}");
            assert!(lines.iter().any(|l| l.contains("trigger=\"verdict\"")), "{lines:?}");
        }
    });
}

#[test]
fn a_guest_that_writes_a_mebibyte_to_stderr_per_call_is_cut_to_the_budget() {
    every_run(built::HOSTILE_FLOOD, "hostile-flood", |log, pods| {
        assert!(
            guest_lines(log, &format!("hostile-flood: {pods} pods")).count() > 0,
            "{pods} pods"
        );
        let dropped = log.lines().filter(|l| l.contains("dropped_bytes=")).count();
        assert!(dropped > 2 * pods, "every decision's excess counted: {dropped} for {pods} pods");
        // 64 KiB of 1 KiB lines per decision, not a mebibyte.
        let kept = guest_lines(log, "hostile-flood").count();
        assert!(kept <= 70 * (2 * pods + 1 + 10), "{kept} lines kept for {pods} pods");
    });
}

#[test]
fn a_guest_that_prints_only_at_four_pods_or_more_keeps_the_gate_running() {
    every_run(built::HOSTILE_PRINT_LATE, "hostile-print-late", |log, pods| {
        let printed = guest_lines(log, "hostile-print-late:").count();
        if pods < 4 {
            assert_eq!(printed, 0, "{log}");
        } else {
            assert!(
                guest_lines(log, &format!("hostile-print-late: {pods} pods now")).count() > pods,
                "{log}"
            );
        }
    });
}

#[test]
fn a_guest_that_reads_stdin_reads_nothing_and_never_the_gates_input() {
    every_run(built::HOSTILE_STDIN, "hostile-stdin", |log, pods| {
        let reads: Vec<&str> = guest_lines(log, "hostile-stdin: read").collect();
        assert!(reads.len() > 2 * pods, "{log}");
        assert!(reads.iter().all(|l| l.contains("read 0 bytes (Ok(0))")), "{reads:?}");
    });
}

/// With a deadline above its sleep the guest passes the sample triggers and
/// starts: each decision then takes 200 ms. Those wait on the policy worker;
/// an error line for a bad input line does not, and each verdict's lines
/// still come together (docs/embedding.md, "Where decisions run").
#[test]
fn a_slow_policy_delays_decisions_not_error_lines() {
    let pods = 6;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.wasm");
    std::fs::copy(built::HOSTILE_SLEEP, &file).unwrap();
    let mut serve = Serve::start(&file, &["--policy-deadline", "2s"]);
    serve.send(&rendered("plan-1", false));
    serve.until_verdict();
    let started = Instant::now();
    fleet_reports(&mut serve, pods);
    serve.send_raw("{\"type\":\"nonsense\"}");
    let (outputs, log, status) = serve.finish();
    assert!(status.success(), "{log}");
    let lines: Vec<&str> = outputs.iter().map(|o| o["type"].as_str().unwrap()).collect();
    let error = lines
        .iter()
        .position(|t| *t == "error")
        .unwrap_or_else(|| panic!("no error line: {lines:?}"));
    let mut decided = outputs.clone();
    decided.remove(error);
    assert_eq!(summary(&decided), expected(pods), "{log}");
    // 2 × 6 + 1 decisions of 200 ms each: the error line came before most of them.
    assert!(error < 1 + pods, "the error line waited for the policy: {lines:?}");
    assert!(started.elapsed() >= Duration::from_millis(200 * (2 * pods as u64 + 1)));
    assert_eq!(
        guest_lines(&log, "hostile-sleep: woke up").count(),
        5 + 2 * pods + 2,
        "the samples and every trigger"
    );
}

/// A guest sleeping 200 ms in a host call costs one deadline per decision,
/// at start (it fails the sample triggers: `serve` starts it with a warning)
/// and by reload.
#[test]
fn a_guest_that_sleeps_costs_one_deadline_per_decision_through_serve() {
    for arrival in [Arrival::AtStart, Arrival::HotReload] {
        for pods in SIZES {
            let started = Instant::now();
            let log = run(built::HOSTILE_SLEEP, "hostile-sleep", pods, arrival, &[]);
            let triggers = 2 * pods as u32 + 2;
            assert!(
                started.elapsed() < Duration::from_millis(50) * triggers + Duration::from_secs(3),
                "{arrival:?} {pods}"
            );
            let fallbacks =
                log.lines().filter(|l| l.contains("the default policy decided instead")).count();
            assert!(fallbacks > 2 * pods, "every trigger the fallback: {fallbacks}");
            assert!(guest_lines(&log, "hostile-sleep: sleeping").count() > 2 * pods);
            assert_eq!(guest_lines(&log, "hostile-sleep: woke up").count(), 0, "{log}");
        }
    }
}

/// A FIFO swapped in for the policy file (or any file that is not a
/// regular one) is a refused candidate, said at once: opening it used to
/// hold the reloader until a writer came, and serve then never ended.
#[test]
fn a_fifo_in_place_of_the_policy_is_refused_and_serve_still_ends() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.wasm");
    std::fs::copy(built::SCOPED_REVERT, &file).unwrap();
    let mut serve = Serve::start(&file, &["--policy-poll", "50ms"]);
    let fifo = dir.path().join("staged.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::fs::rename(&fifo, &file).unwrap();
    serve.until_logged("not a regular file");
    serve.send(&rendered("plan-1", false));
    serve.until_verdict();
    let started = Instant::now();
    let (_, log, status) = serve.finish();
    assert!(status.success(), "{status}\n{log}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}\n{log}", started.elapsed());
    assert!(log.contains("policy=\"scoped-revert\""), "{log}");
}
