//! The config-directory world through the real binary: on a host without
//! mount namespaces (`RENDERGATE_SANDBOX_DISABLE=mountns` stands in for a
//! pod under RuntimeDefault seccomp) each render is laid out in
//! `--config-dir` itself, judged as bare `haproxy -c` judges it there, and
//! the directory is emptied after every check; a gate killed mid-check
//! leaves a render the next gate removes (docs/checking.md, "Without
//! namespaces").

use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

fn without_mount_namespaces(config_dir: &Path, extra: &[&str]) -> Serve {
    let mut command =
        serve_command(&[&["--config-dir", config_dir.to_str().unwrap()], extra].concat());
    command.env("RENDERGATE_SANDBOX_DISABLE", "mountns");
    Serve::spawn(command)
}

fn config(global_extra: &str, frontend_extra: &str, tail: &str) -> String {
    format!(
        "global\n{global_extra}defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n\
frontend www\n  bind 127.0.0.1:18080\n{frontend_extra}{tail}"
    )
}

fn kind_of(verdict: &Value) -> &'static str {
    match (verdict["ok"].as_bool(), verdict["refused"].as_bool()) {
        (Some(true), _) => "pass",
        (_, Some(true)) => "refused",
        _ => "could not run",
    }
}

#[test]
fn each_render_is_judged_in_the_config_dir_which_is_emptied_after_each_check() {
    let config_dir = tempfile::tempdir().unwrap();
    let at = config_dir.path().display().to_string();
    let mut gate = without_mount_namespaces(config_dir.path(), &[]);
    assert_eq!(gate.hello["world"], "config-dir", "{}", gate.hello);
    let map = |path: &str| format!("  http-request set-header X %[req.hdr(host),map({path})]\n");
    let cases = [
        (
            "absolute map path under the config dir",
            config("", &map(&format!("{at}/maps/a.map")), ""),
            "pass",
        ),
        ("relative map path", config("", &map("maps/a.map"), ""), "pass"),
        (
            "a map that is not there",
            config("", &map(&format!("{at}/maps/none.map")), ""),
            "refused",
        ),
        ("log localhost", config("  log localhost:514 local0\n", "", ""), "pass"),
        ("errorfile /dev/null", config("", "", "backend b\n  errorfile 408 /dev/null\n"), "pass"),
        (
            "ca-file by path",
            config(
                "",
                "",
                "backend b\n  server s 127.0.0.1:8443 ssl verify required ca-file /etc/ssl/certs/ca-certificates.crt\n",
            ),
            "pass",
        ),
        (
            "the default resolvers section",
            config(
                "",
                "",
                "backend b\n  server s app.invalid:80 resolvers default init-addr none\n",
            ),
            "pass",
        ),
        ("a broken config", broken_config(), "refused"),
    ];
    for (i, (name, config, want)) in cases.iter().enumerate() {
        let files = json!([{"kind": "map", "path": "maps/a.map", "content": "a.example b\n"}]);
        gate.send(
            &json!({"type": "rendered", "plan": format!("plan-{i}"), "render": format!("r-{i}"),
                          "config": config, "files": files}),
        );
        let verdict = gate.until("verdict").pop().unwrap();
        assert_eq!(kind_of(&verdict), *want, "{name}: {verdict}");
        assert_eq!(
            emptied(config_dir.path()),
            Vec::<std::path::PathBuf>::new(),
            "{name}: the config dir is emptied"
        );
    }
    let (_, status) = gate.finish();
    assert!(status.success());
}

#[test]
fn a_config_dir_that_holds_anything_is_not_the_gates_and_every_check_says_so() {
    let config_dir = tempfile::tempdir().unwrap();
    std::fs::write(config_dir.path().join("haproxy.cfg"), "global\n").unwrap();
    let mut gate = without_mount_namespaces(config_dir.path(), &[]);
    assert_eq!(gate.hello["world"], "none", "{}", gate.hello);
    gate.send(&rendered("plan-1", "r-1", &sample_config()));
    let verdict = gate.until("verdict").pop().unwrap();
    assert_eq!(kind_of(&verdict), "could not run", "{verdict}");
    let message = verdict["message"].as_str().unwrap();
    assert!(message.contains("is not empty (it holds \"haproxy.cfg\")"), "{message}");
    assert_eq!(std::fs::read_to_string(config_dir.path().join("haproxy.cfg")).unwrap(), "global\n");
    // a second gate on the same directory: in use
    let free = tempfile::tempdir().unwrap();
    let _first = without_mount_namespaces(free.path(), &[]);
    let mut second = without_mount_namespaces(free.path(), &[]);
    second.send(&rendered("plan-1", "r-1", &sample_config()));
    let verdict = second.until("verdict").pop().unwrap();
    assert!(
        verdict["message"].as_str().unwrap().contains("in use by another rendergate process"),
        "{verdict}"
    );
}

