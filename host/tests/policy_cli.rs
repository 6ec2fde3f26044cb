//! The policy commands and `serve --policy`, through the real binary: the
//! shipped guests against their fixtures with `policy test`, `policy check`,
//! the compile cache, and a refusal served with a component deciding it.
//! The policy host alone is tested in the rendergate-policy crate.

use policy_artifacts as built;
use std::path::Path;

fn fixtures(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/fixtures/policies/{name}.json"))
}

const BIN: &str = env!("CARGO_BIN_EXE_rendergate");

#[test]
fn every_shipped_guest_passes_its_fixtures_through_policy_test() {
    for (name, path) in built::SHIPPED {
        let out = std::process::Command::new(BIN)
            .args(["policy", "test", path])
            .arg(fixtures(name))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}:\n{text}{}", String::from_utf8_lossy(&out.stderr));
        let last = text.lines().last().unwrap();
        let passed: usize = last.split(' ').next().unwrap().parse().unwrap();
        assert!(passed >= 8, "{name}: {last}");
        assert!(last.ends_with(" passed, 0 failed"), "{name}: {last}");
    }
}

#[test]
fn policy_test_reports_a_failing_case_with_a_diff_and_exit_1() {
    let out = std::process::Command::new(BIN)
        .args(["policy", "test", built::FLEET_REVERT])
        .arg(fixtures("scoped-revert"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("failed: a refusal reverts only the pods") && text.contains("to plan plan-1"),
        "{text}"
    );
    assert!(
        text.lines().last().unwrap().ends_with("failed") && !text.ends_with(" 0 failed\n"),
        "{text}"
    );
}

#[test]
fn policy_check_names_a_good_component_and_refuses_another_world() {
    let out = std::process::Command::new(BIN)
        .args(["policy", "check", built::QUORUM_PROMOTE])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"quorum-promote\""), "{text}");
    assert!(!text.contains("warning"), "{text}");
    // A component that implements the world but fails every decision is
    // said so (exit 0: it does implement the world; serve would load it).
    let out = std::process::Command::new(BIN)
        .args(["policy", "check", built::HOSTILE_PANIC])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"hostile-panic\""), "{text}");
    assert_eq!(text.matches("warning: it fails the sample trigger").count(), 5, "{text}");
    assert!(text.contains("\"refusal\" (trap)"), "{text}");
    let out = std::process::Command::new(BIN)
        .args(["policy", "check", built::HOSTILE_OTHER_WORLD])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("does not implement rendergate:policy/policy@0.1.0")
            || text.contains("bad component"),
        "{text}"
    );
    let junk = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(junk.path(), b"not wasm").unwrap();
    let out = std::process::Command::new(BIN)
        .args(["policy", "check"])
        .arg(junk.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn policy_check_and_test_compile_through_the_cache() {
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("rendergate/policies");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(["--log-level", "debug", "policy"])
            .args(args)
            .env("XDG_CACHE_HOME", home.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let compiled = |log: &str, how: &str| log.contains(&format!("policy compiled: {how}"));
    let first = run(&["check", built::OBSERVE_ONLY]);
    assert!(compiled(&first, "Compiled"), "{first}");
    let entries = || -> Vec<_> {
        std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .map(|p| {
                // a rewrite renames a new file into place; a hit only marks
                // the entry used (its modification time)
                use std::os::unix::fs::MetadataExt;
                let meta = std::fs::metadata(&p).unwrap();
                (p.clone(), meta.ino(), meta.len())
            })
            .collect()
    };
    let stored = entries();
    assert_eq!(stored.len(), 1, "one compiled entry in {}", cache.display());
    let second = run(&["check", built::OBSERVE_ONLY]);
    assert!(compiled(&second, "Hit"), "the second check takes it from the cache: {second}");
    let fixture = fixtures("observe-only");
    let third = run(&["test", built::OBSERVE_ONLY, fixture.to_str().unwrap()]);
    assert!(compiled(&third, "Hit"), "policy test too: {third}");
    assert_eq!(entries(), stored, "the entry was read, not rewritten");
}

/// [`serve_a_refusal`], under an address-space limit (`ulimit -v`, KiB) if given.
fn serve_a_refusal_under(
    ulimit_kib: Option<u64>,
    args: &[&str],
    cache: &Path,
) -> (Vec<serde_json::Value>, String) {
    let config = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/render/haproxy.cfg"),
    )
    .unwrap();
    let map = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/render/maps/hosts.map"),
    )
    .unwrap();
    let broken =
        config.replace("    bind :8080\n", "    bind :8080\n    http-request bogus-action\n");
    let files = serde_json::json!([{"kind": "map", "path": "maps/hosts.map", "content": map}]);
    let haproxy = std::env::var("RENDERGATE_TEST_HAPROXY").unwrap_or_else(|_| "haproxy".into());
    let input = [
        serde_json::json!({"type":"rendered","plan":"plan-1","render":"r-1","config":config,"files":files}),
        serde_json::json!({"type":"applied","pod":"ns/haproxy-0","render":"r-2","plan":"plan-2","running_plan":"plan-1","baseline_plan":"plan-0"}),
        serde_json::json!({"type":"applied","pod":"ns/haproxy-1","render":"r-2","plan":"plan-2","running_plan":"plan-0","baseline_plan":"plan-0"}),
        serde_json::json!({"type":"rendered","plan":"plan-2","render":"r-2","config":broken,"files":files}),
    ]
    .map(|l| format!("{l}\n"))
    .concat();
    let mut command = match ulimit_kib {
        None => std::process::Command::new(BIN),
        Some(kib) => {
            let mut sh = std::process::Command::new("sh");
            sh.args(["-c", &format!("ulimit -v {kib} && exec \"$0\" \"$@\""), BIN]);
            sh
        }
    };
    let mut child = command
        .args(["serve", "--check-interval", "0s", "--haproxy", &haproxy])
        .args(args)
        .arg("--policy-cache")
        .arg(cache)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {:?}\n{log}", out.status);
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, log)
}

