//! `rendergate replay EVENTS --fixtures OUT.json` through the real binary,
//! real haproxy and a real policy component: every trigger of the replay
//! becomes a case named after its input line, the cases pass `rendergate
//! policy test` with the policy that was live and fail with another, and
//! their expectations are the decisions the replay published.
//!
//! `RENDERGATE_TEST_HAPROXY` names the haproxy to use (default: `haproxy`).

#[allow(dead_code)]
#[path = "../../tests/e2e/support.rs"]
mod support;

use policy_artifacts as built;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use support::*;

/// `rendergate replay EVENTS --policy POLICY --fixtures OUT` with the test's haproxy.
fn replay_to_fixtures(events: &Path, policy: &str, out: &Path) -> Output {
    replay_with(events, &["--policy", policy], out)
}

/// `rendergate replay EVENTS FLAGS... --fixtures OUT` with the test's haproxy.
fn replay_with(events: &Path, flags: &[&str], out: &Path) -> Output {
    let haproxy = haproxy();
    let mut args = vec![
        "replay",
        events.to_str().unwrap(),
        "--haproxy",
        &haproxy,
        "--check-interval",
        "0s",
        "--fixtures",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    Command::new(BIN).args(args).stdin(Stdio::null()).output().expect("start rendergate replay")
}

/// `rendergate policy test POLICY FIXTURES`: its exit status and last line.
fn policy_test(policy: &str, fixtures: &Path) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(["policy", "test", policy, fixtures.to_str().unwrap()])
        .output()
        .expect("start rendergate policy test");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), text.lines().last().unwrap_or_default().to_owned())
}

fn cases(fixtures: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures).expect("the fixtures were written");
    serde_json::from_str::<Vec<Value>>(&text).expect("a JSON array of cases")
}

/// The `promote` and `revert` outputs, as the cases' `expect` spells them.
fn decisions_published(outputs: &[Value]) -> Vec<Value> {
    outputs
        .iter()
        .filter_map(|l| match l["type"].as_str() {
            Some("promote") => Some(json!({"promote": {"pod": l["pod"], "plan": l["plan"]}})),
            Some("revert") => {
                let target = if l["to"] == "baseline" {
                    json!("baseline")
                } else {
                    json!({"plan": l["to"]})
                };
                Some(json!({"revert": {"pod": l["pod"], "plan": l["plan"], "target": target}}))
            }
            _ => None,
        })
        .collect()
}

