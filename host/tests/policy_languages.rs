//! Every policy guest, in every language, against the shared fixtures:
//! guest-policy/build-guests.sh builds them all into one directory, and each
//! `<strategy>.<language>.wasm` there runs through `rendergate policy test`
//! against tests/fixtures/policies/<strategy>.json, every case passing. The
//! set of components is checked first, so a language whose build produced
//! nothing fails rather than going untested. Each language's SDK runs its
//! own unit tests too.

#[allow(dead_code)] // only `missing` is needed here
#[path = "../../tests/needs.rs"]
mod needs;

use policy_artifacts as built;
use std::path::{Path, PathBuf};
use std::process::Command;

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

#[test]
fn every_guest_in_every_language_passes_its_strategys_fixtures() {
    let skipped = "the test of the guests in every language";
    if !componentize_py(skipped) || !componentize_qjs(skipped) {
        return;
    }
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("policy-languages");
    // Cleared first: the components of an earlier run, and their compiled forms.
    match std::fs::remove_dir_all(&scratch) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("clear {}: {e}", scratch.display()),
    }
    let out = scratch.join("guests");
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
            // Compiled forms are cached here, not in the user's cache: no two
            // builds of a Python component are the same bytes, so each run
            // would leave tens of megabytes there.
            .env("XDG_CACHE_HOME", scratch.join("cache"))
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