#[test]
fn serve_names_the_address_space_limit_when_no_policy_instance_fits() {
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            "ulimit -v 1048576 && exec \"$0\" \"$@\"",
            BIN,
            "serve",
            "--policy",
            built::SCOPED_REVERT,
        ])
        .args(["--policy-memory", "1GiB"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let last = err.trim().lines().last().unwrap();
    assert!(
        last.starts_with("error: --policy") && last.contains("address-space limit of 1024 MiB"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn serve_refuses_a_bad_policy_fallback_in_one_line() {
    let out = std::process::Command::new(BIN)
        .args(["serve", "--policy-fallback", "nothing"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--policy-fallback"), "{err}");
}

#[test]
fn serve_refuses_to_start_with_a_bad_policy() {
    let out = std::process::Command::new(BIN)
        .args(["serve", "--policy", built::HOSTILE_OTHER_WORLD])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--policy") && err.contains("rendergate:policy"), "{err}");
}

/// Runs `rendergate serve` with `args` over a fleet where plan-1 passes,
/// two pods take plan-2, and plan-2 is refused; returns the output lines
/// and the log.
fn serve_a_refusal(args: &[&str], cache: &Path) -> (Vec<serde_json::Value>, String) {
    serve_a_refusal_under(None, args, cache)
}

fn of_type<'a>(lines: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

#[test]
fn serve_with_the_fleet_revert_guest_changes_the_revert_outputs() {
    let cache = tempfile::tempdir().unwrap();
    let (default, _) = serve_a_refusal(&[], cache.path());
    let (fleet, _) = serve_a_refusal(&["--policy", built::FLEET_REVERT], cache.path());
    let (default, fleet) = (of_type(&default, "revert"), of_type(&fleet, "revert"));
    assert_eq!(default.len(), 2, "{default:?}");
    assert!(default.iter().all(|r| r["to"] == "baseline"), "{default:?}");
    assert_eq!(fleet.len(), 2, "{fleet:?}");
    assert!(
        fleet.iter().all(|r| r["to"] == "plan-1"),
        "fleet-revert reverts to the newest passed plan: {fleet:?}"
    );
}

#[test]
fn serve_starts_with_a_policy_that_fails_the_samples_and_its_fallback_decides() {
    // hostile-recurse compiles and implements the world, and traps on every
    // decision: serve starts with a warning, and each trigger gets the fallback.
    let cache = tempfile::tempdir().unwrap();
    let trapping = ["--policy", built::HOSTILE_RECURSE];
    let (lines, log) = serve_a_refusal(&trapping, cache.path());
    assert!(log.contains("fails the sample trigger"), "a warning at start: {log}");
    assert_eq!(of_type(&lines, "verdict").len(), 2, "every render gets its verdict: {lines:?}");
    let reverts = of_type(&lines, "revert");
    assert_eq!(reverts.len(), 2, "the default's reverts: {lines:?}");
    assert!(reverts.iter().all(|r| r["to"] == "baseline"), "{reverts:?}");
    assert!(log.contains("fallback=\"default\"") || log.contains("fallback=default"), "{log}");

    let (lines, log) =
        serve_a_refusal(&[&trapping[..], &["--policy-fallback", "none"]].concat(), cache.path());
    assert_eq!(of_type(&lines, "verdict").len(), 2, "every render gets its verdict: {lines:?}");
    assert!(
        of_type(&lines, "revert").is_empty() && of_type(&lines, "promote").is_empty(),
        "no decision: {lines:?}"
    );
    assert!(log.contains("no decision for this trigger"), "{log}");
}

#[test]
fn serve_with_a_policy_runs_under_an_address_space_limit_of_4_gib() {
    // Containers often cap the address space; wasmtime's default reservations
    // (4 GiB per memory, and a pool of them) do not fit. The default limits
    // fit the pool; 1 GiB memories do not, and fall back to on-demand.
    const FOUR_GIB_IN_KIB: u64 = 4 << 20;
    let cache = tempfile::tempdir().unwrap();
    for extra in [&[][..], &["--policy-memory", "1GiB"][..]] {
        let args = [&["--policy", built::FLEET_REVERT][..], extra].concat();
        let (lines, log) = serve_a_refusal_under(Some(FOUR_GIB_IN_KIB), &args, cache.path());
        assert_eq!(
            of_type(&lines, "verdict").len(),
            2,
            "{extra:?}: every render gets its verdict: {lines:?}\n{log}"
        );
        let reverts = of_type(&lines, "revert");
        assert_eq!(reverts.len(), 2, "{extra:?}: the policy's reverts: {lines:?}\n{log}");
        assert!(
            reverts.iter().all(|r| r["to"] == "plan-1"),
            "{extra:?}: fleet-revert decided, not a fallback: {reverts:?}"
        );
        assert!(!log.contains("decided instead") && !log.contains("panicked"), "{extra:?}: {log}");
        assert_eq!(
            log.contains("allocating each policy instance on demand"),
            !extra.is_empty(),
            "{extra:?}: {log}"
        );
    }
}

/// A policy path that is no regular file gets a one-line error at once,
/// never a wait for a FIFO's writer nor a read of an endless device; a
/// file that is no component gets its reason on one line.
#[test]
fn a_policy_that_is_no_regular_file_is_refused_at_once_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("policy.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let text = dir.path().join("text.wasm");
    std::fs::write(&text, "hello\n").unwrap();
    let fifo = fifo.to_str().unwrap();
    let cases: [(&[&str], i32, &str); 4] = [
        (&["policy", "check", fifo], 1, "not a regular file"),
        (&["policy", "check", "/dev/zero"], 1, "not a regular file"),
        (&["serve", "--policy", fifo], 2, "not a regular file"),
        (&["policy", "check", text.to_str().unwrap()], 1, "magic header not detected"),
    ];
    for (args, code, says) in cases {
        // coreutils' timeout: a hang is exit 124, not a stuck test
        let out = std::process::Command::new("timeout")
            .arg("20")
            .arg(BIN)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let text = [out.stdout, out.stderr].concat();
        let text = String::from_utf8_lossy(&text);
        assert!(text.contains(says), "{args:?}: {text}");
        assert_eq!(text.trim_end().lines().count(), 1, "{args:?}: {text}");
    }
}