fn decisions_expected(cases: &[Value]) -> Vec<Value> {
    cases
        .iter()
        .flat_map(|c| {
            let promote =
                c["expect"]["promote"].as_array().unwrap().iter().map(|p| json!({"promote": p}));
            let revert =
                c["expect"]["revert"].as_array().unwrap().iter().map(|r| json!({"revert": r}));
            promote.chain(revert).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_replayed_event_stream_becomes_cases_that_pass_only_with_its_policy() {
    let dir = tempfile::tempdir().unwrap();
    let events = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/events.ndjson");
    let fixtures = dir.path().join("incident.json");
    let out = replay_to_fixtures(&events, built::SCOPED_REVERT, &fixtures);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mode = std::fs::metadata(&fixtures).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a refusal's message may quote the render");

    let cases = cases(&fixtures);
    let input: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Each case names its trigger and the input line that brought it.
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let line = case["input_line"].as_u64().unwrap_or_else(|| panic!("no line: {case}"));
        assert!(name.contains(&format!(" line {line}: ")), "{name}");
        assert_eq!(case["policy"], "scoped-revert");
        let event = &input[line as usize - 1];
        if let Some(verdict) = case["trigger"].get("verdict") {
            assert_eq!(event["type"], "rendered", "{name}");
            assert_eq!(event["render"], verdict["render"], "{name}");
            let outcome = verdict["outcome"].as_str().unwrap();
            assert!(
                name.contains(&format!(
                    "{outcome} verdict on {}",
                    verdict["plan"].as_str().unwrap()
                )),
                "{name}"
            );
        } else {
            let pod = &case["trigger"]["applied"];
            assert_eq!(event["type"], "applied", "{name}");
            assert_eq!(
                (&event["pod"], &event["plan"]),
                (&pod["pod"], &pod["applied_plan"]),
                "{name}"
            );
            assert!(
                name.ends_with(&format!(
                    "{} applied {}",
                    pod["pod"].as_str().unwrap(),
                    pod["applied_plan"].as_str().unwrap()
                )),
                "{name}"
            );
        }
    }
    let names: Vec<&str> = cases.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(
        names.contains(&"#4 line 5: refused verdict on plan-2 (render r-2, newest)"),
        "{names:?}"
    );
    assert!(names.contains(&"#5 line 6: haptic/haproxy-0 applied plan-2"), "{names:?}");
    let verdicts = cases.iter().filter(|c| c["trigger"].get("verdict").is_some()).count();
    assert_eq!(verdicts, 4, "one case per verdict: {names:?}");
    assert_eq!(cases.len(), 8, "and one per report that asked a decision: {names:?}");

    // The expectations are the decisions the replay published, in order.
    let outputs = support::lines(&out);
    let published = decisions_published(&outputs);
    assert!(!published.is_empty());
    assert_eq!(decisions_expected(&cases), published);

    assert_eq!(
        policy_test(built::SCOPED_REVERT, &fixtures),
        (Some(0), "8 passed, 0 failed".into())
    );
    // Another policy decides otherwise: the expectations are real.
    let (code, last) = policy_test(built::OBSERVE_ONLY, &fixtures);
    assert_eq!(code, Some(1), "{last}");
    assert!(!last.ends_with(" 0 failed"), "{last}");
}

#[test]
fn a_recorded_incident_names_lines_as_serve_counted_them() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("incident.ndjson");
    let mut gate =
        Serve::start(&["--record", recording.to_str().unwrap(), "--policy", built::FLEET_REVERT]);
    gate.send(&json!({"type": "pods_discovered", "pods": ["ns/a", "ns/b"]})); // line 1
    gate.send_raw("{not json"); // line 2
    gate.until("error");
    gate.send(&applied("ns/a", "r-1", "plan-1", "plan-1", "plan-0")); // line 3
    gate.send(&applied("ns/a", "r-1", "plan-1", "plan-1", "plan-0")); // line 4: a repeat, no decision
    gate.send(&rendered("plan-1", "r-1", &sample_config())); // line 5
    gate.until("verdict");
    gate.send(&applied("ns/b", "r-2", "plan-2", "plan-1", "plan-1")); // line 6
    gate.send(&rendered("plan-2", "r-2", &broken_config())); // line 7
    gate.until("verdict");
    let (_, status) = gate.finish();
    assert!(status.success());

    let fixtures = dir.path().join("incident.json");
    let out = replay_to_fixtures(&recording, built::FLEET_REVERT, &fixtures);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cases = cases(&fixtures);
    let lines: Vec<(u64, &str)> = cases
        .iter()
        .map(|c| {
            let kind = if c["trigger"].get("verdict").is_some() { "verdict" } else { "applied" };
            (c["input_line"].as_u64().unwrap(), kind)
        })
        .collect();
    assert_eq!(
        lines,
        [(3, "applied"), (5, "verdict"), (6, "applied"), (7, "verdict")],
        "{cases:?}"
    );
    assert_eq!(decisions_expected(&cases), decisions_published(&support::lines(&out)));
    // fleet-revert sends ns/b back to the last passed plan, scoped-revert to
    // its baseline: the cases pass with the first only.
    let refusal = &cases[3]["expect"]["revert"];
    assert_eq!(refusal, &json!([{"pod": "ns/b", "plan": "plan-2", "target": {"plan": "plan-1"}}]));
    assert_eq!(policy_test(built::FLEET_REVERT, &fixtures), (Some(0), "4 passed, 0 failed".into()));
    let (code, last) = policy_test(built::SCOPED_REVERT, &fixtures);
    assert_eq!((code, last.as_str()), (Some(1), "3 passed, 1 failed"));
}

#[test]
fn a_trigger_the_policy_failed_gets_no_case_and_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let events = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/events.ndjson");
    let fixtures = dir.path().join("incident.json");
    let out = replay_to_fixtures(&events, built::HOSTILE_PANIC, &fixtures);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&fixtures).unwrap(), "[]\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> =
        stderr.lines().filter(|l| l.contains("--fixtures: no case for #")).collect();
    assert_eq!(warnings.len(), 8, "one per trigger: {stderr}");
    assert!(
        warnings.iter().any(|w| w.contains("#5 line 6: haptic/haproxy-0 applied plan-2")),
        "{stderr}"
    );
}

#[test]
fn an_unwritable_fixtures_path_exits_2_before_replaying() {
    let events = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/events.ndjson");
    let out =
        replay_to_fixtures(&events, built::SCOPED_REVERT, Path::new("/nonexistent/cases.json"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--fixtures /nonexistent/cases.json"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing replayed");
}

#[test]
fn the_built_in_default_deciding_in_place_is_observed_too() {
    // Without --policy the driver decides in place, not on the policy worker.
    let dir = tempfile::tempdir().unwrap();
    let events = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/events.ndjson");
    let fixtures = dir.path().join("incident.json");
    let out = replay_with(&events, &[], &fixtures);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cases = cases(&fixtures);
    assert_eq!(cases.len(), 8);
    assert!(cases.iter().all(|c| c["policy"] == "default"), "{cases:?}");
    assert_eq!(decisions_expected(&cases), decisions_published(&support::lines(&out)));
    // scoped-revert is the default as a component: it passes the default's cases.
    assert_eq!(
        policy_test(built::SCOPED_REVERT, &fixtures),
        (Some(0), "8 passed, 0 failed".into())
    );
}
