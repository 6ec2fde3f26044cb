//! The renders that once talked the gate into a pass (or a false refusal),
//! each judged by bare `haproxy -c` and by the gate, through `check` and
//! through `serve`, on the haproxy under test: the gate must say what
//! HAProxy says (docs/checking.md).

use crate::support::*;
use serde_json::{Value, json};
use std::process::Command;

const TIMEOUTS: &str = "  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n";

/// A frontend, then `backends` backends without timeouts (a four-line
/// `[WARNING]` each: about 330 bytes of output per backend), then `tail`.
fn flood(backends: usize, tail: &str) -> String {
    let mut cfg = String::from(
        "global\ndefaults\n  mode http\nfrontend f\n  bind 127.0.0.1:18080\n  timeout client 1s\n  default_backend b0\n",
    );
    for i in 0..backends {
        cfg.push_str(&format!("backend b{i}\n  server s 127.0.0.1:80\n"));
    }
    cfg.push_str(tail);
    cfg
}

fn cases() -> Vec<(&'static str, String, &'static str)> {
    let valid = |global: &str| {
        format!(
            "global\n{global}defaults\n  mode http\n{TIMEOUTS}frontend f\n  bind 127.0.0.1:18080\n"
        )
    };
    vec![
        // the alert comes after ~1 MiB of warnings: the old 64 KiB cap passed it
        (
            "flood-then-missing-backend",
            flood(
                3_200,
                "frontend g\n  bind 127.0.0.1:18081\n  timeout client 1s\n  use_backend nope\n",
            ),
            "refused",
        ),
        ("flood-valid", flood(3_200, ""), "pass"),
        // `quiet` once silenced HAProxy: "could not run", or a pass after a warning
        (
            "quiet-missing-backend",
            format!(
                "global\n  quiet\ndefaults\n  mode http\n{TIMEOUTS}frontend f\n  bind 127.0.0.1:18080\n  use_backend nope\n"
            ),
            "refused",
        ),
        (
            "quiet-after-a-warning",
            format!(
                "global\n  .warning \"first\"\n  quiet\ndefaults\n  mode http\n{TIMEOUTS}frontend f\n  bind 127.0.0.1:18080\n  use_backend nope\n"
            ),
            "refused",
        ),
        // the user/group rewrite closed an unmatched quote, and misread a
        // glued comment, an escape and a quoted argument
        ("user-unmatched-quote", valid("  user \"root\n"), "refused"),
        ("user-comment-glued", valid("  user root#admin\n"), "pass"),
        ("user-hex-escape", valid("  user \\x72oot\n"), "pass"),
        (
            "bind-quoted-argument-and-user",
            format!(
                "global\ndefaults\n  mode http\n{TIMEOUTS}frontend f\n  bind 127.0.0.1:18080\n  bind \"unix@/tmp/rendergate e2e.sock\" name \"a b\" user root\n"
            ),
            "pass",
        ),
        (
            "bind-name-user-is-not-an-option",
            format!(
                "global\ndefaults\n  mode http\n{TIMEOUTS}frontend f\n  bind 127.0.0.1:18080 name user root\n"
            ),
            "refused",
        ),
        // "Warnings were found." before the no-listener line: a pass
        (
            "no-listener-with-a-warning",
            "global\ndefaults\n  mode http\nlisten l\n  mode http\n".to_owned(),
            "pass",
        ),
    ]
}

/// Bare `haproxy -dr -c` on the config: exit 0 or 2 is a pass, 1 a refusal.
fn bare(config: &str) -> &'static str {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("haproxy.cfg"), config).unwrap();
    let out = Command::new(haproxy())
        .args(["-dr", "-c", "-f", "haproxy.cfg"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    match out.status.code() {
        Some(0 | 2) => "pass",
        Some(1) => "refused",
        other => {
            panic!("bare haproxy ended with {other:?}: {}", String::from_utf8_lossy(&out.stderr))
        }
    }
}

fn kind(verdict: &Value) -> &'static str {
    match (verdict["ok"].as_bool(), verdict["refused"].as_bool()) {
        (Some(true), Some(false)) => "pass",
        (Some(false), Some(true)) => "refused",
        (Some(false), Some(false)) => "could not run",
        _ => panic!("not a verdict: {verdict}"),
    }
}

#[test]
fn check_says_what_bare_haproxy_says_on_every_forgery() {
    for (name, config, expected) in cases() {
        assert_eq!(bare(&config), expected, "{name}: the case no longer shows what it is for");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("haproxy.cfg"), &config).unwrap();
        let out = Command::new(BIN)
            .args(["check", "--json", "--haproxy", &haproxy()])
            .arg(dir.path())
            .output()
            .unwrap();
        let verdict: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(kind(&verdict), expected, "{name}: {verdict}");
        let code = if expected == "pass" { 0 } else { 1 };
        assert_eq!(out.status.code(), Some(code), "{name}");
        if name.starts_with("quiet") {
            // `quiet` is judged as written: HAProxy's own alert still names the fault
            let message = verdict["message"].as_str().unwrap();
            assert!(message.contains("unable to find required use_backend"), "{name}: {message}");
        }
    }
}

#[test]
fn serve_says_what_bare_haproxy_says_and_reverts_only_on_a_real_refusal() {
    let mut gate = Serve::start(&[]);
    for (i, (name, config, expected)) in cases().into_iter().enumerate() {
        let plan = format!("plan-{name}");
        // a pod took the plan without its HAProxy loading it
        gate.send(&json!({"type": "rendered", "plan": plan, "render": format!("r-{i}"), "config": config}));
        gate.send(&applied("ns/pod-0", &format!("r-{i}"), &plan, "plan-0", "plan-0"));
        let verdict = gate.until("verdict").pop().unwrap();
        assert_eq!(verdict["plan"], json!(plan));
        assert_eq!(kind(&verdict), expected, "{name}: {verdict}");
        // what follows the verdict, up to the next one: a revert only on a refusal
        let mut follow = Vec::new();
        gate.send(&json!({"type": "pods_discovered", "pods": ["ns/pod-0"]}));
        let marker = format!("r-marker-{i}");
        gate.send(&rendered("plan-0", &marker, &sample_config()));
        loop {
            let line = gate.next();
            if line["type"] == "verdict" && line["render"] == json!(marker) {
                break;
            }
            follow.push(line);
        }
        let reverted = follow.iter().any(|l| l["type"] == "revert" && l["plan"] == json!(plan));
        assert_eq!(reverted, expected == "refused", "{name}: {follow:?}");
    }
    let (_, status) = gate.finish();
    assert!(status.success());
}
