//! `rendergate serve --shadow-policy` end to end, through the real binary
//! with components built from guest-policy/ (docs/policies.md, "Shadow
//! policies"; docs/protocol.md, the `shadow` line): a shadow that decides
//! otherwise gets `shadow` lines holding both decisions as the host's rules
//! leave them, and the difference counter moves; a shadow that decides the
//! same gets none; a hostile shadow (panic, spin, print) leaves the live
//! stream exactly as without a shadow, at 1, 4 and 100 pods; a slow shadow
//! delays no live line; and the action counters (docs/operations.md) equal
//! the `promote` and `revert` lines written.

use policy_artifacts as built;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod sample;
use sample::{haproxy, rendered};

const BIN: &str = env!("CARGO_BIN_EXE_rendergate");

fn applied(pod: usize, plan: &str, running: &str) -> Value {
    json!({"type": "applied", "pod": pod_name(pod), "plan": plan,
           "running_plan": running, "baseline_plan": "plan-0"})
}

fn pod_name(pod: usize) -> String {
    format!("ns/haproxy-{pod:03}")
}

/// What one run of `serve` wrote and counted.
struct Run {
    hello: Value,
    /// Every output line after `hello`, in order.
    outputs: Vec<Value>,
    log: String,
    /// `/metrics` once every expected line was out, before the input ended.
    metrics: String,
}

/// The run every test makes: plan-1 passes; `pods` pods take it (each is
/// promoted), then take plan-2, which HAProxy refuses (each is reverted).
/// `2 × pods + 2` triggers. `wait_for` is how many output lines to wait for
/// before `/metrics` is read and the input ends.
fn run(live: Option<&str>, shadow: Option<&str>, pods: usize, wait_for: usize) -> Run {
    run_logged(live, shadow, pods, wait_for, None)
}

/// `rendergate serve` with `args`, the test's haproxy, no check spacing and a
/// compile cache shared by these tests, every stream piped.
fn spawn_serve(args: &[&str]) -> Child {
    let cache = std::env::temp_dir().join("rendergate-test-policy-cache");
    std::process::Command::new(BIN)
        .args(["serve", "--check-interval", "0s", "--haproxy", &haproxy(), "--policy-cache"])
        .arg(cache)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rendergate serve")
}

/// [`run`], reading `/metrics` only once the log holds `logged.1` lines with `logged.0`.
fn run_logged(
    live: Option<&str>,
    shadow: Option<&str>,
    pods: usize,
    wait_for: usize,
    logged: Option<(&str, usize)>,
) -> Run {
    let mut args = vec!["--metrics-addr", "127.0.0.1:0"];
    if let Some(live) = live {
        args.extend(["--policy", live]);
    }
    if let Some(shadow) = shadow {
        args.extend(["--shadow-policy", shadow]);
    }
    let mut child = spawn_serve(&args);
    let mut serve = Serve::new(&mut child);
    let hello = serve.next_output();
    assert_eq!(hello["type"], "hello", "{hello}");
    serve.send(&rendered("plan-1", false));
    serve.until(|o| o["type"] == "verdict");
    for i in 0..pods {
        serve.send(&applied(i, "plan-1", "plan-0"));
    }
    for i in 0..pods {
        serve.send(&applied(i, "plan-2", "plan-1"));
    }
    serve.send(&rendered("plan-2", true));
    while serve.outputs.len() < wait_for {
        serve.next_output();
    }
    let addr = serve.metrics_addr();
    if let Some((text, count)) = logged {
        serve.until_logged(text, count);
    }
    let metrics = scrape(addr);
    drop(serve.stdin.take());
    let status = child.wait().unwrap();
    let (mut outputs, log) = serve.rest();
    assert!(status.success(), "serve exited with {status}\n{log}");
    let stdout = outputs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
    assert!(!stdout.contains("hostile"), "guest output on stdout:\n{stdout}");
    for output in &mut outputs {
        // What differs from run to run: the check's time, haproxy's pid.
        let output = output.as_object_mut().unwrap();
        output.remove("duration_ms");
        if let Some(Value::String(message)) = output.get_mut("message") {
            *message = without_pids(message);
        }
    }
    Run { hello, outputs, log, metrics }
}

