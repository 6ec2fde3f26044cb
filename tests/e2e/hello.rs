//! `serve`'s first line, `hello` (docs/protocol.md): written before any input
//! is read, naming the protocol's major, the program's version, the live
//! policy, the haproxy version and the sandbox mode.

use crate::support::*;
use serde_json::json;

/// The version on the test haproxy's `-v` first line, read here independently.
fn haproxy_version() -> String {
    let out = std::process::Command::new(haproxy()).arg("-v").output().expect("run haproxy -v");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let first = text.lines().next().unwrap_or_default().to_owned();
    let mut words = first.split_whitespace().skip_while(|w| *w != "version");
    words.nth(1).unwrap_or_else(|| panic!("no version on {first:?}")).to_owned()
}

#[test]
fn hello_comes_first_before_any_input_and_names_what_answers() {
    // Serve::start reads the first line with the input open and nothing sent.
    let gate = Serve::start(&[]);
    let hello = &gate.hello;
    assert_eq!(hello["protocol"], 1, "{hello}");
    assert_eq!(hello["version"], env!("CARGO_PKG_VERSION"), "{hello}");
    assert_eq!(hello["policy"], "default", "{hello}");
    assert_eq!(hello["haproxy"], json!(haproxy_version()), "{hello}");
    assert_eq!(hello["sandbox"], "strict", "{hello}");
    let (rest, status) = gate.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "nothing but hello for no input: {rest:?}");
}

#[test]
fn hello_names_the_live_policy_and_the_sandbox_mode() {
    let gate =
        Serve::start(&["--policy", policy_artifacts::SCOPED_REVERT, "--sandbox", "best-effort"]);
    assert_eq!(
        (&gate.hello["policy"], &gate.hello["sandbox"]),
        (&json!("scoped-revert"), &json!("best-effort"))
    );
    let gate = Serve::start(&["--no-sandbox"]);
    assert_eq!(gate.hello["sandbox"], "off", "{}", gate.hello);
}

#[test]
fn hello_says_unknown_for_a_haproxy_that_is_not_there_and_the_gate_still_serves() {
    let mut gate = Serve::start(&["--haproxy", "/nonexistent/haproxy"]);
    assert_eq!(gate.hello["haproxy"], "unknown", "{}", gate.hello);
    gate.send(&rendered("plan-1", "r-1", &sample_config()));
    let verdict = gate.next();
    assert_eq!(
        (&verdict["type"], &verdict["ok"], &verdict["refused"]),
        (&json!("verdict"), &json!(false), &json!(false))
    );
}
