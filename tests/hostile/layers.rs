//! The layers one by one. `RENDERGATE_SANDBOX_DISABLE` makes the gate treat
//! a layer as missing: strict mode must then refuse to run any check (could
//! not run, naming the layer), best-effort must run with what is left. And
//! each of Landlock and seccomp must hold on its own against the cases it
//! is there for (defence in depth: one layer's gap is not a hole).

use crate::support::*;
use crate::{cases, lua, native};
use std::process::Command;

fn strict_missing(layer: &'static str) {
    let run = Run { mode: Mode::Default, disable: Some(layer) };
    let r = attempt(
        &format!("valid_minimal, strict, {layer} absent"),
        cases::valid_minimal,
        run,
        |spec| {
            spec.expect = COULD_NOT_RUN;
            spec.must_contain.push(layer.to_owned());
        },
    );
    r.unwrap_or_else(|e| panic!("{e}"));
}

fn best_effort_missing(layer: &'static str) {
    let run = Run { mode: Mode::BestEffort, disable: Some(layer) };
    let r = attempt(
        &format!("valid_minimal, best-effort, {layer} absent"),
        cases::valid_minimal,
        run,
        |_| {},
    );
    r.unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn strict_without_landlock_could_not_run_naming_it() {
    strict_missing("landlock");
}

#[test]
fn best_effort_without_landlock_runs() {
    best_effort_missing("landlock");
}

#[test]
fn strict_without_seccomp_could_not_run_naming_it() {
    strict_missing("seccomp");
}

#[test]
fn best_effort_without_seccomp_runs() {
    best_effort_missing("seccomp");
}

/// Without a mount namespace (namespaces allowed, mounts not) there is no
/// root of its own (docs/checking.md, "Without namespaces"): each render is
/// laid out in `--config-dir` itself, here an empty directory of the scene's.
fn in_an_empty_config_dir(build: Build, scene: &mut Scene) -> Spec {
    let mut spec = build(scene);
    let dir = scene.root.join("config-dir");
    std::fs::create_dir(&dir).unwrap();
    spec.args.extend(["--config-dir".to_owned(), dir.display().to_string()]);
    spec
}

const NO_MOUNTNS: Run = Run { mode: Mode::Default, disable: Some("mountns") };

#[test]
fn strict_without_a_mount_namespace_runs_in_the_config_dir() {
    let r = attempt(
        "valid_minimal, strict, mountns absent",
        |s| in_an_empty_config_dir(cases::valid_minimal, s),
        NO_MOUNTNS,
        |_| {},
    );
    r.unwrap_or_else(|e| panic!("{e}"));
}

/// The host's resolv.conf is among what Landlock grants there: a
/// `parse-resolv-conf` bare passes, passes.
#[test]
fn without_a_mount_namespace_parse_resolv_conf_passes() {
    let r = attempt(
        "parse_resolv_conf, strict, mountns absent",
        |s| in_an_empty_config_dir(cases::parse_resolv_conf, s),
        NO_MOUNTNS,
        |_| {},
    );
    r.unwrap_or_else(|e| panic!("{e}"));
}

/// An absolute path under the config directory resolves, as on a pod.
#[test]
fn without_a_mount_namespace_absolute_paths_under_the_config_dir_resolve() {
    fn build(scene: &mut Scene) -> Spec {
        let dir = scene.root.join("config-dir");
        let frontend = format!(
            "  http-request set-header x %[req.hdr(host),map({}/maps/hosts.map)]\n",
            dir.display()
        );
        Spec::check(cases::config("", &frontend, ""), PASS)
            .files(vec![file("maps/hosts.map", "a b\n")])
    }
    let r = attempt(
        "absolute map path, strict, mountns absent",
        |s| in_an_empty_config_dir(build, s),
        NO_MOUNTNS,
        |_| {},
    );
    r.unwrap_or_else(|e| panic!("{e}"));
}

/// A config directory that holds anything (here the host's own
/// /etc/haproxy-like content) is not the gate's: every check could not run,
/// naming why, and the directory is left as it was.
#[test]
fn without_a_mount_namespace_a_config_dir_with_content_could_not_run() {
    fn build(scene: &mut Scene) -> Spec {
        let spec = in_an_empty_config_dir(cases::valid_minimal, scene);
        std::fs::write(scene.root.join("config-dir/haproxy.cfg"), "global\n").unwrap();
        spec
    }
    let r = attempt("valid_minimal, config dir not empty", build, NO_MOUNTNS, |spec| {
        spec.expect = COULD_NOT_RUN;
        spec.must_contain.push("is not empty (it holds \"haproxy.cfg\")".into());
    });
    r.unwrap_or_else(|e| panic!("{e}"));
}

/// In serve, strict without a layer: could not run, so the latch closes as
/// "unavailable" and nothing is judged.
#[test]
fn serve_strict_without_landlock_could_not_run() {
    let run = Run { mode: Mode::Default, disable: Some("landlock") };
    let r = attempt("valid render via serve, strict, landlock absent", serve_valid, run, |spec| {
        spec.expect = COULD_NOT_RUN;
        spec.must_contain.push("landlock".into());
    });
    r.unwrap_or_else(|e| panic!("{e}"));
}

fn serve_valid(_: &mut Scene) -> Spec {
    Spec::serve(cases::config("", "", ""), PASS)
}

/// `rendergate check --explain` says what each layer is on this host.
#[test]
fn explain_reports_the_layers() {
    for (disable, expect_off) in [(None, None), (Some("landlock"), Some("landlock=off"))] {
        let mut cmd = Command::new(BIN);
        cmd.env_clear().args(["check", "--explain", "--haproxy"]).arg(haproxy());
        if let Some(d) = disable {
            cmd.env("RENDERGATE_SANDBOX_DISABLE", d);
        }
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("landlock=") && text.contains("seccomp="), "{disable:?}: {text}");
        match expect_off {
            None => assert!(text.contains("landlock=enforced"), "{text}"),
            Some(off) => assert!(text.contains(off), "{text}"),
        }
        assert!(
            out.status.success() || out.status.code() == Some(2),
            "{disable:?}: {:?}: {text}",
            out.status
        );
    }
}

