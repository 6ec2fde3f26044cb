//! `rendergate serve` against real haproxy: the NDJSON stream of docs/protocol.md §2.

use crate::support::*;
use serde_json::json;
use std::path::Path;

#[test]
fn a_valid_render_passes_and_an_invalid_one_is_refused_with_context() {
    let mut gate = Serve::start(&[]);
    let mut line = rendered("plan-1", "r-1", &sample_config());
    line["correlation"] = json!("c-1");
    gate.send(&line);
    let v = gate.next();
    assert_eq!(v["type"], "verdict");
    assert_eq!(
        (v["plan"].as_str(), v["render"].as_str(), v["correlation"].as_str()),
        (Some("plan-1"), Some("r-1"), Some("c-1"))
    );
    assert_eq!(
        (v["ok"].as_bool(), v["refused"].as_bool(), v["newest"].as_bool()),
        (Some(true), Some(false), Some(true))
    );
    assert_eq!((v["pinned"].as_bool(), v["remembered"].as_bool()), (Some(false), Some(false)));
    assert!(v["duration_ms"].as_u64().is_some());

    gate.send(&rendered("plan-2", "r-2", &broken_config()));
    let v = gate.next();
    assert_eq!((v["ok"].as_bool(), v["refused"].as_bool()), (Some(false), Some(true)));
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("→ [ALERT]") && message.contains("bogus-action"), "{message}");
    assert!(
        message.contains("  Config context:") && message.contains("http-request bogus-action"),
        "{message}"
    );
    assert!(!message.contains("/tmp/"), "no host paths: {message}");
    assert_eq!(gate.next(), json!({"type": "latch", "state": "pessimistic", "reason": "refused"}));

    // The same broken content again: remembered, pinned, no new haproxy run.
    gate.send(&rendered("plan-2", "r-3", &broken_config()));
    let v = gate.next();
    assert_eq!(
        (v["refused"].as_bool(), v["remembered"].as_bool(), v["pinned"].as_bool()),
        (Some(true), Some(true), Some(true))
    );
    // A good render releases the held render and the latch opens.
    gate.send(&rendered("plan-3", "r-4", &sample_config()));
    let out = gate.until("release");
    assert_eq!(out[1], json!({"type": "latch", "state": "optimistic"}));
    assert_eq!(out[2], json!({"type": "release", "plan": "plan-3", "render": "r-4"}));
    let (rest, status) = gate.finish();
    assert!(rest.is_empty(), "{rest:?}");
    assert!(status.success());
}

#[test]
fn a_missing_binary_could_not_run_and_never_reverts() {
    let mut gate = Serve::start(&["--haproxy", "/nonexistent/haproxy"]);
    gate.send(&applied("ns/a", "r-1", "plan-1", "plan-0", "plan-0"));
    gate.send(&rendered("plan-1", "r-1", &sample_config()));
    let v = gate.next();
    assert_eq!((v["ok"].as_bool(), v["refused"].as_bool()), (Some(false), Some(false)));
    assert!(v["message"].as_str().unwrap().contains("/nonexistent/haproxy"));
    assert_eq!(
        gate.next(),
        json!({"type": "latch", "state": "pessimistic", "reason": "unavailable"})
    );
    let (rest, status) = gate.finish();
    assert!(status.success());
    assert!(rest.iter().all(|l| l["type"] != "revert"), "{rest:?}");
}

#[test]
fn a_traversal_path_could_not_run_naming_it_and_writes_nothing_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let marker = format!("rendergate-e2e-escape-{}", std::process::id());
    let mut line = rendered("plan-1", "r-1", &sample_config());
    line["files"] = json!([
        {"kind": "map", "path": "maps/ok.map", "content": "a b\n"},
        {"kind": "general", "path": format!("../../{marker}"), "content": "escaped\n"},
    ]);
    let out = run(
        &["serve", "--haproxy", &haproxy()],
        &format!("{line}\n"),
        &[("TMPDIR", work.as_path())],
    );
    assert!(out.status.success());
    let v = &lines(&out)[0];
    assert_eq!((v["ok"].as_bool(), v["refused"].as_bool()), (Some(false), Some(false)));
    assert!(v["message"].as_str().unwrap().contains(&marker), "{v}");
    for dir in [tmp.path(), &work, Path::new("/tmp"), Path::new("/")] {
        assert!(!dir.join(&marker).exists(), "escaped into {}", dir.display());
    }
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "nothing left in the work directory");
}

#[test]
fn a_bad_line_gets_an_error_naming_it_and_the_next_line_still_works() {
    let input = [
        "".to_owned(),
        "{not json".to_owned(),
        json!({"type": "rendered", "plan": "plan-1"}).to_string(),
        json!({"type": "launch"}).to_string(),
        rendered("plan-1", "r-1", &sample_config()).to_string(),
    ]
    .join("\n");
    let out = run(
        &["serve", "--haproxy", &haproxy(), "--check-interval", "0s"],
        &format!("{input}\n"),
        &[],
    );
    assert!(out.status.success());
    let out = lines(&out);
    let errors: Vec<_> = out.iter().filter(|l| l["type"] == "error").collect();
    let numbers: Vec<u64> = errors.iter().map(|e| e["line"].as_u64().unwrap()).collect();
    assert_eq!(numbers.len(), 3, "{out:?}");
    for n in [2, 3, 4] {
        assert!(numbers.contains(&n), "line {n}: {out:?}");
    }
    let message = |n: u64| {
        errors.iter().find(|e| e["line"] == n).unwrap()["message"].as_str().unwrap().to_owned()
    };
    assert!(message(2).contains("JSON"), "{}", message(2));
    assert!(message(3).contains("render"), "{}", message(3));
    assert!(message(4).contains("launch"), "{}", message(4));
    let verdicts: Vec<_> = out.iter().filter(|l| l["type"] == "verdict").collect();
    assert_eq!(verdicts.len(), 1);
    assert_eq!(verdicts[0]["ok"], true, "the gate still works after bad lines");
}

