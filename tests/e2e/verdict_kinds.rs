//! `rendergate check DIR` against real haproxy: each verdict kind is bare
//! `haproxy -dr -c`'s on the same files, and the gate's memory limits never
//! decide one: an address-space limit below the top is measured by a second
//! run, and at the top the memory touched is the bound (docs/checking.md,
//! "Verdicts"). Each case is run bare
//! first, so a HAProxy that answers otherwise fails here, not later.

use crate::support::*;
use serde_json::Value;
use std::path::Path;

/// `rendergate check --json` over DIR: its exit code and its verdict.
fn check(extra: &[&str], dir: &Path) -> (Option<i32>, Value) {
    let haproxy = haproxy();
    let mut args = vec!["check", "--json", "--haproxy", haproxy.as_str()];
    args.extend_from_slice(extra);
    args.push(dir.to_str().unwrap());
    let out = run(&args, "", &[]);
    let verdict = lines(&out)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no verdict; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), verdict)
}

/// Bare `haproxy -dr -c` in DIR, unbounded: its exit code and what it said.
fn bare(dir: &Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(real_haproxy())
        .args(["-dr", "-c", "-f", "haproxy.cfg"])
        .current_dir(dir)
        .output()
        .unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), said)
}

/// A directory holding `config` and the `files` beside it.
fn render(config: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("haproxy.cfg"), config).unwrap();
    for (name, content) in files {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    dir
}

fn with_frontend(global: &str, bind: &str) -> String {
    format!(
        "global\n{global}defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind {bind}\n"
    )
}

const FIRST_RUN_HIT: &str = "the first run hit the check's address-space limit of 1GiB (--check-memory); under --check-memory-max 16GiB it passed";

#[test]
fn a_ring_bigger_than_check_memory_passes_as_bare_does() {
    // 2.6 says "fail to set sink buffer size" under 1 GiB: no word of memory
    let dir = render(&with_frontend("ring big\n  size 1500000000\n", "127.0.0.1:18080"), &[]);
    let (code, said) = bare(dir.path());
    assert_eq!(code, Some(0), "bare: {said}");
    // by default one run, under 16 GiB
    let (code, v) = check(&[], dir.path());
    assert_eq!((code, &v["ok"]), (Some(0), &Value::Bool(true)), "{v}");
    assert!(!v["message"].as_str().unwrap().contains("first run"), "{v}");
    // under a lower --check-memory, a second run measures what the first hit
    let (code, v) = check(&["--check-memory", "1GiB"], dir.path());
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["message"].as_str().unwrap().starts_with(FIRST_RUN_HIT), "{v}");
    // one run at a top of 1 GiB: no address-space bound there, and the ring
    // touches a few MB of the 1.5 GB it reserves
    let (code, v) = check(&["--check-memory", "1GiB", "--check-memory-max", "1GiB"], dir.path());
    assert_eq!((code, &v["ok"]), (Some(0), &Value::Bool(true)), "{v}");
    assert!(!v["message"].as_str().unwrap().contains("first run"), "{v}");
}

#[test]
fn a_render_that_touches_more_than_check_memory_max_could_not_run() {
    // Lua run while the config is read, touching 16 MiB a step up to 1 GiB
    let lua = "local t = {}\nfor i = 1, 64 do t[i] = string.rep(string.char(64 + i % 26), 16 * 1024 * 1024) end\n";
    let config = with_frontend("  lua-load hog.lua\n", "127.0.0.1:18080");
    let dir = render(&config, &[("hog.lua", lua)]);
    let (code, said) = bare(dir.path());
    assert_eq!(code, Some(0), "bare: {said}");
    let (code, v) = check(&["--check-memory-max", "256MiB"], dir.path());
    assert_eq!(
        (code, &v["ok"], &v["refused"]),
        (Some(2), &Value::Bool(false), &Value::Bool(false)),
        "{v}"
    );
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("past the check's limit of 256MiB (--check-memory-max), and was stopped"),
        "{message}"
    );
    // and under a top it fits, the same render passes, as bare does
    let (code, v) = check(&[], dir.path());
    assert_eq!((code, &v["ok"]), (Some(0), &Value::Bool(true)), "{v}");
}