/// `message` with every `(digits)` (haproxy's pid in its notices) as `(pid)`.
fn without_pids(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('(') {
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(')') {
            out.push_str("pid");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// Output and log lines of a running `serve`, read by threads.
struct Serve {
    stdin: Option<ChildStdin>,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    log: Vec<String>,
    outputs: Vec<Value>,
}

impl Serve {
    fn new(child: &mut Child) -> Serve {
        Serve {
            stdin: child.stdin.take(),
            stdout: lines_of(child.stdout.take().unwrap()),
            stderr: lines_of(child.stderr.take().unwrap()),
            log: vec![],
            outputs: vec![],
        }
    }

    fn send(&mut self, line: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next output line (the first is `hello`, not kept in `outputs`).
    fn next_output(&mut self) -> Value {
        let line = self.stdout.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| {
            self.log.extend(self.stderr.try_iter());
            panic!("no output line ({e}) after {:?}\n{}", self.outputs, self.log.join("\n"))
        });
        let value: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
        if value["type"] != "hello" {
            self.outputs.push(value.clone());
        }
        value
    }

    fn until(&mut self, done: impl Fn(&Value) -> bool) {
        while !done(&self.next_output()) {}
    }

    /// Reads the log until `count` lines contain `text`.
    fn until_logged(&mut self, text: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.log.iter().filter(|l| l.contains(text)).count() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.stderr.recv_timeout(left).unwrap_or_else(|e| {
                panic!("not {count} log lines with {text:?} ({e}):\n{}", self.log.join("\n"))
            });
            self.log.push(line);
        }
    }

    /// The address from the `metrics: listening on ADDR` log line.
    fn metrics_addr(&mut self) -> SocketAddr {
        loop {
            if let Some(addr) = self.log.iter().find_map(|l| {
                l.split("metrics: listening on ").nth(1).and_then(|a| a.trim().parse().ok())
            }) {
                return addr;
            }
            let line = self.stderr.recv_timeout(Duration::from_secs(20)).expect("a log line");
            self.log.push(line);
        }
    }

    /// After the process ended: every output line and the whole log.
    fn rest(mut self) -> (Vec<Value>, String) {
        for line in self.stdout.iter() {
            self.outputs.push(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}")),
            );
        }
        self.log.extend(self.stderr.iter());
        (self.outputs, self.log.join("\n"))
    }
}

fn lines_of(stream: impl Read + Send + 'static) -> mpsc::Receiver<String> {
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

/// `GET /metrics`, spoken by hand (HTTP/1.0).
fn scrape(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: test\r\n\r\n").unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200"), "{reply}");
    reply
}

/// The value of one series (`name{labels}`), 0 if absent.
fn metric(text: &str, series: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0)
}

fn of_type<'a>(outputs: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    outputs.iter().filter(move |o| o["type"] == kind)
}

/// Outputs without the `shadow` lines: the live stream.
fn live_stream(outputs: &[Value]) -> Vec<Value> {
    outputs.iter().filter(|o| o["type"] != "shadow").cloned().collect()
}

/// Live lines of the run: two verdicts, the latch, a promote and a revert per pod.
fn live_lines(pods: usize) -> usize {
    2 * pods + 3
}

/// A list of a `shadow` line's decision, as a set of its items' JSON.
fn items(decision: &Value, list: &str) -> BTreeSet<String> {
    decision[list].as_array().unwrap().iter().map(Value::to_string).collect()
}

fn promote_items(pods: usize) -> BTreeSet<String> {
    (0..pods).map(|i| json!({"pod": pod_name(i), "plan": "plan-1"}).to_string()).collect()
}

