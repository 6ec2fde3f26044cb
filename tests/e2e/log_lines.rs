//! Logs stay logs (docs/behaviour.md, "Bounded work"): names from input with
//! newlines, carriage returns or ANSI escapes, carrying a whole fake log
//! record, never start a record of their own on stderr, in either
//! `--log-format`.

use crate::support::*;
use serde_json::{Value, json};

/// A record as the text format writes one, and as the JSON format does.
const FORGED_TEXT: &str = "2020-01-01T00:00:00.000000Z ERROR forged record";
const FORGED_JSON: &str =
    r#"{"timestamp":"2020-01-01T00:00:00.000000Z","level":"ERROR","message":"forged record"}"#;

/// Every way a name can smuggle a forged record in, with `name` in front.
fn hostile(name: &str) -> [String; 4] {
    [
        format!("{name}\n{FORGED_TEXT}"),
        format!("{name}\n{FORGED_JSON}"),
        format!("{name}\r{FORGED_TEXT}"),
        format!("{name}\u{1b}[31m\u{1b}[2K\r{FORGED_TEXT}"),
    ]
}

/// Input whose names end up in log lines at debug level: verdict lines
/// (plan, render, correlation, a refusal's message), a could-not-run reason
/// naming a file path, `error` lines quoting a bad type or file kind, pods.
fn input() -> String {
    let mut lines: Vec<Value> = vec![];
    for (n, name) in hostile("x").into_iter().enumerate() {
        let pod = format!("ns/{name}");
        lines.push(json!({"type": "pods_discovered", "pods": [pod]}));
        lines.push(applied(&pod, &format!("r-{n}"), &name, &name, &name));
        let mut good = rendered(&name, &format!("r-{n}\n{name}"), &sample_config());
        good["correlation"] = json!(name);
        lines.push(good);
        let mut bad = rendered(&name, &format!("r-{n}-bad"), &broken_config());
        bad["correlation"] = json!(name);
        lines.push(bad);
        let mut traversal = rendered(&name, &format!("r-{n}-path"), &sample_config());
        traversal["files"] = json!([{"kind": "map", "path": format!("../{name}"), "content": ""}]);
        lines.push(traversal);
        lines.push(json!({"type": name}));
        lines.push(json!({"type": "rendered", "plan": "p", "render": "r", "config": "",
                          "files": [{"kind": name, "path": "a", "content": ""}]}));
        lines.push(json!({"type": "pod_terminated", "pod": pod}));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn stderr_of(format: &str) -> String {
    let args = [
        "serve",
        "--haproxy",
        &haproxy(),
        "--check-interval",
        "0s",
        "--log-level",
        "debug",
        "--log-format",
        format,
    ];
    let out = run(&args, &input(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8(out.stderr).expect("logs are UTF-8");
    assert!(stderr.contains("forged record"), "the names reached the log at all:\n{stderr}");
    assert!(!stderr.contains('\u{1b}'), "a raw ESC in the logs:\n{stderr}");
    assert!(!stderr.contains('\r'), "a raw carriage return in the logs:\n{stderr}");
    stderr
}

#[test]
fn text_logs_keep_one_record_per_line_whatever_the_names_hold() {
    let stderr = stderr_of("text");
    for line in stderr.lines() {
        assert!(
            !line.starts_with("2020-01-01") && !line.starts_with('{'),
            "a forged record: {line}"
        );
        // Every record starts with this run's timestamp and a level.
        let level = line.split_whitespace().nth(1).unwrap_or("");
        assert!(
            ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level),
            "not a record: {line}"
        );
    }
}

#[test]
fn json_logs_keep_one_object_per_line_whatever_the_names_hold() {
    let stderr = stderr_of("json");
    for line in stderr.lines() {
        let record: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object: {line}: {e}"));
        assert!(record.is_object() && record["level"].is_string(), "{line}");
        assert_ne!(record["timestamp"], "2020-01-01T00:00:00.000000Z", "a forged record: {line}");
        assert_ne!(record["message"], "forged record", "a forged record: {line}");
    }
}

/// What an operator reads (docs/operations.md): a refusal of a superseded
/// render, which reverts the pods holding it, is a warning like the newest's;
/// each revert and promotion is a record naming its pod and plan.
#[test]
fn a_superseded_refusal_warns_and_each_revert_and_promotion_names_its_pod() {
    let input = [
        rendered("plan-0", "r-0", &sample_config()),
        // while r-0 is checked: r-1 (broken, held by pod-0) is superseded by r-2
        applied("ns/pod-0", "r-1", "plan-1", "plan-0", "plan-0"),
        applied("ns/pod-1", "r-2", "plan-2", "plan-2", "plan-0"),
        rendered("plan-1", "r-1", &broken_config()),
        rendered("plan-2", "r-2", &sample_config()),
    ];
    let input: String = input.iter().map(|l| format!("{l}\n")).collect();
    let args = ["serve", "--haproxy", &haproxy(), "--check-interval", "0s", "--log-format", "json"];
    let out = run(&args, &input, &[]);
    assert!(out.status.success());
    let records: Vec<Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let find = |message: &str, key: &str, value: &str| {
        records.iter().find(|r| r["message"] == message && r[key] == value).cloned()
    };
    let refusal = find("HAProxy refused the render", "render", "r-1")
        .unwrap_or_else(|| panic!("no refusal of r-1: {records:#?}"));
    assert_eq!(
        (&refusal["level"], &refusal["newest"]),
        (&json!("WARN"), &json!(false)),
        "{refusal}"
    );
    let revert = find("revert", "pod", "ns/pod-0").unwrap_or_else(|| panic!("{records:#?}"));
    assert_eq!((&revert["plan"], &revert["to"]), (&json!("plan-1"), &json!("baseline")));
    let promote = find("promote", "pod", "ns/pod-1").unwrap_or_else(|| panic!("{records:#?}"));
    assert_eq!((&promote["plan"], &promote["render"]), (&json!("plan-2"), &json!("r-2")));
}
