//! `serve --record` and `rendergate replay` with the real binary and real
//! haproxy: a recording replays to the live run's outputs, bad lines
//! included; `--timeline` draws one check mark per check that ran.
//!
//! `RENDERGATE_TEST_HAPROXY` names the haproxy to use (default: `haproxy`).

#[allow(dead_code)]
#[path = "../../tests/e2e/support.rs"]
mod support;

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// `rendergate replay ARGS` with the test's haproxy and no check spacing.
fn replay(events: &Path, extra: &[&str]) -> Output {
    let haproxy = haproxy();
    let mut args =
        vec!["replay", events.to_str().unwrap(), "--haproxy", &haproxy, "--check-interval", "0s"];
    args.extend_from_slice(extra);
    Command::new(BIN).args(&args).stdin(Stdio::null()).output().expect("start rendergate replay")
}

/// Outputs without what differs from one haproxy run to the next: a
/// verdict's `duration_ms`, and the process id in haproxy's message lines
/// (`[ALERT]    (2420) : …`).
fn untimed(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .cloned()
        .map(|mut l| {
            if let Some(o) = l.as_object_mut() {
                o.remove("duration_ms");
                if let Some(Value::String(message)) = o.get_mut("message") {
                    *message = without_pids(message);
                }
            }
            l
        })
        .collect()
}