fn revert_items(pods: usize, to: &str) -> BTreeSet<String> {
    (0..pods).map(|i| json!({"pod": pod_name(i), "plan": "plan-2", "to": to}).to_string()).collect()
}

/// Checks every `promote` and `revert` line came before the `shadow` line
/// about its trigger, and no `shadow` line came inside a verdict's group.
fn assert_shadow_lines_follow_their_decisions(outputs: &[Value]) {
    for (at, line) in outputs.iter().enumerate().filter(|(_, o)| o["type"] == "shadow") {
        let before = &outputs[..at];
        for item in line["live"]["promote"].as_array().unwrap() {
            assert!(
                of_type(before, "promote").any(|p| p["pod"] == item["pod"]),
                "{line} came before its promote line: {outputs:?}"
            );
        }
        for item in line["live"]["revert"].as_array().unwrap() {
            assert!(
                of_type(before, "revert").any(|r| r["pod"] == item["pod"]),
                "{line} came before its revert line: {outputs:?}"
            );
        }
        // A verdict's group is verdict, latch, release, promote/revert: a
        // shadow line is never followed by a latch or release of a group it split.
        if let Some(next) = outputs.get(at + 1) {
            assert!(next["type"] != "latch" && next["type"] != "release", "{outputs:?}");
        }
    }
}

#[test]
fn a_shadow_that_reverts_the_fleet_differs_on_the_refusal_only_and_is_counted() {
    for (live, live_name) in [(None, "default"), (Some(built::SCOPED_REVERT), "scoped-revert")] {
        let pods = 4;
        let without = run(live, None, pods, live_lines(pods));
        let with = run(live, Some(built::FLEET_REVERT), pods, live_lines(pods) + 1);
        let context = format!("live {live_name}\n{}", with.log);
        assert_eq!(with.hello["policy"], live_name, "{}", with.hello);
        // hello's fields are the contract's five, with a shadow or without
        // (docs/protocol.md §2): the shadow is named in the log and metrics.
        assert_eq!(with.hello, without.hello, "hello with and without a shadow");
        assert_eq!(live_stream(&with.outputs), without.outputs, "{context}");
        let shadow: Vec<&Value> = of_type(&with.outputs, "shadow").collect();
        assert_eq!(shadow.len(), 1, "{shadow:?}\n{context}");
        let line = shadow[0];
        assert_eq!((&line["trigger"], &line["plan"]), (&json!("verdict"), &json!("plan-2")));
        assert!(line.get("pod").is_none(), "{line}");
        // The live policy reverts each pod to its baseline; the shadow, to
        // the last plan that passed.
        assert_eq!(items(&line["live"], "revert"), revert_items(pods, "baseline"), "{line}");
        assert_eq!(items(&line["shadow"], "revert"), revert_items(pods, "plan-1"), "{line}");
        assert!(
            items(&line["live"], "promote").is_empty()
                && items(&line["shadow"], "promote").is_empty()
        );
        assert_shadow_lines_follow_their_decisions(&with.outputs);
        let differences = |trigger: &str| {
            metric(
                &with.metrics,
                &format!(
                    "rendergate_shadow_differences_total{{policy=\"{live_name}\",shadow=\"fleet-revert\",trigger=\"{trigger}\"}}"
                ),
            )
        };
        assert_eq!((differences("verdict"), differences("applied")), (1, 0), "{}", with.metrics);
    }
}

