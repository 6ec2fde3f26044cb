//! Every policy guest, in every language, against the shared fixtures:
//! guest-policy/build-guests.sh builds them all into one directory, and each
//! `<strategy>.<language>.wasm` there runs through `rendergate policy test`
//! against tests/fixtures/policies/<strategy>.json, every case passing. The
//! set of components is checked first, so a language whose build produced
//! nothing fails rather than going untested. The JavaScript and Python
//! ports of scoped-revert also run live in `rendergate serve`, at 1, 4 and
//! 100 pods, and must write what the built-in default writes. Each
//! language's SDK runs its own unit tests too.

#[allow(dead_code)] // only `missing` is needed here
#[path = "../../tests/needs.rs"]
mod needs;

use policy_artifacts as built;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod sample;

const BIN: &str = env!("CARGO_BIN_EXE_rendergate");

/// What build-guests.sh must produce, as `<strategy>.<language>`: each
/// shipped Rust strategy, and the strategies ported to other languages.
const EXPECTED: [&str; 6] = [
    "fleet-revert.rust",
    "observe-only.rust",
    "quorum-promote.rust",
    "scoped-revert.javascript",
    "scoped-revert.python",
    "scoped-revert.rust",
];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn runs(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|out| out.status.success())
}

/// Whether componentize-py runs here; when it does not, the Python tests are
/// skipped, or fail in CI (tests/needs.rs).
fn componentize_py(skipped: &str) -> bool {
    let in_venv = repository().join("guest-policy/python/.venv/bin/componentize-py");
    if runs(in_venv.to_str().unwrap()) || runs("componentize-py") {
        return true;
    }
    needs::missing("componentize-py is not installed (guest-policy/setup-toolchains.sh)", skipped);
    false
}

/// Whether guest-policy/js's pinned componentize-qjs is installed (`npm ci`);
/// when it is not, the test of every language is skipped, or fails in CI.
fn componentize_qjs(skipped: &str) -> bool {
    let tool =
        repository().join("guest-policy/js/node_modules/componentize-qjs/bin/componentize-qjs");
    if runs("node") && tool.is_file() {
        return true;
    }
    needs::missing(
        "node or guest-policy/js's componentize-qjs is not installed (guest-policy/setup-toolchains.sh)",
        skipped,
    );
    false
}

/// This run's scratch directory: the guests built, and their compiled forms
/// (the policy cache: no two builds of a Python component are the same
/// bytes, so each run would leave tens of megabytes in the user's cache).
fn scratch() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("policy-languages")
}

