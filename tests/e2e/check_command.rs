//! `rendergate check DIR` against real haproxy: verdicts, exit codes, flags.

use crate::support::*;
use std::path::Path;

fn check(args: &[&str], dir: &Path) -> std::process::Output {
    let haproxy = haproxy();
    let mut all = vec!["check", "--haproxy", haproxy.as_str()];
    all.extend_from_slice(args);
    all.push(dir.to_str().unwrap());
    run(&all, "", &[])
}

#[test]
fn a_valid_render_passes_with_exit_0() {
    let out = check(&["--json"], &sample_dir());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = &lines(&out)[0];
    assert_eq!(
        (v["type"].as_str(), v["ok"].as_bool(), v["refused"].as_bool()),
        (Some("verdict"), Some(true), Some(false))
    );
    assert!(v["checksum"].as_str().unwrap().starts_with("sha256:"));
}

#[test]
fn an_invalid_render_is_refused_with_exit_1_and_context() {
    let dir = render_dir(&broken_config());
    let out = check(&[], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("refused:"), "{text}");
    assert!(text.contains("→ [ALERT]") && text.contains("bogus-action"), "{text}");
    assert!(text.contains("Config context:"), "{text}");
    let message = text.split_once('\n').unwrap().1;
    assert!(
        !message.contains("/tmp") && !message.contains("rendergate-check-"),
        "no host paths: {message}"
    );
}

#[test]
fn a_missing_binary_could_not_run_with_exit_2() {
    let out = run(
        &["check", "--haproxy", "/nonexistent/haproxy", "--json", sample_dir().to_str().unwrap()],
        "",
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let v = &lines(&out)[0];
    assert_eq!((v["ok"].as_bool(), v["refused"].as_bool()), (Some(false), Some(false)));
    assert!(v["message"].as_str().unwrap().contains("/nonexistent/haproxy"), "{v}");
}

#[test]
fn symlinks_in_the_directory_are_refused() {
    let dir = render_dir(&sample_config());
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("maps/evil.map")).unwrap();
    let out = check(&[], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("evil.map") && err.contains("symlink"), "{err}");
}