#[test]
fn a_shadow_that_only_observes_differs_on_every_decision_and_each_line_holds_both_sets() {
    let pods = 4;
    let live = built::SCOPED_REVERT;
    let without = run(Some(live), None, pods, live_lines(pods));
    // One shadow line per promotion (applied) and one for the refusal (verdict).
    let with = run(Some(live), Some(built::OBSERVE_ONLY), pods, live_lines(pods) + pods + 1);
    assert_eq!(live_stream(&with.outputs), without.outputs, "{}", with.log);
    assert_shadow_lines_follow_their_decisions(&with.outputs);
    let shadow: Vec<&Value> = of_type(&with.outputs, "shadow").collect();
    assert_eq!(shadow.len(), pods + 1, "{shadow:?}");
    for line in &shadow {
        assert_eq!(
            items(&line["shadow"], "promote").len() + items(&line["shadow"], "revert").len(),
            0
        );
    }
    let applied: BTreeSet<String> = shadow
        .iter()
        .filter(|l| l["trigger"] == "applied")
        .map(|l| {
            assert!(l.get("plan").is_none(), "{l}");
            assert_eq!(items(&l["live"], "promote").len(), 1, "{l}");
            assert_eq!(l["live"]["promote"][0]["pod"], l["pod"], "{l}");
            l["live"]["promote"][0].to_string()
        })
        .collect();
    assert_eq!(applied, promote_items(pods));
    let verdict = shadow.iter().find(|l| l["trigger"] == "verdict").expect("the refusal's line");
    assert_eq!(items(&verdict["live"], "revert"), revert_items(pods, "baseline"), "{verdict}");
    let series = |trigger: &str| {
        format!(
            "rendergate_shadow_differences_total{{policy=\"scoped-revert\",shadow=\"observe-only\",trigger=\"{trigger}\"}}"
        )
    };
    assert_eq!(metric(&with.metrics, &series("applied")), pods as u64, "{}", with.metrics);
    assert_eq!(metric(&with.metrics, &series("verdict")), 1, "{}", with.metrics);
}

/// The same component; the built-in default against its ported guest; and
/// a shadow whose every item breaks a host rule beside a live policy that
/// decides nothing: the rules leave the shadow nothing either, so nothing differs.
#[test]
fn a_shadow_that_decides_as_the_live_policy_after_the_rules_writes_no_shadow_line() {
    let pods = 4;
    for (live, shadow, name, lines) in [
        (Some(built::SCOPED_REVERT), built::SCOPED_REVERT, "scoped-revert", live_lines(pods)),
        (None, built::SCOPED_REVERT, "scoped-revert", live_lines(pods)),
        // Two verdicts and the latch: observe-only promotes and reverts nothing.
        (Some(built::OBSERVE_ONLY), built::HOSTILE_RULE_BREAKER, "hostile-rule-breaker", 3),
    ] {
        let without = run(live, None, pods, lines);
        let with = run(live, Some(shadow), pods, lines);
        assert_eq!(with.hello, without.hello, "hello never names the shadow");
        assert!(with.log.contains(&format!("shadow=\"{name}\"")), "the shadow ran: {}", with.log);
        assert_eq!(with.outputs, without.outputs, "{}", with.log);
        assert!(!with.metrics.contains("rendergate_shadow_differences_total{"), "{}", with.metrics);
        assert!(!with.metrics.contains("rendergate_shadow_failures_total{"), "{}", with.metrics);
    }
}