/// `(1234)` becomes `(pid)`.
fn without_pids(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('(') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(')') {
            out.push_str("pid");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// A live `serve --record` run: a pass with promotions, a bad line, a
/// refusal with a revert, the same broken content again (remembered), then
/// a fix that is released and promoted. Each step waits for its outputs, so
/// the live run itself is not a race. `extra` goes to `serve`. Returns its
/// outputs.
fn record_live_run(recording: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["--record", recording.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut gate = Serve::start(&args);
    let mut out = vec![];
    gate.send(
        &json!({"type": "pods_discovered", "pods": ["haptic/haproxy-0", "haptic/haproxy-1"]}),
    );
    gate.send(&applied("haptic/haproxy-0", "r-1", "plan-1", "plan-1", "plan-0"));
    gate.send(&applied("haptic/haproxy-1", "r-1", "plan-1", "plan-1", "plan-0"));
    gate.send(&rendered("plan-1", "r-1", &sample_config()));
    out.extend(gate.until("verdict"));
    out.push(gate.next());
    out.push(gate.next());

    gate.send_raw("{not json");
    out.extend(gate.until("error"));

    gate.send(&applied("haptic/haproxy-0", "r-2", "plan-2", "plan-1", "plan-1"));
    gate.send(&applied("haptic/haproxy-1", "r-2", "plan-2", "plan-2", "plan-1"));
    gate.send(&rendered("plan-2", "r-2", &broken_config()));
    out.extend(gate.until("revert"));
    gate.send(&rendered("plan-2", "r-3", &broken_config()));
    out.extend(gate.until("revert"));

    gate.send(&rendered("plan-3", "r-4", &sample_config().replace("30s", "31s")));
    out.extend(gate.until("release"));
    gate.send(&applied("haptic/haproxy-0", "r-4", "plan-3", "plan-3", "plan-1"));
    out.extend(gate.until("promote"));
    let (rest, status) = gate.finish();
    assert!(status.success());
    out.extend(rest);
    out
}

#[test]
fn a_replayed_recording_gives_the_live_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("incident.ndjson");
    let live = record_live_run(&recording, &[]);
    let kinds: Vec<&str> = live.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert!(
        kinds.contains(&"error") && kinds.contains(&"revert") && kinds.contains(&"release"),
        "{kinds:?}"
    );
    assert!(live.iter().any(|l| l["refused"] == true && l["remembered"] == false), "{live:?}");

    // The recording: a header, every input line verbatim (the bad one too), the end.
    let text = std::fs::read_to_string(&recording).unwrap();
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records[0]["recording"], "rendergate");
    assert_eq!(records[0]["version"], 2);
    let lines: Vec<&str> = records[1..].iter().filter_map(|r| r["line"].as_str()).collect();
    assert_eq!(lines.len(), 11, "{text}");
    assert_eq!(lines[4], "{not json");
    assert_eq!(records.last().unwrap()["end"], true);
    let times: Vec<u64> = records[1..].iter().map(|r| r["at_ms"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let counts: Vec<u64> = records[1..].iter().map(|r| r["outputs"].as_u64().unwrap()).collect();
    assert_eq!(counts[4], 4, "the bad line came after hello, the verdict and its two promotions");

    let out = replay(&recording, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed = support::lines(&out);
    assert_eq!(untimed(&replayed), untimed(&live), "same outputs, in the same order");
    let error = replayed.iter().find(|l| l["type"] == "error").unwrap();
    assert_eq!(error["line"], 5, "{error}");
}

#[test]
fn a_recording_keeps_a_base64_file_as_sent_and_replays_to_its_checksum() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("bytes.ndjson");
    // The sample map with a key that is not UTF-8: only base64 carries it.
    let mut map = std::fs::read(sample_dir().join("maps/hosts.map")).unwrap();
    map.extend_from_slice(b"caf\xe9.example.com echo\n");
    let encoded = base64::engine::general_purpose::STANDARD.encode(&map);
    let line = json!({"type": "rendered", "plan": "plan-1", "render": "r-1",
        "config": sample_config(),
        "files": [{"kind": "map", "path": "maps/hosts.map", "encoding": "base64", "content": encoded}]});
    let mut gate = Serve::start(&["--record", recording.to_str().unwrap()]);
    gate.send(&line);
    let mut live = gate.until("verdict");
    let (rest, status) = gate.finish();
    assert!(status.success());
    live.extend(rest);
    assert_eq!(live[0]["ok"], true, "{live:?}");

    // The input line as received, its base64 with it.
    let text = std::fs::read_to_string(&recording).unwrap();
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records[1]["line"].as_str(), Some(line.to_string().as_str()));

    let out = replay(&recording, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed = support::lines(&out);
    assert_eq!(untimed(&replayed), untimed(&live));
    assert_eq!(replayed[0]["checksum"], live[0]["checksum"]);
}

/// The `outputs` count of each record in a recording.
fn output_counts(recording: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(recording).unwrap();
    text.lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["outputs"].as_u64().unwrap())
        .collect()
}

/// A shadow writes its lines on its own thread's timing: a recording leaves
/// them out of its counts, so the same run recorded with and without a
/// shadow paces the same, and replays to the same live lines.
#[test]
fn a_shadows_lines_never_pace_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let (plain, shadowed) = (dir.path().join("plain.ndjson"), dir.path().join("shadowed.ndjson"));
    let live = record_live_run(&plain, &[]);
    // fleet-revert reverts every pod to the newest passed plan on a refusal:
    // it differs from the default on each of the two refusals.
    let with_shadow = ["--shadow-policy", policy_artifacts::FLEET_REVERT];
    let live_shadowed = record_live_run(&shadowed, &with_shadow);
    let shadow_lines = live_shadowed.iter().filter(|l| l["type"] == "shadow").count();
    assert_eq!(shadow_lines, 2, "{live_shadowed:#?}");
    let not_shadow = |lines: &[Value]| -> Vec<Value> {
        untimed(lines).into_iter().filter(|l| l["type"] != "shadow").collect()
    };
    assert_eq!(not_shadow(&live_shadowed), not_shadow(&live));
    assert_eq!(output_counts(&shadowed), output_counts(&plain), "the shadow's lines counted");

    let out = replay(&shadowed, &with_shadow);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed = support::lines(&out);
    assert_eq!(not_shadow(&replayed), not_shadow(&live), "same live outputs, in the same order");
    assert_eq!(replayed.iter().filter(|l| l["type"] == "shadow").count(), shadow_lines);
}

#[test]
fn the_timeline_has_one_bar_per_check_and_parses_as_svg_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("incident.ndjson");
    let live = record_live_run(&recording, &[]);
    let checks = live.iter().filter(|l| l["type"] == "verdict" && l["remembered"] == false).count();
    let remembered =
        live.iter().filter(|l| l["type"] == "verdict" && l["remembered"] == true).count();
    assert_eq!((checks, remembered), (3, 1), "{live:?}");

    let svg_path = dir.path().join("x.svg");
    let out = replay(&recording, &["--timeline", svg_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("not XML: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(doc.root_element().tag_name().namespace(), Some("http://www.w3.org/2000/svg"));
    assert_marks(&doc, &lines(&out));

    let html_path = dir.path().join("x.html");
    let out = replay(&recording, &["--timeline", html_path.to_str().unwrap()]);
    assert!(out.status.success());
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    let options = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(&html, options)
        .unwrap_or_else(|e| panic!("not well-formed: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "html");
    assert!(doc.descendants().any(|n| n.tag_name().name() == "svg"), "the page holds the SVG");
    assert_marks(&doc, &lines(&out));
}

/// Names and HAProxy's message carry markup and characters XML cannot hold:
/// the picture stays well-formed and shows them as text.
#[test]
fn a_timeline_of_hostile_names_and_messages_is_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let plan = "plan-</text><script>alert(1)</script>";
    let pod = "ns/<pod a=\"1\">&amp;\u{1b}[31m";
    let hostile_config =
        sample_config().replace("    bind :8080\n", "    bind :8080\n    <b>&\"x\"]]> now\n");
    let events: String = [
        json!({"type": "pods_discovered", "pods": [pod]}),
        applied(pod, "r-<1>", plan, plan, "plan-0"),
        rendered(plan, "r-<1>", &hostile_config),
    ]
    .iter()
    .map(|e| format!("{e}\n"))
    .chain(["{\"not json <!-- \u{1} -->\n".to_owned()])
    .collect();
    let events_path = dir.path().join("hostile.ndjson");
    std::fs::write(&events_path, events).unwrap();

    let svg_path = dir.path().join("x.svg");
    let out = replay(&events_path, &["--timeline", svg_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let outputs = lines(&out);
    let verdict = outputs.iter().find(|l| l["type"] == "verdict").unwrap();
    assert_eq!(verdict["refused"], true, "{verdict}");
    assert!(
        verdict["message"].as_str().unwrap().contains("unknown keyword '<b>&x]]>'"),
        "HAProxy quotes it: {verdict}"
    );

    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("not XML: {e}"));
    let elements: Vec<&str> =
        doc.descendants().filter(|n| n.is_element()).map(|n| n.tag_name().name()).collect();
    assert!(!elements.iter().any(|&e| e == "script" || e == "pod" || e == "b"), "{elements:?}");
    assert!(!doc.descendants().any(|n| n.is_comment()));
    let check = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("check refused"))
        .and_then(|g| g.first_element_child())
        .and_then(|title| title.text())
        .unwrap_or("");
    assert!(check.starts_with(&format!("check of render r-<1> ({plan})")), "{check}");
    assert!(check.contains("unknown keyword '<b>&x]]>'"), "{check}");
    let texts: Vec<&str> =
        doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).collect();
    assert!(texts.contains(&"pod ns/<pod a=\"1\">&amp;\u{FFFD}[31m"), "{texts:?}");
    assert_marks(&doc, &outputs);
}

/// One `g.check` per verdict from a check that ran, in its outcome's class;
/// one mark per remembered verdict, release, promotion and revert; a legend.
fn assert_marks(doc: &roxmltree::Document, outputs: &[Value]) {
    let groups = |class: &str| {
        doc.descendants()
            .filter(|n| {
                n.tag_name().name() == "g"
                    && n.attribute("class").is_some_and(|c| c.split(' ').any(|w| w == class))
            })
            .count()
    };
    let verdicts = |f: &dyn Fn(&Value) -> bool| {
        outputs.iter().filter(|l| l["type"] == "verdict" && f(l)).count()
    };
    let ran = |l: &Value| l["remembered"] == false;
    assert_eq!(groups("check"), verdicts(&ran));
    assert_eq!(groups("pass"), verdicts(&|l| ran(l) && l["ok"] == true));
    assert_eq!(groups("refused"), verdicts(&|l| ran(l) && l["refused"] == true));
    assert_eq!(groups("remembered"), verdicts(&|l| l["remembered"] == true));
    for kind in ["release", "promote", "revert", "error"] {
        assert_eq!(groups(kind), outputs.iter().filter(|l| l["type"] == kind).count(), "{kind}");
    }
    // Each check carries its details for a hover.
    for check in
        doc.descendants().filter(|n| n.attribute("class").is_some_and(|c| c.starts_with("check ")))
    {
        let title = check
            .children()
            .find(|c| c.tag_name().name() == "title")
            .and_then(|t| t.text())
            .unwrap_or("");
        assert!(title.starts_with("check of render r-"), "{title}");
        assert!(check.children().any(|c| c.tag_name().name() == "rect"), "the bar itself");
    }
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "text")
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for entry in [
        "Legend",
        "check passed",
        "check refused",
        "check could not run",
        "release",
        "promote",
        "revert",
    ] {
        assert!(texts.contains(&entry), "legend entry {entry:?} in {texts:?}");
    }
}

#[test]
fn a_plain_event_stream_is_judged_render_by_render() {
    let events = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/events.ndjson");
    let out = replay(&events, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = lines(&out);
    let summary: Vec<String> = lines
        .iter()
        .map(|l| match l["type"].as_str().unwrap() {
            "verdict" if l["remembered"] == true => {
                format!("remembered {}", l["render"].as_str().unwrap())
            }
            "verdict" if l["ok"] == true => format!("pass {}", l["render"].as_str().unwrap()),
            "verdict" => format!("refused {}", l["render"].as_str().unwrap()),
            "latch" => format!("latch {}", l["state"].as_str().unwrap()),
            "release" => format!("release {}", l["render"].as_str().unwrap()),
            "promote" => {
                format!("promote {} {}", l["pod"].as_str().unwrap(), l["plan"].as_str().unwrap())
            }
            "revert" => {
                format!("revert {} {}", l["pod"].as_str().unwrap(), l["plan"].as_str().unwrap())
            }
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(
        summary,
        [
            "pass r-1",
            "promote haptic/haproxy-0 plan-1",
            "promote haptic/haproxy-1 plan-1",
            "refused r-2",
            "latch pessimistic",
            "revert haptic/haproxy-0 plan-2",
            "remembered r-3",
            "revert haptic/haproxy-0 plan-2",
            "pass r-4",
            "latch optimistic",
            "release r-4",
        ]
    );
}

#[test]
fn lines_past_max_line_replay_to_the_same_error_and_are_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("long.ndjson");
    let long = rendered("plan-1", "r-1", &sample_config()).to_string();
    assert!(long.len() > 512);
    let mut gate = Serve::start(&["--max-line", "512", "--record", recording.to_str().unwrap()]);
    gate.send_raw(&long);
    let live = gate.next();
    assert_eq!(live, json!({"type": "error", "line": 1, "message": "longer than --max-line 512"}));
    let (_, status) = gate.finish();
    assert!(status.success());
    let text = std::fs::read_to_string(&recording).unwrap();
    assert!(text.contains(&format!(r#""overlong":{}"#, long.len())), "{text}");

    // The recording, and the same line as a plain stream: a long `rendered`
    // line never gets a verdict, so replay must not wait for one (it would
    // wait two check timeouts).
    let plain = dir.path().join("plain.ndjson");
    std::fs::write(&plain, format!("{long}\n")).unwrap();
    for events in [&recording, &plain] {
        let started = Instant::now();
        let out = replay(events, &["--max-line", "512", "--check-timeout", "30s"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(lines(&out), std::slice::from_ref(&live), "{}", events.display());
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}: waited {:?}",
            events.display(),
            started.elapsed()
        );
    }
}

#[test]
fn replay_holds_every_line_to_max_line_and_a_long_record_gives_serves_error() {
    let dir = tempfile::tempdir().unwrap();
    let long = json!({"type": "pods_discovered", "pods": ["x".repeat(600)]}).to_string();
    let longer =
        |line| json!({"type": "error", "line": line, "message": "longer than --max-line 512"});

    // A plain stream: a line past the limit after the first is read past, not held.
    let plain = dir.path().join("plain.ndjson");
    std::fs::write(&plain, format!("{{\"type\":\"lost_leadership\"}}\n{long}\n{{not json\r\n"))
        .unwrap();
    let out = replay(&plain, &["--max-line", "512"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = lines(&out);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], longer(2));
    assert_eq!(
        (got[1]["type"].as_str(), got[1]["line"].as_u64()),
        (Some("error"), Some(3)),
        "{}",
        got[1]
    );

    // A recording whose record is longer than any record of a line within
    // the limit: the line it holds is past the limit, and gets serve's error.
    let recording = dir.path().join("long-record.ndjson");
    let records = [
        json!({"recording": "rendergate", "version": 1, "started_unix_ms": 0}),
        json!({"at_ms": 0, "outputs": 0, "line": "\u{1}".repeat(600)}),
        json!({"at_ms": 1, "outputs": 1, "line": "{not json"}),
    ];
    std::fs::write(&recording, records.iter().map(|r| format!("{r}\n")).collect::<String>())
        .unwrap();
    assert!(records[1].to_string().len() > 6 * 512 + 128, "a record past replay's bound");
    let out = replay(&recording, &["--max-line", "512"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = lines(&out);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], longer(1));
    assert_eq!(
        (got[1]["type"].as_str(), got[1]["line"].as_u64()),
        (Some("error"), Some(2)),
        "{}",
        got[1]
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("recording line 2: longer than"),
        "warned"
    );
}

#[test]
fn realtime_keeps_the_recorded_gaps_and_bytes_and_ends_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("hand-made.ndjson");
    let good = rendered("plan-1", "r-1", &sample_config()).to_string();
    let records = [
        json!({"recording": "rendergate", "version": 1, "started_unix_ms": 0}),
        json!({"at_ms": 0, "outputs": 0, "bytes": "7bff7d"}),
        json!({"at_ms": 700, "outputs": 1, "line": good}),
        json!({"at_ms": 750, "outputs": 2, "end": true}),
        json!({"at_ms": 800, "outputs": 2, "line": "{never fed"}),
    ];
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&recording, text).unwrap();

    let started = Instant::now();
    let out = replay(&recording, &["--realtime"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() >= Duration::from_millis(700), "the recorded gap was kept");
    let lines = lines(&out);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["type"], "error");
    assert!(lines[0]["message"].as_str().unwrap().contains("UTF-8"), "{}", lines[0]);
    assert_eq!(
        (lines[1]["type"].as_str(), lines[1]["ok"].as_bool()),
        (Some("verdict"), Some(true))
    );
}

#[test]
fn bad_replay_arguments_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let events = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/events.ndjson");
    let png = dir.path().join("x.png");
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec!["replay", events.to_str().unwrap(), "--timeline", png.to_str().unwrap()],
            "FILE.svg or FILE.html",
        ),
        (vec!["replay", "/nonexistent/events.ndjson"], "/nonexistent/events.ndjson"),
        (vec!["replay"], "required arguments"),
    ];
    for (args, expected) in cases {
        let out = Command::new(BIN).args(&args).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!png.exists());
    }

    let broken = dir.path().join("broken.ndjson");
    std::fs::write(
        &broken,
        "{\"recording\":\"rendergate\",\"version\":1,\"started_unix_ms\":0}\n{\"at_ms\":\"soon\"}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["replay", broken.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A supervised `serve` that dies and is started again with
/// `--record-append` continues its recording: one file, a header line
/// where each process started (owner-only still), and `replay` gives every
/// verdict and revert of both runs, the restart replayed as a new term.
#[test]
fn a_recording_survives_a_restart_with_record_append() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("incident.ndjson");
    let path = recording.to_str().unwrap();
    let mut first = Serve::start(&["--record", path, "--record-append"]);
    first.send(&json!({"type": "pods_discovered", "pods": ["haptic/haproxy-0"]}));
    first.send(&rendered("plan-1", "r-1", &sample_config()));
    assert_eq!(first.until("verdict").pop().unwrap()["ok"], true);
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(first.pid() as i32, libc::SIGKILL) }, 0);
    drop(first);

    let mut second = Serve::start(&["--record", path, "--record-append"]);
    second.send(&applied("haptic/haproxy-0", "r-2", "plan-2", "plan-1", "plan-1"));
    second.send(&rendered("plan-2", "r-2", &broken_config()));
    let live: Vec<Value> = second.until("revert");
    let (rest, status) = second.finish();
    assert!(status.success() && rest.is_empty(), "{rest:?}");

    let text = std::fs::read_to_string(&recording).unwrap();
    let headers = text.lines().filter(|l| l.contains(r#""recording":"rendergate""#)).count();
    assert_eq!(headers, 2, "one header per process:\n{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&recording).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let out = replay(&recording, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed = support::lines(&out);
    let verdicts: Vec<(&str, bool)> = replayed
        .iter()
        .filter(|l| l["type"] == "verdict")
        .map(|l| (l["render"].as_str().unwrap(), l["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(verdicts, [("r-1", true), ("r-2", false)], "{replayed:#?}");
    let reverts: Vec<&Value> = replayed.iter().filter(|l| l["type"] == "revert").collect();
    let live_reverts: Vec<&Value> = live.iter().filter(|l| l["type"] == "revert").collect();
    assert_eq!(reverts, live_reverts);

    // a file that is not a recording is never continued
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "my notes\n").unwrap();
    let out = Command::new(BIN)
        .args([
            "serve",
            "--haproxy",
            &haproxy(),
            "--record",
            other.to_str().unwrap(),
            "--record-append",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a rendergate recording"));
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "my notes\n");
}

/// A recording cut in the middle of a record (serve killed while writing
/// it, or its disk full) replays up to it, says so, and still writes the
/// timeline and the fixtures; a record cut short and followed by more
/// records is a broken recording, an error naming its line. A serve that
/// continues such a recording (--record-append) starts its header on a
/// line of its own.
#[test]
fn a_record_cut_short_ends_the_replay_there_and_a_restart_starts_a_new_line() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("incident.ndjson");
    record_live_run(&recording, &[]);
    let text = std::fs::read(&recording).unwrap();
    // cut inside the record of the refused render's line (its config is long)
    let refused = text.windows(4).position(|w| w == b"r-2\\").unwrap();
    let cut = dir.path().join("cut.ndjson");
    std::fs::write(&cut, &text[..refused]).unwrap();
    let (timeline, fixtures) = (dir.path().join("t.svg"), dir.path().join("f.json"));
    let out = replay(
        &cut,
        &["--timeline", timeline.to_str().unwrap(), "--fixtures", fixtures.to_str().unwrap()],
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("the recording ends in a record cut short"), "{log}");
    let replayed = support::lines(&out);
    assert_eq!(replayed.iter().filter(|l| l["type"] == "verdict").count(), 1, "{replayed:?}");
    assert!(std::fs::metadata(&timeline).unwrap().len() > 0);
    let cases: Value = serde_json::from_slice(&std::fs::read(&fixtures).unwrap()).unwrap();
    assert!(cases.as_array().is_some_and(|c| !c.is_empty()), "{cases}");

    // more records after the cut one: broken there
    let broken = dir.path().join("broken.ndjson");
    let last = text[..text.len() - 1].iter().rposition(|b| *b == b'\n').unwrap();
    std::fs::write(&broken, [&text[..refused], b"\n", &text[last + 1..]].concat()).unwrap();
    let out = replay(&broken, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = text[..refused].iter().filter(|b| **b == b'\n').count() + 1;
    assert!(err.contains(&format!("line {line}:")), "{err}");

    // a serve that continues the cut recording: its header on a line of its own
    let path = cut.to_str().unwrap();
    let mut next = Serve::start(&["--record", path, "--record-append"]);
    next.send(&rendered("plan-9", "r-9", &sample_config()));
    assert_eq!(next.until("verdict").pop().unwrap()["ok"], true);
    let (_, status) = next.finish();
    assert!(status.success());
    let out = replay(&cut, &[]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("a record cut short before serve restarted"), "{log}");
    let replayed = support::lines(&out);
    let renders: Vec<&str> = replayed
        .iter()
        .filter(|l| l["type"] == "verdict")
        .map(|l| l["render"].as_str().unwrap())
        .collect();
    assert_eq!(renders, ["r-1", "r-9"], "{log}");
}

/// Two serves never record into one file at once: the second is refused,
/// naming --record, while the first holds it.
#[test]
fn a_recording_has_one_writer_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("incident.ndjson");
    let path = recording.to_str().unwrap();
    let first = Serve::start(&["--record", path, "--record-append"]);
    let second = Command::new(BIN)
        .args(["serve", "--haproxy", &haproxy(), "--record", path, "--record-append"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(2));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("--record") && err.contains("another process"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let (_, status) = first.finish();
    assert!(status.success());
    // once the first has ended, the file is free again
    let third = Serve::start(&["--record", path, "--record-append"]);
    let (_, status) = third.finish();
    assert!(status.success());
}

/// SIGTERM and SIGINT end a replay as they end serve (143, 130), whatever
/// is left of the recording: a replay used to say "stopped" and go on
/// feeding until its input ran out (an 8 s gap here; `/dev/zero`, never).
#[test]
fn a_signal_ends_a_replay_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let slow = dir.path().join("slow.ndjson");
    std::fs::write(
        &slow,
        concat!(
            r#"{"recording":"rendergate","version":2,"started_unix_ms":1}"#,
            "\n",
            r#"{"at_ms":0,"outputs":1,"line":"{\"type\":\"lost_leadership\"}"}"#,
            "\n",
            r#"{"at_ms":8000,"outputs":1,"end":true}"#,
            "\n"
        ),
    )
    .unwrap();
    for (file, realtime, signal, code) in [
        (slow.to_str().unwrap(), true, libc::SIGTERM, 143),
        ("/dev/zero", false, libc::SIGINT, 130),
    ] {
        let mut args = vec!["replay", file, "--haproxy", "/bin/false"];
        if realtime {
            args.push("--realtime");
        }
        let child = Command::new(BIN)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        let sent = Instant::now();
        // SAFETY: a signal to our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(sent.elapsed() < Duration::from_secs(5), "{file}: {:?}", sent.elapsed());
    }
}

/// Replayed with a policy whose decisions differ from the live one's at
/// every verdict, the run falls behind at each of them: only the first
/// wait is the bound a check may take (--check-timeout's); later ones are
/// what this run's checks took, so a long incident replays in seconds per
/// verdict, not a minute each.
#[test]
fn a_replay_that_fell_behind_waits_what_its_checks_take() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("incident.ndjson");
    record_live_run(&recording, &[]);
    let policy = policy_artifacts::OBSERVE_ONLY;
    let out = replay(&recording, &["--policy", policy, "--check-timeout", "1s"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    // settle: 0s interval + 2 × 1s + 5s
    let waits: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("feeding it anyway"))
        .map(|l| {
            let ms = l.split("after waiting ").nth(1).unwrap().split("ms").next().unwrap();
            ms.parse().unwrap()
        })
        .collect();
    assert!(waits.len() >= 2, "the observe-only policy diverges more than once: {log}");
    assert_eq!(waits[0], 7000, "{waits:?}");
    assert!(waits[1..].iter().all(|ms| *ms < 7000), "{waits:?}\n{log}");
}
