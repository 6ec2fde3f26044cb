//! The sandbox with the real haproxy: valid and invalid configs are judged
//! as without it, and what a config can reach is only the check directory.

use super::*;
use crate::check::{Checker, HaproxyChecker, HaproxyOptions};
use crate::core::CheckOutcome;
use crate::render::{FileKind, Render, RenderFile};
use std::path::PathBuf;
use tokio::time::Instant;

const VALID: &str = "\
global
defaults
  mode http
  timeout client 1s
  timeout server 1s
  timeout connect 1s
frontend f
  bind 127.0.0.1:18080
  default_backend b
backend b
  server s1 127.0.0.1:8080
";

fn haproxy() -> PathBuf {
    let name = std::env::var("RENDERGATE_TEST_HAPROXY").unwrap_or_else(|_| "haproxy".into());
    if name.contains('/') {
        return name.into();
    }
    ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(&name))
        .find(|p| p.exists())
        .expect("haproxy is installed for the tests")
}

struct Fixture {
    _work: tempfile::TempDir,
    checker: HaproxyChecker,
}

fn checker(mode: Mode, probe: Probe) -> Fixture {
    let work = tempfile::tempdir().unwrap();
    let checker = HaproxyChecker::with_probe(
        HaproxyOptions {
            binary: haproxy(),
            work_dir: Some(work.path().to_path_buf()),
            sandbox: SandboxOptions {
                mode,
                ..SandboxOptions::default()
            },
            ..HaproxyOptions::default()
        },
        probe,
    );
    Fixture {
        _work: work,
        checker,
    }
}

fn strict() -> Fixture {
    checker(Mode::Strict, Probe::detect(""))
}

async fn check(f: &Fixture, config: &str, files: Vec<RenderFile>) -> CheckOutcome {
    let render = Render::new("plan", "r", config, files);
    f.checker
        .check(&render, Instant::now() + Duration::from_secs(20))
        .await
        .outcome
}

#[tokio::test]
async fn a_valid_config_passes_and_an_invalid_one_is_refused() {
    let f = strict();
    assert_eq!(
        check(&f, VALID, vec![]).await,
        CheckOutcome::Passed {
            message: String::new()
        }
    );
    let out = check(&f, &VALID.replace("mode http", "mode bogus"), vec![]).await;
    let CheckOutcome::Refused { message } = out else {
        panic!("{out:?}")
    };
    assert!(
        message.contains("mode bogus") || message.contains("bogus"),
        "{message}"
    );
}

#[tokio::test]
async fn files_in_the_check_directory_are_readable() {
    let f = strict();
    let config = format!("{VALID}  http-request set-header X-Y %[src,map_ip(maps/a.map,none)]\n");
    let files = vec![RenderFile {
        kind: FileKind::Map,
        path: "maps/a.map".into(),
        content: "10.0.0.0/8 x\n".into(),
    }];
    assert_eq!(
        check(&f, &config, files).await,
        CheckOutcome::Passed {
            message: String::new()
        }
    );
}

#[tokio::test]
async fn a_resolvers_section_passes_under_seccomp() {
    let f = strict();
    let config = VALID.replace(
        "backend b\n  server s1 127.0.0.1:8080\n",
        "resolvers dns\n  nameserver ns1 127.0.0.1:53\n  accepted_payload_size 8192\n\
         backend b\n  server s1 web.example:80 resolvers dns init-addr none\n",
    );
    let out = check(&f, &config, vec![]).await;
    assert!(matches!(out, CheckOutcome::Passed { .. }), "{out:?}");
}

#[tokio::test]
async fn a_file_outside_is_refused_without_its_content() {
    let f = strict();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let first = passwd.lines().next().unwrap();
    let config = format!("{VALID}  acl bad src -f /etc/passwd\n  http-request deny if bad\n");
    let out = check(&f, &config, vec![]).await;
    let CheckOutcome::Refused { message } = &out else {
        panic!("{out:?}")
    };
    assert!(!message.contains(first), "{message}");
    assert!(!message.contains("root:"), "{message}");
    // unsandboxed, the same config quotes the file: the test can see a leak
    let off = checker(Mode::Off, Probe::detect(""));
    let CheckOutcome::Refused { message } = check(&off, &config, vec![]).await else {
        panic!()
    };
    assert!(
        message.contains("root:"),
        "the canary stopped leaking: {message}"
    );
}