#[test]
fn files_land_where_the_directory_has_them() {
    // The config names the map relative to the check directory, and a Lua-free
    // general file at the top level: both must be found where DIR has them.
    let config = sample_config().replace(
        "frontend www\n",
        "frontend www\n    http-request return status 200 content-type text/plain file top.txt if { path /top }\n",
    );
    let dir = render_dir(&config);
    std::fs::write(dir.path().join("top.txt"), "hello\n").unwrap();
    let out = check(&[], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    std::fs::remove_file(dir.path().join("top.txt")).unwrap();
    let out = check(&[], dir.path());
    assert_eq!(
        out.status.code(),
        Some(1),
        "without the file HAProxy refuses: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// DIR's name is printed escaped: a newline or an escape sequence in it
/// can neither forge a second verdict line nor reach the terminal raw.
#[test]
fn the_verdict_line_escapes_the_directorys_name() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("nl\nrefused: other\u{1b}[31m");
    std::fs::create_dir(&dir).unwrap();
    let sample = render_dir(&sample_config());
    std::fs::rename(sample.path().join("maps"), dir.join("maps")).unwrap();
    std::fs::rename(sample.path().join("haproxy.cfg"), dir.join("haproxy.cfg")).unwrap();
    let out = check(&[], &dir);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("pass: ") && !text.contains('\u{1b}'), "{text}");
}

#[test]
fn bad_flags_get_one_line_naming_the_flag_and_exit_2() {
    for args in [
        vec!["check", "--timeout", "5", "x"],
        vec!["check", "--timeout", "9223372036854775807s", "x"],
        vec!["serve", "--check-interval", "soon"],
        vec!["serve", "--bogus"],
        // a negative value is the flag's bad value, not an unknown flag
        vec!["check", "--timeout", "-1s", "x"],
        vec!["serve", "--max-line", "-1KiB"],
        vec!["serve", "--policy-fuel", "-1"],
        // a zero bound times out everything; a zero period polls without pause
        vec!["check", "--timeout", "0s", "x"],
        vec!["serve", "--check-timeout", "0ms"],
        vec!["serve", "--policy-deadline", "0s"],
        vec!["serve", "--policy-poll", "0s"],
    ] {
        let out = run(&args, "", &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        let flag = args.iter().find(|a| a.starts_with("--")).unwrap();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    // a missing argument is named on its line
    for (args, missing) in
        [(&["check"][..], "<DIR>"), (&["policy", "test", "x.wasm"], "<FIXTURE.json>")]
    {
        let out = run(args, "", &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(missing), "{args:?}: {err}");
    }
    // no command at all: what there is to run, on stderr, and exit 2
    for args in [&[][..], &["policy"]] {
        let out = run(args, "", &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Usage:") && err.contains("Commands:"), "{args:?}: {err}");
    }
}

#[test]
fn an_unknown_layer_in_the_sandbox_disable_knob_is_an_error_not_ignored() {
    for command in
        [&["check", "--haproxy", &haproxy(), sample_dir().to_str().unwrap()][..], &["serve"][..]]
    {
        let out = std::process::Command::new(BIN)
            .args(command)
            .env("RENDERGATE_SANDBOX_DISABLE", "landlock,seccom")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("RENDERGATE_SANDBOX_DISABLE: unknown layer \"seccom\""),
            "{stderr}"
        );
    }
}

/// `rendergate ARGS` writing into a pipe whose reader is already gone
/// (`rendergate check --explain | head -0`): it must end quietly, killed by
/// SIGPIPE as a Unix tool is (141 in a shell), never with a panic, and
/// leave nothing of its check behind.
fn into_closed_pipe(args: &[&str]) -> std::process::Output {
    use std::process::{Command, Stdio};
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(args)
        .env("TMPDIR", work.path())
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let left: Vec<_> = tree(work.path())
        .into_iter()
        .filter(|p| p.is_file() || std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_some()))
        .collect();
    assert!(left.is_empty(), "{args:?} left {left:?}");
    out
}

#[test]
fn a_closed_stdout_ends_check_and_replay_quietly_as_sigpipe_does() {
    use std::os::unix::process::ExitStatusExt;
    let haproxy = haproxy();
    let sample = sample_dir();
    let events = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/events.ndjson");
    let commands: [Vec<&str>; 4] = [
        vec!["check", "--explain", "--haproxy", &haproxy],
        vec!["check", "--haproxy", &haproxy, sample.to_str().unwrap()],
        vec!["check", "--json", "--haproxy", &haproxy, sample.to_str().unwrap()],
        vec!["replay", "--haproxy", &haproxy, events.to_str().unwrap()],
    ];
    for args in commands {
        let out = into_closed_pipe(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{args:?}: {:?} {stderr}", out.status);
    }
}

/// A render's tree as it is (docs/checking.md, "rendergate check DIR"): an
/// empty directory HAProxy needs (`issuers-chain-path`) and file names that
/// are not UTF-8, one of them named by the config in the same bytes, get
/// bare `haproxy -c`'s verdict; removing either the directory or the file
/// makes both refuse.
#[test]
fn empty_directories_and_names_of_any_bytes_are_judged_as_bare_judges_them() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let config = b"global\n  issuers-chain-path ssl/issuers\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:18080\n  acl a path -f lists/\xe9t\xe9.lst\n  http-request deny if a\n".to_vec();
    std::fs::write(dir.path().join("haproxy.cfg"), &config).unwrap();
    std::fs::create_dir_all(dir.path().join("ssl/issuers")).unwrap();
    std::fs::create_dir(dir.path().join("lists")).unwrap();
    let named = dir.path().join("lists").join(std::ffi::OsStr::from_bytes(b"\xe9t\xe9.lst"));
    std::fs::write(&named, "/admin\n").unwrap();
    std::fs::write(dir.path().join(std::ffi::OsStr::from_bytes(b"unreferenced-\xff")), "x")
        .unwrap();
    let bare = |dir: &Path| {
        std::process::Command::new(real_haproxy())
            .args(["-dr", "-c", "-f", "haproxy.cfg"])
            .current_dir(dir)
            .env_clear()
            .output()
            .unwrap()
            .status
            .success()
    };
    let gate = |dir: &Path| check(&[], dir).status.code();
    assert!(bare(dir.path()), "bare passes the tree as it is");
    assert_eq!(gate(dir.path()), Some(0), "{:?}", check(&[], dir.path()));
    // each part is needed: without the directory, and without the file, both refuse
    std::fs::remove_dir(dir.path().join("ssl/issuers")).unwrap();
    assert!(!bare(dir.path()));
    assert_eq!(gate(dir.path()), Some(1));
    std::fs::create_dir(dir.path().join("ssl/issuers")).unwrap();
    std::fs::remove_file(&named).unwrap();
    assert!(!bare(dir.path()));
    assert_eq!(gate(dir.path()), Some(1));
}

/// A render on a file system that stalls a read (a hung network mount:
/// `stallfs.py`, a FUSE server that never answers one) ends at the
/// check's timeout, which counts the reading of DIR, and at SIGTERM, as a
/// check does (docs/checking.md, "`rendergate check DIR`").
#[test]
fn a_stalled_read_of_dir_ends_at_the_timeout_and_at_a_signal() {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    let mountpoint = tempfile::tempdir().unwrap();
    let at = mountpoint.path().to_str().unwrap().to_owned();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/e2e/stallfs.py");
    let mut server = std::process::Command::new("python3")
        .args([script, &at])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap()).read_line(&mut said).unwrap();
    assert_eq!(said.trim(), "mounted", "stallfs.py did not mount (it needs root and /dev/fuse)");
    let unmount = || {
        let _ = std::process::Command::new("umount").args(["-l", &at]).status();
    };

    // `check` on the mount, given SIGTERM after `signal_after` if any;
    // killed if it has not ended in 10 s. Its exit code, stderr, and time.
    let bounded = |timeout: &str, signal_after: Option<Duration>| {
        let started = Instant::now();
        let mut check = std::process::Command::new(BIN)
            .args(["check", "--haproxy", &haproxy(), "--timeout", timeout, &at])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(after) = signal_after {
            std::thread::sleep(after);
            // SAFETY: kill has no memory preconditions; the pid is our child's.
            unsafe { libc::kill(check.id() as libc::pid_t, libc::SIGTERM) };
        }
        let mut status = None;
        while status.is_none() && started.elapsed() < Duration::from_secs(10) {
            status = check.try_wait().unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        if status.is_none() {
            let _ = check.kill();
        }
        let _ = check.wait(); // reaped already when it ended by itself
        let mut err = String::new();
        std::io::Read::read_to_string(&mut check.stderr.take().unwrap(), &mut err).unwrap();
        (status.and_then(|s| s.code()), err, started.elapsed())
    };
    let timed_out = bounded("1s", None);
    let stopped = bounded("60s", Some(Duration::from_millis(500)));
    unmount();
    let _ = server.kill();
    let _ = server.wait();
    let (code, err, took) = &timed_out;
    assert!(
        *code == Some(2) && err.contains("timed out after 1s while the render was read"),
        "--timeout 1s: {timed_out:?}"
    );
    assert!(*took < Duration::from_secs(5), "--timeout 1s took {took:?}");
    assert_eq!(stopped.0, Some(143), "SIGTERM while DIR was read: {stopped:?}");
}

/// Under a hard open-files limit below the check's own (256), the check
/// takes the lower one: it cannot raise a hard limit, and asking to failed
/// every check ("layer 'rlimits': EPERM").
#[test]
fn a_hard_open_files_limit_below_the_checks_is_kept_not_raised() {
    let dir = sample_dir();
    let command =
        format!("ulimit -n 200 && exec {BIN} check --haproxy {} {}", haproxy(), dir.display());
    let out = std::process::Command::new("sh").args(["-c", &command]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("pass: "), "{text}");
}
