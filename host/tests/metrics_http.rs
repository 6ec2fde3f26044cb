//! The metrics endpoint: `/metrics` scraped from the real `rendergate serve`
//! (real haproxy) after a refusal; `/healthz` while a slow haproxy runs into
//! its timeout, while nobody reads the gate's outputs, and while a checker
//! blocks its worker past the timeout; bind errors at start-up.
//!
//! HTTP is spoken by hand over a `TcpStream` (HTTP/1.0, one request per
//! connection): no client crate.

use rendergate::check::{CheckFuture, Checked, Checker};
use rendergate::{CheckOutcome, Event, Gate, GateConfig, Output, PolicySeat, Render};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

// The end-to-end tests' helpers: the binary, haproxy, the sample render.
#[allow(dead_code)]
#[path = "../../tests/e2e/support.rs"]
mod support;
use support::{BIN, broken_config, haproxy, rendered, sample_config, serve_command};

/// One HTTP response: status, headers (lower-case names), body.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

fn request(addr: SocketAddr, method: &str, path: &str) -> Reply {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .expect("connect to the metrics endpoint");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("a whole response");
    let (head, body) =
        raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no end of headers in {raw:?}"));
    let mut lines = head.lines();
    let status_line = lines.next().unwrap();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{status_line}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply { status, headers, body: body.to_owned() }
}

fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path)
}