#[tokio::test]
async fn the_environment_is_empty() {
    // SAFETY (edition 2024): HOME is only read by children spawned later;
    // the value is set to what it already is or a fixed marker.
    let home = std::env::var("HOME").unwrap_or_else(|_| {
        unsafe { std::env::set_var("HOME", "/root-marker-home") };
        "/root-marker-home".into()
    });
    let config = format!("{VALID}.warning \"home is [${{HOME}}]\"\n");
    let f = strict();
    let out = check(&f, &config, vec![]).await;
    let CheckOutcome::Passed { message } = &out else {
        panic!("{out:?}")
    };
    assert!(message.contains("home is []"), "{message}");
    assert!(!message.contains(&home), "{message}");
    let off = checker(Mode::Off, Probe::detect(""));
    let CheckOutcome::Passed { message } = check(&off, &config, vec![]).await else {
        panic!()
    };
    assert!(
        message.contains(&home),
        "the canary stopped leaking: {message}"
    );
}

#[tokio::test]
async fn strict_mode_refuses_to_run_without_a_required_layer_and_best_effort_runs() {
    let probe = Probe::detect("landlock");
    let f = checker(Mode::Strict, probe.clone());
    let out = check(&f, VALID, vec![]).await;
    let CheckOutcome::Unavailable { reason } = &out else {
        panic!("{out:?}")
    };
    assert!(
        reason.contains("strict needs landlock and seccomp") && reason.contains("landlock ("),
        "{reason}"
    );
    let f = checker(Mode::BestEffort, probe);
    // without Landlock haproxy reads /etc/resolv.conf and warns it cannot
    // connect to the nameservers: still a pass
    let out = check(&f, VALID, vec![]).await;
    assert!(matches!(out, CheckOutcome::Passed { .. }), "{out:?}");
    assert_eq!(f.checker.sandbox().unwrap().missing(), ["landlock"]);
    let f = checker(Mode::Strict, Probe::detect("seccomp"));
    let out = check(&f, VALID, vec![]).await;
    assert!(
        matches!(&out, CheckOutcome::Unavailable { reason } if reason.contains("seccomp (")),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_failing_layer_is_named_and_could_not_run() {
    // an address space of 4 KiB cannot even load the binary: the limit is
    // set (the rlimits layer works) and exec fails, which says "cannot start"
    let work = tempfile::tempdir().unwrap();
    let c = HaproxyChecker::new(HaproxyOptions {
        binary: haproxy(),
        work_dir: Some(work.path().to_path_buf()),
        sandbox: SandboxOptions {
            mode: Mode::Strict,
            memory: 4096,
        },
        ..HaproxyOptions::default()
    });
    let out = c
        .check(
            &Render::new("p", "r", VALID, vec![]),
            Instant::now() + Duration::from_secs(20),
        )
        .await
        .outcome;
    assert!(matches!(out, CheckOutcome::Unavailable { .. }), "{out:?}");
    // the tag carries the layer back through spawn's error
    let e = tagged(Layer::Landlock, libc::E2BIG);
    assert_eq!(
        spawn_failure(&e).unwrap(),
        format!(
            "sandbox setup failed in layer 'landlock': {} (E2BIG)",
            io::Error::from_raw_os_error(libc::E2BIG)
        )
    );
    assert_eq!(
        spawn_failure(&io::Error::from_raw_os_error(libc::ENOENT)),
        None
    );
    // entering the check directory is no sandbox layer (it runs with the sandbox off too)
    assert_eq!(
        spawn_failure(&tagged(Layer::CheckDirectory, libc::EBADF)).unwrap(),
        format!(
            "cannot enter the check directory: {} (EBADF)",
            io::Error::from_raw_os_error(libc::EBADF)
        )
    );
}

#[tokio::test]
async fn the_child_enters_the_check_directory_by_its_descriptor() {
    // a directory nobody can reach by path any more: only the descriptor
    // leads there, and the child still runs in it
    let work = tempfile::tempdir().unwrap();
    let gone = work.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let dir = std::fs::File::open(&gone).unwrap();
    std::fs::remove_dir(&gone).unwrap();
    let f = strict();
    let prepared = f
        .checker
        .sandbox()
        .unwrap()
        .prepare(
            std::os::fd::AsFd::as_fd(&dir),
            HostFiles::default(),
            Duration::from_secs(10),
        )
        .unwrap();
    // /bin/sh is not granted by Landlock: haproxy is the only thing that runs,
    // and `-c` on a missing haproxy.cfg says where it looked
    let mut cmd = tokio::process::Command::new(haproxy());
    cmd.args(["-c", "-f", "haproxy.cfg"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    prepared.apply(&mut cmd);
    let out = cmd.output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("haproxy.cfg"), "{text}");
    // a closed descriptor: the spawn fails, naming the step (with the
    // sandbox off, where nothing in the parent looks at it first)
    let off = checker(Mode::Off, Probe::detect(""));
    let prepared = off
        .checker
        .sandbox()
        .unwrap()
        .prepare(
            // SAFETY: a descriptor number far above any open one; never used but by fchdir
            unsafe { std::os::fd::BorrowedFd::borrow_raw(1_000_000) },
            HostFiles::default(),
            Duration::from_secs(10),
        )
        .unwrap();
    let mut cmd = tokio::process::Command::new(haproxy());
    cmd.arg("-v").stdin(std::process::Stdio::null());
    prepared.apply(&mut cmd);
    let e = cmd.spawn().unwrap_err();
    assert_eq!(
        spawn_failure(&e).unwrap(),
        format!(
            "cannot enter the check directory: {} (EBADF)",
            io::Error::from_raw_os_error(libc::EBADF)
        )
    );
}

#[tokio::test]
async fn the_system_ca_store_is_hidden_unless_asked_for() {
    let f = strict();
    let config = format!(
        "{VALID}  http-request return status 200 content-type text/plain file /etc/ssl/certs/ca-certificates.crt\n"
    );
    let out = check(&f, &config, vec![]).await;
    assert!(matches!(out, CheckOutcome::Refused { .. }), "{out:?}");
    let render = Render::new("p", "r", "global\n  ca-base @system-ca\n", vec![]);
    assert!(wants_system_ca(&render));
    assert!(!wants_system_ca(&Render::new("p", "r", VALID, vec![])));
}

#[tokio::test]
async fn running_out_of_memory_could_not_run_rather_than_refused() {
    let mut config = String::from(VALID);
    for i in 0..10_000 {
        config.push_str(&format!("backend b{i}\n  server s 127.0.0.1:80\n"));
    }
    let work = tempfile::tempdir().unwrap();
    let c = HaproxyChecker::new(HaproxyOptions {
        binary: haproxy(),
        work_dir: Some(work.path().to_path_buf()),
        sandbox: SandboxOptions {
            mode: Mode::Strict,
            memory: 96 << 20,
        },
        ..HaproxyOptions::default()
    });
    let render = Render::new("p", "r", config.as_str(), vec![]);
    let out = c
        .check(&render, Instant::now() + Duration::from_secs(20))
        .await
        .outcome;
    let CheckOutcome::Unavailable { reason } = &out else {
        panic!("{out:?}")
    };
    // where the allocation fails decides HAProxy's words: an `[ALERT] … out
    // of memory` (turned into could-not-run), garbled output (never judged),
    // or, in about one run in ten here, no words at all: haproxy 2.6 dies of
    // SIGSEGV on an unchecked failed allocation
    assert!(
        reason.starts_with("haproxy -c ran out of memory under the check's limit of 96 MiB")
            || reason.contains("without judging the config")
            || reason == "haproxy was killed by signal 11",
        "{reason}"
    );
    // and the same render passes with the default limit
    let f = strict();
    assert!(matches!(
        check(&f, &config, vec![]).await,
        CheckOutcome::Passed { .. }
    ));
}