/// Every guest, built once per run by build-guests.sh into scratch()/guests
/// (cleared first: the components of an earlier run, and their compiled
/// forms). None when a toolchain is missing (skipped, or failed in CI).
fn guests(skipped: &str) -> Option<PathBuf> {
    static BUILT: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    if !componentize_py(skipped) || !componentize_qjs(skipped) {
        return None;
    }
    let out = scratch().join("guests");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if *built {
        return Some(out);
    }
    match std::fs::remove_dir_all(scratch()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("clear {}: {e}", scratch().display()),
    }
    let build = Command::new(repository().join("guest-policy/build-guests.sh"))
        .arg(&out)
        // The Rust guests are already built there for the other tests, the
        // same way: the script's cargo build finds them fresh.
        .env("CARGO_TARGET_DIR", built::TARGET_DIR)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .output()
        .expect("run guest-policy/build-guests.sh");
    assert!(
        build.status.success(),
        "guest-policy/build-guests.sh failed:\n{}{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );
    *built = true;
    Some(out)
}

#[test]
fn every_guest_in_every_language_passes_its_strategys_fixtures() {
    let Some(out) = guests("the test of the guests in every language") else {
        return;
    };

    let mut components: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter_map(|file| file.strip_suffix(".wasm").map(str::to_owned))
        .collect();
    components.sort();
    assert_eq!(components, EXPECTED, "components built into {}", out.display());

    let mut failures = Vec::new();
    for component in &components {
        let (strategy, _language) = component.split_once('.').unwrap();
        let fixture = repository().join(format!("tests/fixtures/policies/{strategy}.json"));
        let cases =
            serde_json::from_slice::<Vec<serde_json::Value>>(&std::fs::read(&fixture).unwrap())
                .unwrap()
                .len();
        let run = Command::new(BIN)
            .args(["policy", "test"])
            .arg(out.join(format!("{component}.wasm")))
            .arg(&fixture)
            .env("XDG_CACHE_HOME", scratch().join("cache"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&run.stdout);
        let summary = text.lines().last().unwrap_or_default();
        let all_passed = format!("{cases} passed, 0 failed");
        if !run.status.success() || summary != all_passed {
            failures.push(format!(
                "{component}: `{summary}`, wanted `{all_passed}`\n{text}{}",
                String::from_utf8_lossy(&run.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_javascript_sdk_passes_its_unit_tests() {
    if !componentize_qjs("the JavaScript SDK's unit tests") {
        return;
    }
    let run = Command::new("npm")
        .args(["test", "--silent", "--prefix"])
        .arg(repository().join("guest-policy/js"))
        .output()
        .expect("run npm");
    assert!(
        run.status.success(),
        "npm test in guest-policy/js failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn the_python_sdk_passes_its_unit_tests() {
    if !componentize_py("the Python SDK's unit tests") {
        return;
    }
    let run = Command::new(repository().join("guest-policy/python/test.sh")).output().unwrap();
    assert!(
        run.status.success(),
        "guest-policy/python/test.sh failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
}

/// One `serve` run of a rollout at `pods` pods, with `policy` live (the
/// built-in without), each step sent once the one before was decided:
/// plan-1 passes, every pod loads it (a promote each); plan-2 is refused
/// (the latch closes), every pod took it without loading it (a revert each).
/// With `reload_to`, the policy's file is replaced by that component once
/// plan-1 is promoted, and plan-2 is sent once the gate says it reloaded.
/// Returns its output lines after `hello`, verdicts without their time and
/// message.
fn rollout(policy: Option<&Path>, pods: usize, reload_to: Option<&Path>) -> Vec<String> {
    let mut serve = Command::new(BIN);
    serve.args(["serve", "--check-interval", "0s", "--haproxy", &sample::haproxy()]);
    if let Some(policy) = policy {
        serve.arg("--policy").arg(policy).args(["--policy-poll", "50ms"]);
    }
    let mut child = serve
        .env("XDG_CACHE_HOME", scratch().join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
    let (tx, log_lines) = std::sync::mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || stderr.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
    let mut log: Vec<String> = Vec::new();

    let mut outputs: Vec<String> = Vec::new();
    let mut step = |events: Vec<serde_json::Value>, kind: &str, count: usize| {
        for event in events {
            writeln!(stdin, "{event}").unwrap();
        }
        let wanted = format!(r#"{{"type":"{kind}""#);
        while outputs.iter().filter(|l| l.starts_with(&wanted)).count() < count {
            let line = lines
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|e| panic!("no {count} {kind} lines ({e}): {outputs:#?}"));
            outputs.push(line);
        }
    };
    let pod = |i: usize| format!("ns/haproxy-{i:03}");
    let applied = |i: usize, plan: &str| {
        serde_json::json!({"type": "applied", "pod": pod(i), "plan": plan,
            "running_plan": "plan-1", "baseline_plan": "plan-0"})
    };
    let discovered = serde_json::json!({"type": "pods_discovered", "pods": (0..pods).map(pod).collect::<Vec<_>>()});
    step(vec![discovered, sample::rendered("plan-1", false)], "verdict", 1);
    step((0..pods).map(|i| applied(i, "plan-1")).collect(), "promote", pods);
    if let (Some(policy), Some(next)) = (policy, reload_to) {
        std::fs::copy(next, policy).unwrap();
        while !log.last().is_some_and(|l| l.contains("policy reloaded")) {
            // Compiling a Python component takes tens of seconds uncached.
            let line = log_lines
                .recv_timeout(std::time::Duration::from_secs(180))
                .unwrap_or_else(|e| panic!("no reload ({e}): {}", log.join("\n")));
            log.push(line);
        }
    }
    step(vec![sample::rendered("plan-2", true)], "latch", 1);
    step((0..pods).map(|i| applied(i, "plan-2")).collect(), "revert", pods);
    drop(stdin);
    outputs.extend(lines.iter());
    let status = child.wait().unwrap();
    log.extend(log_lines.iter());
    assert!(status.success(), "serve: {}", log.join("\n"));
    outputs.remove(0); // hello: names the policy
    // A verdict's time and haproxy's message (process ids) differ run to run.
    outputs
        .iter()
        .map(|line| {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            let fields = value.as_object_mut().unwrap();
            fields.remove("duration_ms");
            fields.remove("message");
            value.to_string()
        })
        .collect()
}

/// The JavaScript and Python ports of scoped-revert, live in `serve`, write
/// what the built-in default writes, at 1, 4 and 100 pods: both verdicts,
/// the latch, a promote and a revert per pod; and so do they when one is
/// hot-reloaded to the other between the two plans.
#[test]
fn javascript_and_python_policies_in_serve_write_what_the_default_writes() {
    let Some(out) = guests("the JavaScript and Python policies in serve") else {
        return;
    };
    let component = |language: &str| out.join(format!("scoped-revert.{language}.wasm"));
    for pods in [1, 4, 100] {
        let default = rollout(None, pods, None);
        assert_eq!(default.len(), 2 * pods + 3, "{default:#?}");
        for language in ["javascript", "python"] {
            let lines = rollout(Some(&component(language)), pods, None);
            assert_eq!(lines, default, "{language} at {pods} pods");
        }
        // Hot reload between the two plans: JavaScript to Python, and back.
        let live = scratch().join("live-policy.wasm");
        for (from, to) in [("javascript", "python"), ("python", "javascript")] {
            std::fs::copy(component(from), &live).unwrap();
            let lines = rollout(Some(&live), pods, Some(&component(to)));
            assert_eq!(lines, default, "{from} reloaded to {to} at {pods} pods");
        }
    }
}