/// A shadow that panics, spins or prints: the live stream is the one a run
/// without a shadow writes, line for line, and the gate exits 0.
#[test]
fn a_hostile_shadow_leaves_the_live_stream_as_without_a_shadow() {
    let live = built::SCOPED_REVERT;
    for pods in [1, 4, 100] {
        let without = run(Some(live), None, pods, live_lines(pods));
        for (guest, name) in [
            (built::HOSTILE_PANIC, "hostile-panic"),
            (built::HOSTILE_SPIN, "hostile-spin"),
            (built::HOSTILE_PRINT, "hostile-print"),
        ] {
            let failed =
                (name != "hostile-print").then_some(("this trigger is not compared", 2 * pods + 2));
            let with = run_logged(Some(live), Some(guest), pods, live_lines(pods), failed);
            let context = format!("{name}, {pods} pods\n{}", with.log);
            assert_eq!(with.outputs, without.outputs, "{context}");
            assert_eq!(with.hello, without.hello, "{context}");
            let summed = |family: &str, label: &str| -> u64 {
                with.metrics
                    .lines()
                    .filter(|l| l.starts_with(&format!("{family}{{{label}=\"{name}\"")))
                    .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
                    .sum()
            };
            let failures = summed("rendergate_shadow_failures_total", "shadow");
            // A shadow's failed samples at load are its own, never the live policy's.
            assert_eq!(summed("rendergate_policy_sample_failures_total", "policy"), 0, "{context}");
            let sample_failures = summed("rendergate_shadow_sample_failures_total", "shadow");
            if name == "hostile-print" {
                assert_eq!(failures, 0, "{context}");
                assert_eq!(sample_failures, 0, "{context}");
                let printed = with
                    .log
                    .lines()
                    .filter(|l| l.contains("guest: hostile-print: stdout: deciding for"))
                    .count();
                assert!(printed > 2 * pods, "its lines go to the log: {printed}\n{context}");
            } else {
                // /metrics was read once every trigger's failure was logged.
                assert_eq!(failures, 2 * pods as u64 + 2, "{context}\n{}", with.metrics);
                assert!(sample_failures > 0, "{context}\n{}", with.metrics);
                let logged =
                    with.log.lines().filter(|l| l.contains("this trigger is not compared")).count();
                assert_eq!(logged, 2 * pods + 2, "each trigger's failure logged\n{context}");
            }
        }
    }
}

/// A shadow taking 200 ms per decision (it sleeps in a host call, under a
/// deadline of 2 s): every live line is out long before the shadow is done
/// deciding, and the gate still waits for its last answer before exiting.
#[test]
fn a_slow_shadow_delays_no_live_line() {
    let pods = 6;
    let started = Instant::now();
    let mut child = spawn_serve(&[
        "--policy-deadline",
        "2s",
        "--policy",
        built::SCOPED_REVERT,
        "--shadow-policy",
        built::HOSTILE_SLEEP,
    ]);
    let mut serve = Serve::new(&mut child);
    serve.next_output();
    // Both verdicts first, so the timed part needs no haproxy check: only
    // the 2 × 6 reports' live decisions (a promote or a revert each, about a
    // millisecond), while the shadow needs 200 ms for each of them. A live
    // path that waited for the shadow would take 2.4 s at least.
    serve.send(&rendered("plan-1", false));
    serve.until(|o| o["type"] == "verdict");
    serve.send(&rendered("plan-2", true));
    serve.until(|o| o["type"] == "latch");
    let sent = Instant::now();
    for i in 0..pods {
        serve.send(&applied(i, "plan-1", "plan-0"));
    }
    for i in 0..pods {
        serve.send(&applied(i, "plan-2", "plan-1"));
    }
    while serve.outputs.len() < live_lines(pods) {
        serve.next_output();
    }
    let live_done = sent.elapsed();
    drop(serve.stdin.take());
    assert!(child.wait().unwrap().success());
    let (outputs, log) = serve.rest();
    let shadow_needs = Duration::from_millis(200 * (2 * pods as u64));
    assert!(
        live_done < shadow_needs / 2,
        "the live lines waited for the shadow: {live_done:?}\n{log}"
    );
    // 2 × 6 + 2 shadow decisions of 200 ms each, after the 5 samples: 2.8 s at least.
    let shadow_decisions = log.lines().filter(|l| l.contains("hostile-sleep: woke up")).count();
    assert_eq!(shadow_decisions, 5 + 2 * pods + 2, "{log}");
    assert!(started.elapsed() >= Duration::from_millis(200 * (2 * pods as u64 + 2)));
    assert_eq!(of_type(&outputs, "shadow").count(), 0, "it decides as the default: {outputs:?}");
}