/// The value of one sample line (`name{labels} value`) in a scrape.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Polls `path` until `want` holds for the reply; fails after `within`.
fn poll_until(
    addr: SocketAddr,
    path: &str,
    within: Duration,
    want: impl Fn(&Reply) -> bool,
) -> Reply {
    let deadline = Instant::now() + within;
    loop {
        let reply = get(addr, path);
        if want(&reply) {
            return reply;
        }
        assert!(
            Instant::now() < deadline,
            "{path} still {} {:?} after {within:?}",
            reply.status,
            reply.body
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A running `rendergate serve --metrics-addr 127.0.0.1:0`; the bound
/// address is read from its `metrics: listening on ADDR` log line.
struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    addr: SocketAddr,
}

impl Serve {
    fn start(extra: &[&str]) -> Serve {
        Serve::start_with(extra, &[])
    }

    /// As [`Serve::start`], with these variables in serve's environment.
    fn start_with(extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut child = serve_command(extra)
            .envs(env.iter().copied())
            .args(["--metrics-addr", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rendergate serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("serve: {line}"); // shown when a test fails
                if let Some(addr) = listening_on(&line) {
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a `metrics: listening on ADDR` log line");
        let mut stdout = child.stdout.take();
        let hello = read_line_unbuffered(stdout.as_mut().unwrap());
        assert!(hello.starts_with(r#"{"type":"hello","#), "serve's first line: {hello}");
        Serve { stdin: child.stdin.take(), stdout, child, addr }
    }

    fn send(&mut self, line: &Value) {
        let stdin = self.stdin.as_mut().expect("input still open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Output lines, read on a thread of their own from now on.
    fn outputs(&mut self) -> Outputs {
        let stdout = self.stdout.take().expect("outputs not taken yet");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value: Value =
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Outputs(rx)
    }

    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `… metrics: listening on 127.0.0.1:PORT …`, in text or JSON logs.
fn listening_on(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("metrics: listening on ")? + "metrics: listening on ".len()..];
    let end =
        rest.find(|c: char| !(c.is_ascii_hexdigit() || ".:[]".contains(c))).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

struct Outputs(mpsc::Receiver<Value>);

impl Outputs {
    /// Output lines up to and including the next of `kind`; fails after 20 s.
    fn until(&self, kind: &str) -> Vec<Value> {
        let mut seen = vec![];
        loop {
            let line = self
                .0
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no {kind} within 20 s: {seen:?}"));
            let done = line["type"] == kind;
            seen.push(line);
            if done {
                return seen;
            }
        }
    }
}

#[test]
fn a_refusal_moves_the_counter_and_the_gauges_on_metrics() {
    let mut serve = Serve::start(&[]);
    let outputs = serve.outputs();
    let addr = serve.addr;

    let health = get(addr, "/healthz");
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    let before = get(addr, "/metrics");
    assert_eq!(before.status, 200);
    assert_eq!(before.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    assert!(
        before.body.contains("# TYPE rendergate_config_rejected_total counter\n"),
        "{}",
        before.body
    );
    assert_eq!(
        sample(&before.body, "rendergate_config_rejected_total"),
        Some(0.0),
        "{}",
        before.body
    );
    assert_eq!(sample(&before.body, "rendergate_latch_state{reason=\"none\"}"), Some(1.0));
    assert!(before.body.contains("rendergate_sandbox_layer{layer="), "{}", before.body);

    // One refusal: the counter moves, the latch closes, nothing is pinned yet.
    serve.send(&rendered("plan-1", "r-1", &broken_config()));
    let seen = outputs.until("latch");
    assert_eq!(seen[0]["type"], "verdict");
    assert_eq!(seen[0]["refused"], true, "{seen:?}");
    let text = get(addr, "/metrics").body;
    assert_eq!(sample(&text, "rendergate_config_rejected_total"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rendergate_checks_total{outcome=\"refused\"}"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rendergate_check_duration_seconds_count"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rendergate_latch_state{reason=\"refused\"}"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rendergate_latch_state{reason=\"none\"}"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "rendergate_config_pinned{reason=\"refused\"}"), Some(0.0), "{text}");
    assert!(sample(&text, "rendergate_renders_retained") >= Some(1.0), "{text}");

    // The same plan and content again (a re-render): remembered, no second
    // check, and now pinned.
    serve.send(&rendered("plan-1", "r-2", &broken_config()));
    let seen = outputs.until("verdict");
    assert_eq!(
        (seen[0]["remembered"].clone(), seen[0]["pinned"].clone()),
        (json!(true), json!(true)),
        "{seen:?}"
    );
    let text = get(addr, "/metrics").body;
    assert_eq!(sample(&text, "rendergate_config_pinned{reason=\"refused\"}"), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "rendergate_config_pinned{reason=\"unavailable\"}"),
        Some(0.0),
        "{text}"
    );
    assert_eq!(sample(&text, "rendergate_verdicts_remembered_total"), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "rendergate_config_rejected_total"),
        Some(1.0),
        "remembered verdicts are not rejections: {text}"
    );

    // A pass opens the latch and unpins.
    serve.send(&rendered("plan-2", "r-3", &sample_config()));
    outputs.until("latch");
    let text = get(addr, "/metrics").body;
    assert_eq!(sample(&text, "rendergate_latch_state{reason=\"none\"}"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rendergate_latch_state{reason=\"refused\"}"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "rendergate_config_pinned{reason=\"refused\"}"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "rendergate_checks_total{outcome=\"pass\"}"), Some(1.0), "{text}");

    assert_eq!(get(addr, "/nope").status, 404);
    let post = request(addr, "POST", "/metrics");
    assert_eq!((post.status, post.header("allow")), (405, Some("GET, HEAD")));
    let head = request(addr, "HEAD", "/healthz");
    assert_eq!((head.status, head.body.as_str()), (200, ""));
    assert!(serve.finish().success());
}

#[test]
fn healthz_goes_503_naming_why_while_checks_cannot_set_up_their_sandbox() {
    // No world works: no mount namespace, and a config directory holding
    // someone else's file. Every render is held, so the gate is unhealthy.
    let config_dir = tempfile::tempdir().unwrap();
    std::fs::write(config_dir.path().join("theirs.cfg"), "x").unwrap();
    let at = config_dir.path().to_str().unwrap();
    let mut serve =
        Serve::start_with(&["--config-dir", at], &[("RENDERGATE_SANDBOX_DISABLE", "mountns")]);
    assert_eq!(get(serve.addr, "/healthz").status, 200, "healthy until a check says otherwise");
    let outputs = serve.outputs();
    serve.send(&rendered("plan-1", "r-1", &sample_config()));
    let verdict = outputs.until("verdict").pop().unwrap();
    assert_eq!((verdict["ok"].as_bool(), verdict["refused"].as_bool()), (Some(false), Some(false)));
    let health = get(serve.addr, "/healthz");
    assert_eq!(health.status, 503, "{}", health.body);
    assert!(
        health.body.starts_with("checks cannot set up their sandbox: ")
            && health.body.contains("--config-dir cannot hold the render"),
        "{}",
        health.body
    );
    let metrics = get(serve.addr, "/metrics").body;
    assert_eq!(sample(&metrics, "rendergate_check_sandbox_failures_total"), Some(1.0), "{metrics}");
    // The directory is given to the gate: a later retry of the check tries
    // the worlds again, in the same process, and the render is judged.
    std::fs::remove_file(config_dir.path().join("theirs.cfg")).unwrap();
    let started = Instant::now();
    let verdict = loop {
        let verdict = outputs.until("verdict").pop().unwrap();
        if verdict["ok"] == json!(true) || started.elapsed() > Duration::from_secs(40) {
            break verdict;
        }
    };
    assert_eq!(verdict["ok"], json!(true), "judged once the worlds were tried again: {verdict}");
    assert_eq!(get(serve.addr, "/healthz").status, 200);
    assert!(serve.finish().success());
}

#[test]
fn healthz_stays_ok_while_a_slow_haproxy_runs_into_its_timeout() {
    // The check timeout kills a slow haproxy: that is a verdict (could not
    // run), not a stuck worker.
    let tools = tempfile::tempdir().unwrap();
    let slow = fake_haproxy(tools.path(), "sleep 30");
    let mut serve = Serve::start(&[
        "--haproxy",
        slow.to_str().unwrap(),
        "--no-sandbox",
        "--check-timeout",
        "1s",
        "--health-margin",
        "1s",
    ]);
    let outputs = serve.outputs();
    serve.send(&rendered("plan-1", "r-1", &sample_config()));
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        let health = get(serve.addr, "/healthz");
        assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let seen = outputs.until("verdict");
    let message = seen[0]["message"].as_str().unwrap();
    assert!(message.contains("timed out"), "{message}");
    assert_eq!(get(serve.addr, "/healthz").status, 200);
}

#[test]
fn healthz_goes_503_while_nobody_reads_the_outputs_and_back_to_200() {
    // The event loop stops when the controller stops reading: once the pipe
    // and the output channel are full, the driver waits in one turn.
    let mut serve = Serve::start(&["--check-timeout", "1s", "--health-margin", "1s"]);
    let addr = serve.addr;
    let config = sample_config();
    serve.send(&rendered("plan-0", "r-0", &config));
    // Read r-0's verdict without a reader thread (and without buffering past it).
    let first = read_line_unbuffered(serve.stdout.as_mut().unwrap());
    assert!(first.contains(r#""type":"verdict""#) && first.contains(r#""ok":true"#), "{first}");
    // Every later render is the same plan and content: a remembered verdict each,
    // published at once, far more than a pipe and the channel hold.
    const FLOOD: usize = 3000;
    let mut stdin = serve.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 1..=FLOOD {
            writeln!(stdin, "{}", rendered("plan-0", &format!("r-{i}"), &config)).unwrap();
        }
        stdin // closed by the test once it has read everything
    });

    let stuck = poll_until(addr, "/healthz", Duration::from_secs(20), |r| r.status == 503);
    assert!(stuck.body.starts_with("event loop stuck: one turn has lasted "), "{}", stuck.body);
    assert!(stuck.body.contains("past the 1s check timeout plus a 1s margin"), "{}", stuck.body);
    assert_eq!(stuck.body.lines().count(), 1, "{}", stuck.body);

    let outputs = serve.outputs();
    poll_until(addr, "/healthz", Duration::from_secs(20), |r| r.status == 200 && r.body == "ok\n");
    let last = format!("r-{FLOOD}");
    while outputs.until("verdict").last().unwrap()["render"] != last.as_str() {}
    drop(writer.join().unwrap());
    assert!(serve.finish().success());
}

#[test]
fn a_bad_or_busy_metrics_address_stops_start_up_with_exit_2() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap().to_string();
    for addr in [busy_addr.as_str(), "not-an-address"] {
        let out = Command::new(BIN)
            .args(["serve", "--haproxy", &haproxy(), "--metrics-addr", addr])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{addr}: {stderr}");
        assert!(
            stderr.contains(&format!("error: --metrics-addr {addr}: cannot listen: ")),
            "{stderr}"
        );
        assert!(out.stdout.is_empty());
    }
}

fn read_line_unbuffered(stdout: &mut ChildStdout) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).expect("an output line") == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    String::from_utf8(line).unwrap()
}

fn fake_haproxy(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("haproxy");
    // Answers `-v` as haproxy does: serve asks it once, for its hello line.
    let version = "[ \"$1\" = -v ] && { echo 'HAProxy version fake'; exit 0; }";
    std::fs::write(&path, format!("#!/bin/sh\n{version}\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Passes every render, after blocking its thread for `block`: a checker
/// that ignores its deadline, so the timeout cannot take the worker back.
struct Blocking {
    block: Duration,
}

impl Checker for Blocking {
    fn identity(&self) -> Arc<str> {
        "blocking".into()
    }
    fn check<'a>(
        &'a self,
        _render: &'a Render,
        _deadline: tokio::time::Instant,
    ) -> CheckFuture<'a> {
        Box::pin(async move {
            std::thread::sleep(self.block);
            Checked {
                outcome: CheckOutcome::Passed { message: String::new() },
                judge: self.identity(),
            }
        })
    }
}

#[test]
fn healthz_goes_503_while_the_check_worker_is_blocked_past_the_timeout_and_back_to_200() {
    // The real checker always gives up at its deadline (the test above), so
    // a worker blocked past it takes a checker that blocks its thread: this
    // one, in a gate on a runtime of its own, behind the real endpoint.
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(3).enable_all().build().unwrap();
    let config = GateConfig {
        check_interval: Duration::ZERO,
        check_timeout: Duration::from_millis(500),
        health_margin: Duration::from_millis(500),
        ..GateConfig::default()
    };
    let (gate, addr, mut outputs) = runtime.block_on(async {
        let listener = rendergate::http::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let checker = Arc::new(Blocking { block: Duration::from_secs(4) });
        let (gate, outputs) = Gate::start(config, checker, PolicySeat::default());
        let _endpoint =
            rendergate::http::serve(listener, gate.metrics().clone(), gate.health().clone());
        (gate, addr, outputs)
    });
    assert_eq!(get(addr, "/healthz").status, 200);
    let started = Instant::now();
    runtime
        .block_on(gate.send(Event::Rendered(Render::new("plan-1", "r-1", "global\n", vec![]))))
        .unwrap();

    let stuck = poll_until(addr, "/healthz", Duration::from_secs(10), |r| r.status == 503);
    assert!(
        started.elapsed() > Duration::from_secs(1),
        "503 only past the timeout plus the margin"
    );
    assert!(
        stuck.body.starts_with("check worker stuck: one check has been in flight for "),
        "{}",
        stuck.body
    );
    assert!(
        stuck.body.contains("past the 500ms check timeout plus a 500ms margin"),
        "{}",
        stuck.body
    );
    // The endpoint answers while the worker is stuck, metrics too.
    assert_eq!(get(addr, "/metrics").status, 200);

    let verdict = runtime.block_on(async {
        loop {
            match outputs.recv().await.expect("the gate's outputs") {
                Output::Verdict(v) => return v,
                _ => continue,
            }
        }
    });
    assert!(matches!(verdict.outcome, CheckOutcome::Passed { .. }), "{verdict:?}");
    assert!(started.elapsed() >= Duration::from_secs(4));
    let health = get(addr, "/healthz");
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    runtime.block_on(gate.finish());
}

/// Whoever reaches the metrics port holds bounded resources, and the gate
/// judges meanwhile: 300 connections that send nothing leave the gate at
/// most MAX_CONNECTIONS (256) of them (the rest closed at once), a render
/// still gets its verdict (the check's open-files limit comes after its
/// world is made: 230 such connections failed every check), and once they
/// are gone /healthz answers again.
#[test]
fn connections_to_the_metrics_port_are_bounded_and_never_stop_the_checks() {
    let mut serve = Serve::start(&[]);
    let outputs = serve.outputs();
    let fds = |pid: u32| std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let before = fds(serve.child.id());
    let held: Vec<std::net::TcpStream> =
        (0..300).map(|_| std::net::TcpStream::connect(serve.addr).unwrap()).collect();
    // the gate has taken them all (those past the bound closed)
    let deadline = Instant::now() + Duration::from_secs(10);
    let closed = |s: &std::net::TcpStream| {
        s.set_nonblocking(true).unwrap();
        match std::io::Read::read(&mut &*s, &mut [0u8; 1]) {
            Ok(n) => n == 0,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    };
    while held.iter().filter(|s| closed(s)).count() < 300 - 256 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(held.iter().filter(|s| closed(s)).count(), 300 - 256);
    let open = fds(serve.child.id());
    assert!(open <= before + 256, "{before} descriptors before, {open} with 300 connections");
    serve.send(&rendered("plan-1", "r-1", &sample_config()));
    let verdict = outputs.until("verdict").pop().unwrap();
    assert_eq!(verdict["ok"], json!(true), "{verdict}");
    drop(held);
    let health = poll_until(serve.addr, "/healthz", Duration::from_secs(10), |r| r.status == 200);
    assert_eq!(health.status, 200, "{}", health.body);
    assert!(serve.finish().success());
}

/// Bad lines nobody reads the errors of: once the pipe and the error queue
/// are full, the reader waits to queue the next, reading no render
/// meanwhile, and /healthz says so (it said 200 for good: the driver, idle,
/// never stamped a turn); back to 200 once the outputs are read.
#[test]
fn healthz_goes_503_while_error_lines_wait_for_a_reader_and_back_to_200() {
    let mut serve = Serve::start(&["--check-timeout", "1s", "--health-margin", "1s"]);
    let addr = serve.addr;
    const FLOOD: usize = 20_000;
    let mut stdin = serve.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for _ in 0..FLOOD {
            writeln!(stdin, r#"{{"type":"bogus","padding":"{}"}}"#, "x".repeat(200)).unwrap();
        }
        stdin
    });
    let stuck = poll_until(addr, "/healthz", Duration::from_secs(20), |r| r.status == 503);
    assert!(stuck.body.starts_with("input reader stuck: it has waited "), "{}", stuck.body);
    assert_eq!(stuck.body.lines().count(), 1, "{}", stuck.body);
    let outputs = serve.outputs();
    poll_until(addr, "/healthz", Duration::from_secs(20), |r| r.status == 200 && r.body == "ok\n");
    let mut stdin = writer.join().unwrap();
    writeln!(stdin, "{}", rendered("plan-1", "r-1", &sample_config())).unwrap();
    drop(stdin);
    let verdict = outputs.until("verdict").pop().unwrap();
    assert_eq!(verdict["ok"], json!(true), "{verdict}");
    assert!(serve.finish().success());
}
