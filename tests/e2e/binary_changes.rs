//! `rendergate serve` while its haproxy binary changes under it: a binary
//! replaced is asked again (verdict memory keeps each binary's answers
//! apart), one installed after start is used at the next attempt, one
//! removed could not run (docs/operations.md, "The haproxy binary").

use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// Puts a copy of `from` at `at` as package managers do: written beside it,
/// then renamed over it. A child process writes it, so no write descriptor
/// of this (threaded) test process can make an exec fail with "Text file busy".
fn install(from: &Path, at: &Path) {
    let status = Command::new("/bin/sh")
        .args(["-c", r#"cp "$1" "$2.new" && chmod 755 "$2.new" && mv "$2.new" "$2""#, "sh"])
        .args([from, at])
        .status()
        .unwrap();
    assert!(status.success());
}

/// A stand-in haproxy that refuses every config, installed at `at`.
fn install_refuser(at: &Path) {
    let script = at.with_extension("script");
    let body =
        "#!/bin/sh\necho '[ALERT]    (1) : config : refused by the replacement binary'\nexit 1\n";
    let status = Command::new("/bin/sh")
        .args(["-c", r#"printf '%s' "$2" > "$1""#, "sh"])
        .arg(&script)
        .arg(body)
        .status()
        .unwrap();
    assert!(status.success());
    install(&script, at);
}

/// The next verdict, past any latch or release lines before it.
fn verdict(gate: &mut Serve) -> Value {
    gate.until("verdict").pop().unwrap()
}

fn outcome(v: &Value) -> (&str, bool) {
    let label = match (v["ok"].as_bool(), v["refused"].as_bool()) {
        (Some(true), _) => "pass",
        (_, Some(true)) => "refused",
        _ => "unavailable",
    };
    (label, v["remembered"].as_bool().unwrap())
}

#[test]
fn a_replaced_binary_is_asked_again_not_answered_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("haproxy");
    install(&real_haproxy(), &path);
    // the stand-in is a shell script: the sandbox would not let /bin/sh run
    let mut gate = Serve::start(&["--haproxy", path.to_str().unwrap(), "--no-sandbox"]);
    gate.send(&rendered("plan-1", "r-1", &sample_config_anywhere()));
    assert_eq!(outcome(&verdict(&mut gate)), ("pass", false));
    gate.send(&rendered("plan-1", "r-2", &sample_config_anywhere()));
    assert_eq!(
        outcome(&verdict(&mut gate)),
        ("pass", true),
        "the same binary's answer is remembered"
    );

    // upgraded while serve runs: the same content is judged by the new binary
    install_refuser(&path);
    gate.send(&rendered("plan-1", "r-3", &sample_config_anywhere()));
    let v = verdict(&mut gate);
    assert_eq!(outcome(&v), ("refused", false), "{v}");
    assert!(v["message"].as_str().unwrap().contains("refused by the replacement binary"), "{v}");
    gate.send(&rendered("plan-1", "r-4", &sample_config_anywhere()));
    assert_eq!(
        outcome(&verdict(&mut gate)),
        ("refused", true),
        "the new binary's answer is remembered"
    );

    // the first binary back (another file, the same content): its own answer
    install(&real_haproxy(), &path);
    gate.send(&rendered("plan-1", "r-5", &sample_config_anywhere()));
    let v = verdict(&mut gate);
    assert_eq!((v["render"].as_str(), outcome(&v)), (Some("r-5"), ("pass", true)), "{v}");

    // removed: the next check could not run, and says why
    std::fs::remove_file(&path).unwrap();
    gate.send(&rendered("plan-2", "r-6", &broken_config()));
    let v = verdict(&mut gate);
    assert_eq!(outcome(&v), ("unavailable", false), "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("haproxy binary not found: {}", path.display())),
        "{message}"
    );
    let (_, status) = gate.finish();
    assert!(status.success());
}

#[test]
fn a_binary_installed_after_start_is_used_at_the_next_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("haproxy");
    // sandboxed (the default): the sandbox is made for the binary once it is there
    let mut gate = Serve::start(&["--haproxy", path.to_str().unwrap()]);
    gate.send(&rendered("plan-1", "r-1", &sample_config_anywhere()));
    let v = verdict(&mut gate);
    assert_eq!(outcome(&v), ("unavailable", false), "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("haproxy binary not found: {}", path.display())),
        "{message}"
    );
    assert_eq!(
        gate.next(),
        json!({"type": "latch", "state": "pessimistic", "reason": "unavailable"})
    );

    install(&real_haproxy(), &path);
    // retried after 1 s, then 2 s, ...: the first retry after the install passes
    let mut v = verdict(&mut gate);
    for _ in 0..3 {
        if outcome(&v).0 == "pass" {
            break;
        }
        assert_eq!(outcome(&v), ("unavailable", false), "{v}");
        v = verdict(&mut gate);
    }
    assert_eq!((v["render"].as_str(), outcome(&v)), (Some("r-1"), ("pass", false)), "{v}");
    assert_eq!(gate.next(), json!({"type": "latch", "state": "optimistic"}));
    let (_, status) = gate.finish();
    assert!(status.success());
}