#[test]
fn the_default_policy_reverts_and_promotes_a_fleet_fed_by_applied_events() {
    let mut gate = Serve::start(&[]);
    gate.send(
        &json!({"type": "pods_discovered", "pods": ["haptic/haproxy-0", "haptic/haproxy-1"]}),
    );
    // plan-1 passes; both pods hold it and run it: both may promote.
    gate.send(&applied("haptic/haproxy-0", "r-1", "plan-1", "plan-1", "plan-0"));
    gate.send(&applied("haptic/haproxy-1", "r-1", "plan-1", "plan-1", "plan-0"));
    gate.send(&rendered("plan-1", "r-1", &sample_config()));
    let mut out = gate.until("verdict");
    out.push(gate.next());
    out.push(gate.next());
    let promotes: Vec<_> = out.iter().filter(|l| l["type"] == "promote").collect();
    assert_eq!(promotes.len(), 2, "{out:?}");
    assert!(promotes.iter().all(|p| p["plan"] == "plan-1"));

    // plan-2 is broken: pod 0 took it without loading it, pod 1 loaded it.
    gate.send(&applied("haptic/haproxy-0", "r-2", "plan-2", "plan-1", "plan-1"));
    gate.send(&applied("haptic/haproxy-1", "r-2", "plan-2", "plan-2", "plan-1"));
    gate.send(&rendered("plan-2", "r-2", &broken_config()));
    let v = gate.next();
    assert_eq!((v["type"].as_str(), v["refused"].as_bool()), (Some("verdict"), Some(true)));
    assert_eq!(gate.next()["type"], "latch");
    assert_eq!(
        gate.next(),
        json!({"type": "revert", "pod": "haptic/haproxy-0", "plan": "plan-2", "to": "baseline"})
    );

    // A pod that reports plan-1 later still gets its promotion.
    gate.send(&applied("haptic/haproxy-0", "r-1", "plan-1", "plan-1", "plan-0"));
    assert_eq!(
        gate.next(),
        json!({"type": "promote", "pod": "haptic/haproxy-0", "plan": "plan-1", "render": "r-1"})
    );
    let (rest, status) = gate.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "pod 1 loaded plan-2 itself and is left alone: {rest:?}");
}

#[test]
fn end_of_input_drains_queued_checks_and_exits_0() {
    // Three renders at once, a long interval: the last must still be judged
    // before exit; a could-not-run is not retried.
    let input = [
        rendered("plan-1", "r-1", &sample_config()),
        rendered("plan-2", "r-2", &broken_config()),
        rendered("plan-3", "r-3", &sample_config().replace("30s", "31s")),
    ]
    .map(|l| l.to_string())
    .join("\n");
    let out = run(
        &["serve", "--haproxy", &haproxy(), "--check-interval", "200ms"],
        &format!("{input}\n"),
        &[],
    );
    assert!(out.status.success());
    let verdicts: Vec<_> = lines(&out).into_iter().filter(|l| l["type"] == "verdict").collect();
    let renders: Vec<_> =
        verdicts.iter().map(|v| v["render"].as_str().unwrap().to_owned()).collect();
    assert_eq!(
        renders,
        ["r-1", "r-3"],
        "the first in flight, then the newest; r-2 is held by no pod"
    );
    assert_eq!(verdicts[1]["newest"], true);

    let out = run(
        &["serve", "--haproxy", "/nonexistent/haproxy"],
        &format!("{}\n", rendered("p", "r", "x")),
        &[],
    );
    assert!(out.status.success());
    assert_eq!(
        lines(&out).iter().filter(|l| l["type"] == "verdict").count(),
        1,
        "no retries while draining"
    );
}

#[test]
fn json_log_lines_parse_and_carry_the_render_and_the_check() {
    let mut line = rendered("plan-1", "r-1", &broken_config());
    line["correlation"] = json!("c-9");
    let out =
        run(&["serve", "--haproxy", &haproxy(), "--log-format", "json"], &format!("{line}\n"), &[]);
    assert!(out.status.success());
    let logs: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON log line: {l}: {e}"))
        })
        .collect();
    let refusal =
        logs.iter().find(|l| l["outcome"] == "refused").unwrap_or_else(|| panic!("{logs:?}"));
    assert_eq!(
        (refusal["plan"].as_str(), refusal["render"].as_str(), refusal["correlation"].as_str()),
        (Some("plan-1"), Some("r-1"), Some("c-9"))
    );
    assert!(refusal["duration_ms"].as_u64().is_some());
    assert!(refusal["haproxy_message"].as_str().unwrap().contains("bogus-action"), "{refusal}");
    assert!(logs.iter().all(|l| l["level"].is_string() && l["timestamp"].is_string()));
}

#[test]
fn the_python_driver_example_runs_against_the_real_binary() {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/drive_serve.py");
    let dir = tempfile::tempdir().unwrap();
    // The example runs `rendergate` and `haproxy` by name; put both on its PATH.
    std::os::unix::fs::symlink(BIN, dir.path().join("rendergate")).unwrap();
    let path = format!(
        "{}:{}:/usr/sbin:/sbin",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir.path().join("rendergate"))
        .env("PATH", path)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for expected in [
        "verdict plan-2 (r-2): refused",
        "revert haptic/haproxy-0 from plan-2 to baseline",
        "release: dispatch held render r-3",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}