/// Runs `cases` under `run`, all of them, and fails with every failure.
fn all_hold(run: Run, cases: &[(&'static str, Build)]) {
    let jobs: Vec<Job<Result<(), String>>> = cases
        .iter()
        .map(|&(name, build)| Box::new(move || attempt(name, build, run, |_| {})) as _)
        .collect();
    let fails: Vec<String> = parallel(3, jobs).into_iter().filter_map(Result::err).collect();
    assert!(
        fails.is_empty(),
        "{} case(s) failed under {run:?}:\n\n{}",
        fails.len(),
        fails.join("\n\n")
    );
}

/// Landlock off (best-effort): seccomp and the namespaces alone must stop
/// process creation, the network and ptrace — native code included.
#[test]
fn seccomp_alone_stops_processes_network_and_ptrace() {
    let run = Run { mode: Mode::BestEffort, disable: Some("landlock") };
    all_hold(
        run,
        &[
            ("lua_os_execute", lua::lua_os_execute),
            ("lua_io_popen", lua::lua_io_popen),
            ("lua_background", lua::lua_background),
            ("native_seccomp_only", native::native_seccomp_only),
        ],
    );
}

/// seccomp off (best-effort): Landlock alone must stop every read and write
/// outside, every `execve` but HAProxy's, and loading host native code.
#[test]
fn landlock_alone_stops_files_and_exec() {
    let run = Run { mode: Mode::BestEffort, disable: Some("seccomp") };
    all_hold(
        run,
        &[
            ("acl_file_outside", cases::acl_file_outside),
            ("http_return_file_host_path", cases::http_return_file_host_path),
            ("proc_self_environ", cases::proc_self_environ),
            ("proc_self_root_secret", cases::proc_self_root_secret),
            ("fifo_errorfile", cases::fifo_errorfile),
            ("lua_read_outside", lua::lua_read_outside),
            ("lua_write_outside", lua::lua_write_outside),
            ("lua_os_execute", lua::lua_os_execute),
            ("lua_io_popen", lua::lua_io_popen),
            ("lua_background", lua::lua_background),
            ("lua_require_outside", lua::lua_require_outside),
            ("native_loadlib", native::native_loadlib),
        ],
    );
}