/// `rendergate_policy_promotions_total` and `rendergate_policy_reverts_total`
/// equal the lines written, by policy and target; a shadow's decisions are
/// never counted there.
#[test]
fn the_action_counters_equal_the_promote_and_revert_lines() {
    let pods = 4;
    for (live, name, shadow) in [
        (None, "default", None),
        (Some(built::SCOPED_REVERT), "scoped-revert", Some(built::FLEET_REVERT)),
        (Some(built::FLEET_REVERT), "fleet-revert", Some(built::OBSERVE_ONLY)),
    ] {
        let shadow_lines = match shadow {
            None => 0,
            Some(s) if s == built::FLEET_REVERT => 1,
            Some(_) => pods + 1,
        };
        let r = run(live, shadow, pods, live_lines(pods) + shadow_lines);
        let promotions = of_type(&r.outputs, "promote").count() as u64;
        let reverts = |baseline: bool| {
            of_type(&r.outputs, "revert").filter(|l| (l["to"] == "baseline") == baseline).count()
                as u64
        };
        assert_eq!(promotions, pods as u64);
        let series = |metric: &str, labels: &str| {
            format!("rendergate_policy_{metric}_total{{policy=\"{name}\"{labels}}}")
        };
        let m = &r.metrics;
        assert_eq!(metric(m, &series("promotions", "")), promotions, "{name}\n{m}");
        let baseline = metric(m, &series("reverts", ",to=\"baseline\""));
        let plan = metric(m, &series("reverts", ",to=\"plan\""));
        assert_eq!((baseline, plan), (reverts(true), reverts(false)), "{name}\n{m}");
        assert_eq!(baseline + plan, pods as u64, "{name}");
        if name == "fleet-revert" {
            assert_eq!(plan, pods as u64, "fleet-revert reverts to the last passed plan");
        }
        for other in ["fleet-revert", "observe-only"].iter().filter(|o| **o != name) {
            assert!(!m.contains(&format!("policy=\"{other}\"}}")), "a shadow counted:\n{m}");
        }
    }
}

/// The shadow's file is watched as the live policy's is: a new component
/// there decides the next triggers, and a refused one leaves the shadow in force.
#[test]
fn the_shadow_hot_reloads_from_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shadow.wasm");
    std::fs::copy(built::SCOPED_REVERT, &file).unwrap();
    let file_arg = file.to_str().unwrap();
    let mut child = spawn_serve(&[
        "--policy-poll",
        "50ms",
        "--metrics-addr",
        "127.0.0.1:0",
        "--shadow-policy",
        file_arg,
    ]);
    let mut serve = Serve::new(&mut child);
    serve.next_output();
    serve.send(&rendered("plan-1", false));
    serve.until(|o| o["type"] == "verdict");
    serve.send(&applied(0, "plan-1", "plan-0"));
    serve.until(|o| o["type"] == "promote");
    // A file that is no component: refused, the shadow in force stays.
    std::fs::write(dir.path().join("staged"), b"not wasm").unwrap();
    std::fs::rename(dir.path().join("staged"), &file).unwrap();
    serve.until_logged("shadow reload refused", 1);
    serve.send(&applied(1, "plan-1", "plan-0"));
    serve.until(|o| o["type"] == "promote");
    std::fs::copy(built::OBSERVE_ONLY, dir.path().join("staged")).unwrap();
    std::fs::rename(dir.path().join("staged"), &file).unwrap();
    serve.until_logged("shadow reloaded shadow=\"observe-only\"", 1);
    serve.send(&applied(2, "plan-1", "plan-0"));
    serve.until(|o| o["type"] == "shadow");
    let metrics = scrape(serve.metrics_addr());
    drop(serve.stdin.take());
    assert!(child.wait().unwrap().success());
    let (outputs, log) = serve.rest();
    let shadow: Vec<&Value> = of_type(&outputs, "shadow").collect();
    assert_eq!(shadow.len(), 1, "only after the reload: {outputs:?}\n{log}");
    assert_eq!(shadow[0]["pod"], pod_name(2));
    assert_eq!(metric(&metrics, "rendergate_shadow_reloads_total{result=\"accepted\"}"), 1);
    assert_eq!(metric(&metrics, "rendergate_shadow_reloads_total{result=\"refused\"}"), 1);
    assert!(!metrics.contains("rendergate_policy_reloads_total{"), "the live policy's:\n{metrics}");
}
