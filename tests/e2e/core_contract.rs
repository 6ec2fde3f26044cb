//! The core's contract through `rendergate serve` (docs/behaviour.md, "Which
//! renders are checked" and "When a check cannot run"): the check in flight
//! is not one of the 4 superseded renders kept, so a render a pod reports
//! later still gets its verdict and its revert; and there is one back-off for
//! the gate, which any pass or refusal resets.
//!
//! HAProxy's answers are the real haproxy's. A wrapper in front of it makes
//! two things controllable: a render whose config says `# SLOW` is checked for
//! 2 s (so renders pile up behind it), and one that says `# UNAVAILABLE`
//! could not run (exit 1, no output). The wrapper is a shell script, so these
//! runs use `--no-sandbox`; what is tested here is the gate's bookkeeping.

use crate::support::*;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A directory with the wrapper `haproxy` in it, removed at the end.
struct Wrapper {
    dir: tempfile::TempDir,
}

impl Wrapper {
    fn new() -> Wrapper {
        let dir = tempfile::tempdir().unwrap();
        let body = format!(
            "#!/bin/sh\n\
             grep -q '^# UNAVAILABLE' haproxy.cfg && exit 1\n\
             grep -q '^# SLOW' haproxy.cfg && sleep 2\n\
             exec '{}' \"$@\"\n",
            real_haproxy().display()
        );
        // Written by a child process: no write descriptor of this threaded test
        // process can make the exec fail with "Text file busy".
        let status = std::process::Command::new("/bin/sh")
            .args(["-c", r#"printf '%s' "$2" > "$1" && chmod 755 "$1""#, "sh"])
            .arg(dir.path().join("haproxy"))
            .arg(body)
            .status()
            .unwrap();
        assert!(status.success());
        Wrapper { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("haproxy")
    }

    fn serve(&self) -> Serve {
        let path = self.path();
        Serve::start(&["--haproxy", path.to_str().unwrap(), "--no-sandbox"])
    }
}

fn with_marker(marker: &str, config: &str) -> String {
    format!("# {marker}\n{config}")
}

/// The next verdict line, past anything else.
fn next_verdict(gate: &mut Serve) -> Value {
    gate.until("verdict").pop().unwrap()
}

fn label(v: &Value) -> &'static str {
    match (v["ok"].as_bool(), v["refused"].as_bool()) {
        (Some(true), _) => "pass",
        (_, Some(true)) => "refused",
        _ => "unavailable",
    }
}

#[test]
fn a_render_reported_after_five_piled_up_behind_the_check_in_flight_still_gets_its_verdict_and_revert()
 {
    let wrapper = Wrapper::new();
    let mut gate = wrapper.serve();
    // r-0 is checked for 2 s; r-1..r-5 are superseded behind it, r-6 newest.
    gate.send(&rendered("plan-0", "r-0", &with_marker("SLOW", &sample_config_anywhere())));
    for i in 1..=5 {
        let config = if i == 2 {
            broken_config()
        } else {
            with_marker(&format!("render {i}"), &sample_config_anywhere())
        };
        gate.send(&rendered(&format!("plan-{i}"), &format!("r-{i}"), &config));
    }
    gate.send(&rendered("plan-6", "r-6", &sample_config_anywhere()));
    // Five wait besides r-0: only r-1, the oldest, is dropped. A pod now
    // reports r-2 (refused content) applied, not loaded.
    gate.send(&applied("ns/pod-a", "r-2", "plan-2", "plan-0", "plan-0"));

    let mut verdicts = vec![];
    let mut reverts = vec![];
    while verdicts.len() < 3 {
        let line = gate.next();
        match line["type"].as_str() {
            Some("verdict") => {
                verdicts.push((line["render"].as_str().unwrap().to_owned(), label(&line)))
            }
            Some("revert") => reverts.push(line),
            _ => {}
        }
    }
    assert_eq!(
        verdicts,
        [("r-0".into(), "pass"), ("r-6".into(), "pass"), ("r-2".into(), "refused")],
        "r-2 was kept (the check in flight is not one of the 4) and judged for the pod that holds it"
    );
    let (rest, status) = gate.finish();
    assert!(status.success());
    reverts.extend(rest.into_iter().filter(|l| l["type"] == "revert"));
    assert_eq!(reverts.len(), 1, "{reverts:?}");
    assert_eq!(reverts[0]["pod"], "ns/pod-a");
    assert_eq!(reverts[0]["plan"], "plan-2");
}

#[test]
fn one_backoff_for_the_gate_a_pass_lets_a_waiting_render_retry_at_once() {
    let wrapper = Wrapper::new();
    let mut gate = wrapper.serve();
    // r-1 could not run, and a pod holds it: it is retried after 1 s, fails
    // again, and the gate's back-off is then 2 s.
    gate.send(&rendered("plan-1", "r-1", &with_marker("UNAVAILABLE", &sample_config_anywhere())));
    gate.send(&applied("ns/pod-a", "r-1", "plan-1", "plan-0", "plan-0"));
    for _ in 0..2 {
        let v = next_verdict(&mut gate);
        assert_eq!((v["render"].as_str(), label(&v)), (Some("r-1"), "unavailable"), "{v}");
    }
    // A new render is checked at once and passes: the back-off resets, so
    // r-1 is tried again at once, not at the end of its 2 s.
    gate.send(&rendered("plan-2", "r-2", &sample_config_anywhere()));
    let v = next_verdict(&mut gate);
    assert_eq!((v["render"].as_str(), label(&v)), (Some("r-2"), "pass"), "{v}");
    let passed_at = Instant::now();
    let v = next_verdict(&mut gate);
    let waited = passed_at.elapsed();
    assert_eq!((v["render"].as_str(), label(&v)), (Some("r-1"), "unavailable"), "{v}");
    // Before the fix r-1 waited out its own 2 s back-off (about 1.8 s here).
    assert!(
        waited < Duration::from_millis(1200),
        "r-1 was retried {waited:?} after the pass, not at once"
    );
    let (_, status) = gate.finish();
    assert!(status.success());
}

/// What the spammer thread is told.
enum Feed {
    Lines(Vec<String>),
    Done,
}

#[test]
fn a_verdicts_lines_come_together_whatever_bad_lines_arrive_meanwhile() {
    verdict_groups_stay_whole(&[]);
}

/// With a shadow that never promotes nor reverts, every verdict's decision
/// differs: its `shadow` line comes after the group, never inside it
/// (docs/protocol.md §2).
#[test]
fn a_verdicts_lines_come_together_with_a_shadow_policy_too() {
    let shadows = verdict_groups_stay_whole(&["--shadow-policy", policy_artifacts::OBSERVE_ONLY]);
    assert!(shadows >= 200, "a shadow line per verdict: {shadows}");
}

/// Runs 200 renders with bad lines arriving all the time and checks every
/// verdict's group is whole; returns how many `shadow` lines came.
fn verdict_groups_stay_whole(extra: &[&str]) -> usize {
    const RENDERS: usize = 200;
    let mut command = serve_command(extra);
    let mut child =
        command.stderr(std::process::Stdio::null()).spawn().expect("start rendergate serve");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    // One thread owns stdin: the lines it is handed, with bad lines before,
    // between and after them, all the time.
    let (feed, fed) = std::sync::mpsc::channel::<Feed>();
    let spammer = std::thread::spawn(move || {
        use std::io::Write;
        let mut bad = 0u64;
        loop {
            match fed.try_recv() {
                Ok(Feed::Lines(lines)) => {
                    for line in lines {
                        writeln!(stdin, "{line}").unwrap();
                    }
                }
                Ok(Feed::Done) | Err(std::sync::mpsc::TryRecvError::Disconnected) => return bad,
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
            for _ in 0..4 {
                writeln!(stdin, "{{\"type\": \"rendered\", \"plan\": 7").unwrap();
                bad += 1;
            }
            stdin.flush().unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    let mut output = std::io::BufRead::lines(stdout);
    let mut seen: Vec<Value> = vec![];
    for i in 1..=RENDERS {
        // Three pods report the render before it is judged (their decisions
        // then have nothing to do); its verdict promotes or reverts them.
        let (plan, render) = (format!("plan-{i}"), format!("r-{i}"));
        let mut lines: Vec<String> = (0..3)
            .map(|p| {
                applied(
                    &format!("ns/pod-{p}"),
                    &render,
                    &plan,
                    &format!("plan-{}", i - 1),
                    "plan-0",
                )
                .to_string()
            })
            .collect();
        let config = if i % 3 == 0 { broken_config() } else { sample_config_anywhere() };
        lines.push(rendered(&plan, &render, &format!("# {i}\n{config}")).to_string());
        feed.send(Feed::Lines(lines)).unwrap();
        loop {
            let line: Value =
                serde_json::from_str(&output.next().expect("serve is running").unwrap()).unwrap();
            let done = line["type"] == "verdict" && line["render"] == render.as_str();
            seen.push(line);
            if done {
                break;
            }
        }
    }
    feed.send(Feed::Done).unwrap();
    let bad = spammer.join().unwrap();
    seen.extend(output.map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap()));
    assert!(child.wait().unwrap().success());

    // A verdict's group: the verdict, then its latch, release, promote and
    // revert lines. No `error` or `shadow` line may come between them (the
    // pods' reports before each render have nothing to promote: every
    // promote and revert here is a verdict's).
    let mut split_by = None;
    let (mut verdicts, mut errors, mut followers, mut shadows) = (0, 0, 0, 0);
    for (at, line) in seen.iter().enumerate() {
        match line["type"].as_str().unwrap() {
            "verdict" => (verdicts, split_by) = (verdicts + 1, None),
            "error" => (errors, split_by) = (errors + 1, Some("error")),
            "shadow" => (shadows, split_by) = (shadows + 1, Some("shadow")),
            kind @ ("latch" | "release" | "promote" | "revert") => {
                followers += 1;
                if let Some(other) = split_by {
                    panic!("line {at}: a {kind} line split from its verdict by a {other} line");
                }
            }
            "hello" => {}
            other => panic!("unexpected output {other}: {line}"),
        }
    }
    assert_eq!(verdicts, RENDERS);
    assert_eq!(errors as u64, bad, "every bad line got its error");
    assert!(
        followers >= RENDERS * 3,
        "every verdict promoted or reverted three pods ({followers} lines)"
    );
    shadows
}