#[test]
fn a_gate_killed_mid_check_leaves_its_render_and_the_next_gate_removes_it() {
    let config_dir = tempfile::tempdir().unwrap();
    let mut gate = without_mount_namespaces(config_dir.path(), &["--check-timeout", "60s"]);
    // Lua keeps haproxy -c busy while the render lies in the directory
    let slow = config("  lua-load lua/slow.lua\n", "", "");
    let files = json!([{"kind": "general", "path": "lua/slow.lua",
                        "content": "local t = os.clock() while os.clock() - t < 30 do end\n"}]);
    gate.send(&json!({"type": "rendered", "plan": "plan-1", "render": "r-1", "config": slow, "files": files}));
    let started = Instant::now();
    while !config_dir.path().join("lua/slow.lua").exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "the render was never laid out");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(gate.pid() as i32, libc::SIGKILL) }, 0);
    drop(gate);
    assert!(config_dir.path().join("haproxy.cfg").exists(), "SIGKILL leaves the render behind");

    let mut next = without_mount_namespaces(config_dir.path(), &[]);
    assert_eq!(
        next.hello["world"], "config-dir",
        "the mark says the render was a gate's: {}",
        next.hello
    );
    next.send(&rendered("plan-2", "r-2", &sample_config_anywhere()));
    let verdict = next.until("verdict").pop().unwrap();
    assert_eq!(kind_of(&verdict), "pass", "{verdict}");
    assert_eq!(emptied(config_dir.path()), Vec::<std::path::PathBuf>::new());
}

/// What is left in `dir` once it is emptied, waiting up to 5 s (a loaded
/// CI machine): a check's directory goes right after its answer (and
/// before the next check starts), not before it.
/// What is left in the config directory once the check is over: nothing
/// of the render. The next check's child, made ahead in it, may hold an
/// empty `haproxy.cfg` there already (the render's replaces it).
fn emptied(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let config = dir.join("haproxy.cfg");
    let made_ahead = |left: &[std::path::PathBuf]| {
        left == std::slice::from_ref(&config)
            && std::fs::metadata(&config).is_ok_and(|m| m.len() == 0)
    };
    let mut left = tree(dir);
    for _ in 0..500 {
        if left.is_empty() || made_ahead(&left) {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(10));
        left = tree(dir);
    }
    left
}

#[test]
fn hello_says_which_world_checks_see() {
    assert_eq!(Serve::start(&[]).hello["world"], "root");
    assert_eq!(Serve::start(&["--no-sandbox"]).hello["world"], "fresh");
}

/// The fleet's image has stock files in its config directory (Debian's
/// `/etc/haproxy/errors/*.http`) that the gate's emptyDir over that
/// directory hides: `--stock-dir` (a copy of the image's) lays them under
/// each render, in the config-directory world as in the root world, and
/// the render's own file at the same path wins.
#[test]
fn stock_files_of_the_fleets_image_lie_under_the_render_in_both_worlds() {
    let stock = tempfile::tempdir().unwrap();
    std::fs::create_dir(stock.path().join("errors")).unwrap();
    let page = "HTTP/1.0 400 Bad request\r\nContent-Type: text/html\r\n\r\n<html>stock</html>\n";
    std::fs::write(stock.path().join("errors/400.http"), page).unwrap();
    let stock_arg = stock.path().to_str().unwrap();
    for world in ["config-dir", "root"] {
        // outside /tmp: the root world's scratch /tmp is not where a pod keeps it
        let config_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let at = config_dir.path().display().to_string();
        let mut command = serve_command(&["--config-dir", &at, "--stock-dir", stock_arg]);
        if world == "config-dir" {
            command.env("RENDERGATE_SANDBOX_DISABLE", "mountns");
        }
        let mut gate = Serve::spawn(command);
        assert_eq!(gate.hello["world"], world, "{}", gate.hello);
        let errorfile = |path: &str| {
            config("", "", &format!("backend b\n  errorfile 400 {path}\n  server s 127.0.0.1:80\n"))
        };
        let stocked = errorfile(&format!("{at}/errors/400.http"));
        gate.send(&rendered("plan-1", "r-1", &stocked));
        let verdict = gate.until("verdict").pop().unwrap();
        assert_eq!(kind_of(&verdict), "pass", "{world}: the stock page: {verdict}");
        // not in the stock: refused, as on the pod
        gate.send(&rendered("plan-2", "r-2", &errorfile(&format!("{at}/errors/401.http"))));
        let verdict = gate.until("verdict").pop().unwrap();
        assert_eq!(kind_of(&verdict), "refused", "{world}: a page the image lacks: {verdict}");
        // the render's own page at the stock's path wins: a broken one is refused
        let mut own = rendered("plan-3", "r-3", &stocked);
        own["files"] = json!([{"kind": "general", "path": format!("{at}/errors/400.http"), "content": "not an HTTP response"}]);
        gate.send(&own);
        let verdict = gate.until("verdict").pop().unwrap();
        assert_eq!(kind_of(&verdict), "refused", "{world}: the render's own page wins: {verdict}");
        let (_, status) = gate.finish();
        assert!(status.success());
        assert_eq!(tree(config_dir.path()), Vec::<std::path::PathBuf>::new(), "{world}: emptied");
    }
}