/// A self-signed P-256 certificate and key (CN rendergate.test, 100 years).
const SITE_PEM: &str = "\
-----BEGIN CERTIFICATE-----
MIIBjDCCATGgAwIBAgIUcYeBwzLEUS0Ut9m+SBtqZWOKO+EwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPcmVuZGVyZ2F0ZS50ZXN0MCAXDTI2MTIwNDE3NDgxOFoYDzIx
MjYxMTEwMTc0ODE4WjAaMRgwFgYDVQQDDA9yZW5kZXJnYXRlLnRlc3QwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAATUJSZpBfCRroKwJjGQuFWeCIrD6uXpvGuUh/w+
PKreuSVb2Kyk70O4z/dq6eupJxSVe4OO82t6NFJz6m8tCHQAo1MwUTAdBgNVHQ4E
FgQUGHgbVTyWC+g5H0WqbhGoojnxjnUwHwYDVR0jBBgwFoAUGHgbVTyWC+g5H0Wq
bhGoojnxjnUwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEAjKfd
mPhZg5cSfVNwDvWF+T7RXx46bhZKZYtSaI1Y5ksCIQDSm3r8FurTFc1BPLMlUO1f
Mf6/vwX9+h/sa0QJr50DkQ==
-----END CERTIFICATE-----
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgoFDo5rDKSGwtuzO5
DoQqxNbDmjMbP9ilTQADtX8RTfihRANCAATUJSZpBfCRroKwJjGQuFWeCIrD6uXp
vGuUh/w+PKreuSVb2Kyk70O4z/dq6eupJxSVe4OO82t6NFJz6m8tCHQA
-----END PRIVATE KEY-----
";

#[test]
fn an_ssl_session_cache_bigger_than_check_memory_passes_as_bare_does() {
    // 4,000,000 sessions map (and touch) about 1 GB: "Unable to allocate SSL
    // session cache" under 1 GiB; 3,500,000 still fit (haproxy 2.6)
    let config =
        with_frontend("  tune.ssl.cachesize 4000000\n", "127.0.0.1:18443 ssl crt site.pem");
    let dir = render(&config, &[("site.pem", SITE_PEM)]);
    let (code, said) = bare(dir.path());
    assert_eq!(code, Some(0), "bare: {said}");
    let (code, v) = check(&["--check-memory", "1GiB"], dir.path());
    assert_eq!(code, Some(0), "{v}");
    assert!(v["message"].as_str().unwrap().starts_with(FIRST_RUN_HIT), "{v}");
    let (code, v) = check(&[], dir.path());
    assert_eq!((code, &v["ok"]), (Some(0), &Value::Bool(true)), "{v}");
}

#[test]
fn words_of_memory_in_an_alert_are_the_renders_and_refuse_as_bare_does() {
    // a quoted name with a `'` in it, saying "out of memory"
    let config = format!(
        "{}  use_backend \"b'x out of memory\"\nbackend b\n  server s1 127.0.0.1:80\n",
        with_frontend("", "127.0.0.1:18080")
    );
    // and a server named so
    let server = format!(
        "{}  default_backend b\nbackend b\n  server \"out of memory\" 127.0.0.1:80\n",
        with_frontend("", "127.0.0.1:18080")
    );
    for (config, said_by_haproxy) in [
        (config, "unable to find required use_backend: 'b'x out of memory'"),
        (server, "is not permitted in server name 'out of memory'"),
    ] {
        let dir = render(&config, &[]);
        let (code, said) = bare(dir.path());
        assert_eq!(code, Some(1), "bare: {said}");
        assert!(said.contains(said_by_haproxy), "bare: {said}");
        // one run (the default), and two (a lower --check-memory)
        for args in [&[][..], &["--check-memory", "1GiB"][..]] {
            let (code, v) = check(args, dir.path());
            assert_eq!((code, &v["refused"]), (Some(1), &Value::Bool(true)), "{v}");
            let message = v["message"].as_str().unwrap();
            assert!(message.contains(said_by_haproxy), "{message}");
            assert!(!message.contains("first run"), "refused, in HAProxy's words: {message}");
        }
    }
}

#[test]
fn a_lua_exit_2_after_a_fatal_alert_is_refused_not_a_forged_pass() {
    // the unknown keyword is fatal; the Lua loaded after it sets exit 2,
    // HAProxy's "no listener" status
    let config = with_frontend("  bogus-keyword\n  lua-load exit2.lua\n", "127.0.0.1:18080");
    let dir = render(&config, &[("exit2.lua", "os.exit(2)\n")]);
    let (code, said) = bare(dir.path());
    assert_eq!(code, Some(2), "bare: {said}");
    assert!(said.contains("[ALERT]") && said.contains("unknown keyword 'bogus-keyword'"), "{said}");
    let (code, v) = check(&[], dir.path());
    assert_eq!((code, &v["refused"]), (Some(1), &Value::Bool(true)), "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("→ [ALERT]") && message.contains("bogus-keyword"), "{message}");
}

#[test]
fn exit_2_with_only_no_listener_passes_and_says_so() {
    let dir = render("global\ndefaults\n  mode http\n", &[]);
    let (code, said) = bare(dir.path());
    assert_eq!(code, Some(2), "bare: {said}");
    let (code, v) = check(&[], dir.path());
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        v["message"].as_str().unwrap(),
        "valid, but HAProxy would not start it: no listener (exit 2)",
        "{v}"
    );
}
