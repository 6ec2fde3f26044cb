//! The sandbox with the real haproxy: valid and invalid configs are judged
//! as without it, and what a config can reach is only the check directory.

use super::*;
use crate::{Checker, HaproxyChecker, HaproxyOptions};
use rendergate_core::render::{FileKind, Render, RenderFile};
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

use crate::needs;

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

fn checker(binary: PathBuf, mode: Mode, probe: Probe) -> Fixture {
    let sandbox = SandboxOptions { mode, ..SandboxOptions::default() };
    let options = HaproxyOptions { binary, sandbox, ..HaproxyOptions::default() };
    fixture(options, |options| HaproxyChecker::with_probe(options, probe))
}

/// The checker `make` makes of `options`, run in a work directory of its own.
fn fixture(
    options: HaproxyOptions,
    make: impl FnOnce(HaproxyOptions) -> HaproxyChecker,
) -> Fixture {
    let work = tempfile::tempdir().unwrap();
    let checker = make(HaproxyOptions { work_dir: Some(work.path().to_path_buf()), ..options });
    Fixture { _work: work, checker }
}

/// The haproxy under test in `sandbox`, the rest as by default.
fn sandboxed(sandbox: SandboxOptions) -> HaproxyOptions {
    HaproxyOptions { binary: haproxy(), sandbox, ..HaproxyOptions::default() }
}

/// A check's own limits, as a default sandbox gives them.
fn limits() -> rlimits::Limits {
    rlimits::Limits::new(DEFAULT_MEMORY, rlimits::FILE_SIZE, Duration::from_secs(10))
}

fn strict() -> Fixture {
    checker(haproxy(), Mode::Strict, Probe::detect(""))
}

async fn check(f: &Fixture, config: &str, files: Vec<RenderFile>) -> CheckOutcome {
    let render = Render::new("plan", "r", config, files);
    f.checker.check(&render, Instant::now() + Duration::from_secs(20)).await.outcome
}

#[tokio::test]
async fn a_valid_config_passes_and_an_invalid_one_is_refused() {
    let f = strict();
    assert_eq!(check(&f, VALID, vec![]).await, CheckOutcome::Passed { message: String::new() });
    let out = check(&f, &VALID.replace("mode http", "mode bogus"), vec![]).await;
    let CheckOutcome::Refused { message } = out else { panic!("{out:?}") };
    assert!(message.contains("mode bogus") || message.contains("bogus"), "{message}");
}

/// A gate holding hundreds of descriptors (a controller's connections, the
/// metrics endpoint's clients) still checks: its child holds them all
/// until `execve`, so the check's open-files limit (256) comes once the
/// world is made, or the world finds no number below it to open
/// ("uid_map: Too many open files" under 230 metrics connections).
#[tokio::test]
async fn a_gate_holding_hundreds_of_descriptors_still_checks() {
    let f = strict();
    let held: Vec<std::fs::File> =
        (0..300).map(|_| std::fs::File::open("/dev/null").unwrap()).collect();
    assert_eq!(check(&f, VALID, vec![]).await, CheckOutcome::Passed { message: String::new() });
    drop(held);
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
    assert_eq!(check(&f, &config, files).await, CheckOutcome::Passed { message: String::new() });
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
async fn a_host_file_outside_the_world_does_not_exist_and_accounts_are_names_and_ids() {
    let f = strict();
    // /etc/passwd is the stand-in: names and ids, never the host's homes and shells
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let first = passwd.lines().next().unwrap();
    assert!(first.matches(':').count() == 6 && !first.ends_with(":::"), "{first}");
    let config = format!("{VALID}  acl bad src -f /etc/passwd\n  http-request deny if bad\n");
    let out = check(&f, &config, vec![]).await;
    let CheckOutcome::Refused { message } = &out else { panic!("{out:?}") };
    assert!(!message.contains(first), "{message}");
    assert!(message.contains("root:x:0:0:::"), "{message}");
    // unsandboxed, the same config quotes the host's own file: the test can see a leak
    let off = checker(haproxy(), Mode::Off, Probe::detect(""));
    let CheckOutcome::Refused { message } = check(&off, &config, vec![]).await else { panic!() };
    assert!(message.contains(first), "the canary stopped leaking: {message}");
    // a host file that exists (/etc/hostname) and one that does not read alike
    let mut said = Vec::new();
    for path in ["/etc/hostname", "/etc/no-such-file-here"] {
        let config = format!("{VALID}  acl x src -f {path}\n  http-request deny if x\n");
        let out = check(&f, &config, vec![]).await;
        let CheckOutcome::Refused { message } = out else { panic!("{out:?}") };
        let line = message.replace(path, "PATH");
        let line = line.lines().find(|l| l.contains("PATH")).expect("the alert names the path");
        // after HAProxy's pid: `(1234) : config : …`
        said.push(line.split_once(") :").map_or(line, |(_, rest)| rest).to_owned());
    }
    assert_eq!(said[0], said[1]);
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
    let CheckOutcome::Passed { message } = &out else { panic!("{out:?}") };
    assert!(message.contains("home is []"), "{message}");
    assert!(!message.contains(&home), "{message}");
    // with the sandbox off too: the gate's environment is never HAProxy's
    let off = checker(haproxy(), Mode::Off, Probe::detect(""));
    let CheckOutcome::Passed { message } = check(&off, &config, vec![]).await else { panic!() };
    assert!(message.contains("home is []"), "{message}");
    // only what --check-env gives
    let env = vec![("HOME".into(), "/given".into())];
    let options = sandboxed(SandboxOptions { env, ..SandboxOptions::default() });
    let out = check(&fixture(options, HaproxyChecker::new), &config, vec![]).await;
    let CheckOutcome::Passed { message } = &out else { panic!("{out:?}") };
    assert!(message.contains("home is [/given]"), "{message}");
}

#[tokio::test]
async fn strict_mode_refuses_to_run_without_a_required_layer_and_best_effort_runs() {
    let probe = Probe::detect("landlock");
    let f = checker(haproxy(), Mode::Strict, probe.clone());
    let out = check(&f, VALID, vec![]).await;
    let CheckOutcome::Unavailable { reason } = &out else { panic!("{out:?}") };
    assert!(
        reason.contains("strict needs landlock and seccomp") && reason.contains("landlock ("),
        "{reason}"
    );
    let f = checker(haproxy(), Mode::BestEffort, probe);
    // without Landlock haproxy reads /etc/resolv.conf and warns it cannot
    // connect to the nameservers: still a pass
    let out = check(&f, VALID, vec![]).await;
    assert!(matches!(out, CheckOutcome::Passed { .. }), "{out:?}");
    assert_eq!(f.checker.sandbox().unwrap().missing(), ["landlock"]);
    let f = checker(haproxy(), Mode::Strict, Probe::detect("seccomp"));
    let out = check(&f, VALID, vec![]).await;
    assert!(
        matches!(&out, CheckOutcome::Unavailable { reason } if reason.contains("seccomp (")),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_failing_layer_is_named_and_could_not_run() {
    // an address space of 16 KiB (at the top, four times `memory_max`)
    // cannot even load the binary: the limit is set (the rlimits layer
    // works) and exec fails, which says "cannot start"
    let sandbox = SandboxOptions { mode: Mode::Strict, memory: 4096, ..SandboxOptions::default() };
    // no second run under a larger bound: the layer's failure stands
    let options = HaproxyOptions { memory_max: 4096, ..sandboxed(sandbox) };
    let out = check(&fixture(options, HaproxyChecker::new), VALID, vec![]).await;
    assert!(matches!(out, CheckOutcome::Unavailable { .. }), "{out:?}");
    // the tag carries the layer back through spawn's error
    let e = tagged(Layer::Landlock, libc::E2BIG);
    assert_eq!(
        spawn_failure(&e, None).unwrap(),
        said("sandbox setup failed in layer 'landlock'", libc::E2BIG, "E2BIG")
    );
    assert_eq!(spawn_failure(&io::Error::from_raw_os_error(libc::ENOENT), None), None);
    // entering the check directory is no sandbox layer (it runs with the sandbox off too)
    assert_eq!(
        spawn_failure(&tagged(Layer::CheckDirectory, libc::EBADF), None).unwrap(),
        said("cannot enter the check directory", libc::EBADF, "EBADF")
    );
}

/// What a spawn failure says: `what`, then `errno` and its name.
fn said(what: &str, errno: i32, name: &str) -> String {
    format!("{what}: {} ({name})", io::Error::from_raw_os_error(errno))
}

#[tokio::test]
async fn the_child_enters_the_check_directory_by_its_descriptor() {
    // a directory its path no longer leads to: only the descriptor does,
    // and the child still runs in it
    let work = tempfile::tempdir().unwrap();
    let gone = work.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let dir = std::fs::File::open(&gone).unwrap();
    std::fs::rename(&gone, work.path().join("moved")).unwrap();
    let f = strict();
    let prepared =
        f.checker.sandbox().unwrap().prepare(std::os::fd::AsFd::as_fd(&dir), limits()).unwrap();
    // /bin/sh is not granted by Landlock: haproxy is the only thing that runs,
    // and `-c` on a missing haproxy.cfg says where it looked
    let mut cmd = tokio::process::Command::new(haproxy());
    cmd.args(["-c", "-f", "haproxy.cfg"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    prepared.apply(&mut cmd);
    let out = cmd.output().await.unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("haproxy.cfg"), "{text}");
    // a closed descriptor: the spawn fails, naming the step (with the
    // sandbox off, where nothing in the parent looks at it first)
    let off = checker(haproxy(), Mode::Off, Probe::detect(""));
    // SAFETY: a descriptor number far above any open one; never used but by fchdir
    let closed = unsafe { std::os::fd::BorrowedFd::borrow_raw(1_000_000) };
    let prepared = off.checker.sandbox().unwrap().prepare(closed, limits()).unwrap();
    let mut cmd = tokio::process::Command::new(haproxy());
    cmd.arg("-v").stdin(std::process::Stdio::null());
    prepared.apply(&mut cmd);
    let e = cmd.spawn().unwrap_err();
    assert_eq!(
        spawn_failure(&e, None).unwrap(),
        said("cannot enter the check directory", libc::EBADF, "EBADF")
    );
}

#[tokio::test]
async fn the_system_ca_store_is_visible_by_path_as_on_a_pod() {
    let f = strict();
    let config = format!(
        "{VALID}  server tls 127.0.0.1:8443 ssl verify required ca-file /etc/ssl/certs/ca-certificates.crt\n"
    );
    let out = check(&f, &config, vec![]).await;
    assert!(passed(&out), "{out:?}");
    // but nothing else of /etc/ssl: the host's keys are not in the world
    let config = format!(
        "{VALID}  server tls 127.0.0.1:8443 ssl verify required ca-file /etc/ssl/private/x.pem\n"
    );
    assert!(matches!(check(&f, &config, vec![]).await, CheckOutcome::Refused { .. }));
}

#[tokio::test]
async fn running_into_the_memory_limit_is_measured_by_a_second_run() {
    let mut config = String::from(VALID);
    for i in 0..10_000 {
        config.push_str(&format!("backend b{i}\n  server s 127.0.0.1:80\n"));
    }
    let checker = |memory_max: u64| {
        let sandbox =
            SandboxOptions { mode: Mode::Strict, memory: 96 << 20, ..SandboxOptions::default() };
        fixture(HaproxyOptions { memory_max, ..sandboxed(sandbox) }, HaproxyChecker::new)
    };
    // 96 MiB is too little: where the allocation fails decides HAProxy's
    // words (an `[ALERT] … out of memory`, garbled output, or a SIGSEGV on
    // an unchecked allocation), and none of them is the verdict
    let c = checker(96 << 20);
    let out = check(&c, &config, vec![]).await;
    assert!(!matches!(out, CheckOutcome::Passed { .. }), "{out:?}");
    drop(c);
    // the second run, under --check-memory-max, is
    let c = checker(rlimits::DEFAULT_MEMORY_MAX);
    let out = check(&c, &config, vec![]).await;
    let CheckOutcome::Passed { message } = &out else { panic!("{out:?}") };
    assert!(
        message.starts_with(
            "the first run hit the check's address-space limit of 96MiB (--check-memory); under --check-memory-max 16GiB it passed"
        ),
        "{message}"
    );
    // and the same render passes with the default limit
    let f = strict();
    assert!(matches!(check(&f, &config, vec![]).await, CheckOutcome::Passed { .. }));
}

/// Where `tests/build-haproxy.sh` builds the HAProxy versions tested.
const BUILD_CACHE: &str = "/var/tmp/rendergate-haproxy";

/// A HAProxy of `series` ("3.0", "3.2"): `RENDERGATE_TEST_HAPROXY` when it
/// is one, else the newest in the build cache. Absent, the test is missing
/// a need (`needs::missing`).
fn haproxy_series(series: &str) -> Option<PathBuf> {
    let is_series = |p: &Path| {
        std::process::Command::new(p).arg("-v").output().is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout).starts_with(&format!("HAProxy version {series}."))
        })
    };
    let from_env = std::env::var_os("RENDERGATE_TEST_HAPROXY")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && is_series(p));
    let cached = || {
        std::fs::read_dir(BUILD_CACHE)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("haproxy-{series}.")))
            .map(|e| e.path().join("sbin/haproxy"))
            .filter(|p| is_series(p))
            .max()
    };
    let what = format!(
        "no HAProxy {series} (set RENDERGATE_TEST_HAPROXY, or run tests/build-haproxy.sh into {BUILD_CACHE})"
    );
    needed(from_env.or_else(cached), &what)
}

/// `found`; absent, the test is missing a need, `what` (`needs::missing`).
fn needed<T>(found: Option<T>, what: &str) -> Option<T> {
    if found.is_none() {
        needs::missing(what, "this test");
    }
    found
}

/// A tool the test needs; absent, the test is missing a need.
fn tool(name: &str) -> Option<PathBuf> {
    let dirs = ["/usr/bin", "/bin", "/usr/local/bin"];
    let found = dirs.iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file());
    needed(found, &format!("no {name}"))
}

/// Whether the haproxy under test runs Lua; without, the test is missing
/// a need.
fn has_lua() -> bool {
    let what = format!("{} has no Lua", haproxy().display());
    needed(needs::lua(&haproxy()).then_some(()), &what).is_some()
}

/// [`VALID`] loading `script` as `lua/w.lua`, and the render's file.
fn with_lua(script: &str) -> (String, Vec<RenderFile>) {
    let file =
        RenderFile { kind: FileKind::General, path: "lua/w.lua".into(), content: script.into() };
    (VALID.replace("global\n", "global\n  lua-load lua/w.lua\n"), vec![file])
}

fn passed(out: &CheckOutcome) -> bool {
    matches!(out, CheckOutcome::Passed { .. })
}

/// HAProxy 3.2 and later write an `acme` section's missing account key next
/// to the config while parsing, and bare `haproxy -c` passes: so must every
/// sandbox mode. CI has no 3.2 (docs/checking.md), so a render's Lua
/// writes a file there while parsing the same way, on the haproxy under test.
#[tokio::test]
async fn a_file_written_next_to_the_config_while_parsing_passes_in_every_mode() {
    if !has_lua() {
        return;
    }
    let script = "local f = assert(io.open(\"account.key\", \"w\"))\n\
                  assert(f:write(\"key\"))\n\
                  assert(f:close())\n";
    for (mode, probe) in [
        (Mode::Off, Probe::detect("")),
        (Mode::Strict, Probe::detect("")),
        (Mode::BestEffort, Probe::detect("landlock")),
    ] {
        let f = checker(haproxy(), mode, probe);
        let (config, files) = with_lua(script);
        let out = check(&f, &config, files).await;
        assert!(passed(&out), "{mode:?}: {out:?}");
    }
}

/// 3.0 built with `USE_SHM_OPEN` sizes a startup-log file on every run;
/// without Landlock nothing stops the `shm_open`, and the file-size limit
/// must not kill it.
#[tokio::test]
async fn best_effort_without_landlock_passes_on_3_0() {
    let Some(h30) = haproxy_series("3.0") else {
        return;
    };
    let vv = std::process::Command::new(&h30).arg("-vv").output().unwrap();
    assert!(
        String::from_utf8_lossy(&vv.stdout).contains("+SHM_OPEN"),
        "this 3.0 lacks USE_SHM_OPEN"
    );
    for probe in [Probe::detect("landlock"), Probe::detect("landlock,seccomp"), Probe::detect("")] {
        let f = checker(h30.clone(), Mode::BestEffort, probe.clone());
        let out = check(&f, VALID, vec![]).await;
        assert!(passed(&out), "{probe:?}: {out:?}");
        let out = check(&f, &VALID.replace("mode http", "mode bogus"), vec![]).await;
        assert!(matches!(out, CheckOutcome::Refused { .. }), "{probe:?}: {out:?}");
    }
}

/// What a check writes stays in its directory and below the file-size
/// limits: past the first, it runs again under the larger, which judges
/// it; past that too, it could not run (killed by SIGXFSZ), never refused.
#[tokio::test]
async fn files_written_in_the_check_directory_are_bounded() {
    if !has_lua() {
        return;
    }
    let writes = |mib: u32| {
        let script = format!(
            "local f = assert(io.open(\"written.bin\", \"wb\"))\n\
             local chunk = string.rep(\"x\", 1024 * 1024)\n\
             for i = 1, {mib} do assert(f:write(chunk)) end\n\
             assert(f:close())\n"
        );
        with_lua(&script)
    };
    let f = strict();
    let (config, files) = writes(1);
    let out = check(&f, &config, files).await;
    assert!(passed(&out), "{out:?}");
    // past the first bound, the check runs again under the larger one,
    // which judges it: the bound never decides
    let (config, files) = writes(17);
    let out = check(&f, &config, files).await;
    let CheckOutcome::Passed { message } = &out else { panic!("{out:?}") };
    assert!(
        message.starts_with("the first run wrote a file past the check's file-size limit of 16MiB; under 256MiB it passed"),
        "{message}"
    );
    // past the larger bound too, it could not run, saying both
    let (config, files) = writes(257);
    let out = check(&f, &config, files).await;
    let CheckOutcome::Unavailable { reason } = &out else { panic!("{out:?}") };
    assert!(
        reason.starts_with("haproxy -c wrote a file past the check's limit of 16 MiB (SIGXFSZ)")
            && reason.contains("(again under 256MiB: haproxy -c wrote a file past the check's limit of 256 MiB (SIGXFSZ)"),
        "{reason}"
    );
    // bare, the same render passes: the limit is the sandbox's, not the config's
    let off = checker(haproxy(), Mode::Off, Probe::detect(""));
    assert!(passed(&check(&off, &config, writes(17).1).await));
}

/// Files a check writes that fill its render's own tmpfs (the room holds
/// the largest render and the largest file a check may write, so only
/// many files can) get no verdict: the room, not the render, may have
/// refused it, where bare writes on a disk.
#[tokio::test]
async fn a_check_that_fills_its_renders_room_is_not_judged() {
    if !has_lua() {
        return;
    }
    // a room of 1 + 256 + 64 MiB
    let limits = crate::RenderLimits { files: 100, bytes: 1 << 20 };
    let options = HaproxyOptions { limits, ..sandboxed(SandboxOptions::default()) };
    let f = fixture(options, |options| HaproxyChecker::with_probe(options, Probe::detect("")));
    if f.checker.world_kind() != crate::haproxy::WorldKind::Root {
        // the config-dir world lays the render on the host's disk
        needs::missing("no root world on this host (no namespaces)", "this test");
        return;
    }
    // 15 MiB files, below the file-size bound, 330 MiB in all
    let script = "local chunk = string.rep(\"x\", 1024 * 1024)\n\
         for n = 1, 22 do\n\
           local f = assert(io.open(\"w\" .. n .. \".bin\", \"wb\"))\n\
           for i = 1, 15 do assert(f:write(chunk)) end\n\
           assert(f:close())\n\
         end\n";
    let (config, files) = with_lua(script);
    let out = check(&f, &config, files).await;
    let CheckOutcome::Unavailable { reason } = &out else { panic!("{out:?}") };
    assert!(
        reason.starts_with("haproxy -c filled the room of its config directory, 321 MiB"),
        "{reason}"
    );
}

/// The first library `binary` needs but libc: its name, and the system's copy.
fn first_needed_but_libc(binary: &Path) -> (String, PathBuf) {
    let closure = loader::closure(binary).unwrap();
    let needed = loader::Elf::read(binary).unwrap().needed;
    let name = needed.iter().find(|n| !n.starts_with("libc.")).unwrap().clone();
    let copy = closure.libraries.iter().find(|p| p.file_name().unwrap() == name.as_str());
    let copy = copy.unwrap().clone();
    (name, copy)
}

/// One patchelf edit (one a run: patchelf 0.14 garbles some combined edits).
fn run_patchelf(patchelf: &Path, args: &[&std::ffi::OsStr]) {
    let out = std::process::Command::new(patchelf).args(args).output().unwrap();
    assert!(out.status.success(), "patchelf {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A haproxy whose RPATH is `/tmp` itself, a library of its own lying
/// there: the world binds that library alone, never the host's `/tmp`
/// (over the check's own scratch one), so the check runs and a host file
/// in `/tmp` is not there for the render, as on a pod.
#[tokio::test]
async fn a_library_lying_in_tmp_is_shown_alone_not_the_hosts_tmp() {
    let Some(patchelf) = tool("patchelf") else {
        return;
    };
    let source = haproxy();
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("haproxy");
    std::fs::copy(&source, &binary).unwrap();
    // the first library it needs but libc, under a private soname in /tmp
    let (name, system_copy) = first_needed_but_libc(&source);
    let library = tempfile::Builder::new().prefix("librgtmp-").suffix(".so").tempfile_in("/tmp");
    let library = library.unwrap().into_temp_path();
    std::fs::copy(system_copy, &library).unwrap();
    let private_name = library.file_name().unwrap().to_owned();
    let run = |args: &[&std::ffi::OsStr]| run_patchelf(&patchelf, args);
    run(&["--set-soname".as_ref(), &private_name, library.as_os_str()]);
    run(&["--replace-needed".as_ref(), name.as_ref(), &private_name, binary.as_os_str()]);
    run(&["--set-rpath".as_ref(), "/tmp".as_ref(), binary.as_os_str()]);
    // a host file in /tmp the render names
    let marker = tempfile::Builder::new().prefix("rg-host-").suffix(".http").tempfile_in("/tmp");
    let marker = marker.unwrap().into_temp_path();
    std::fs::write(&marker, "HTTP/1.0 503 Service Unavailable\r\n\r\nx\n").unwrap();
    let naming =
        VALID.replace("mode http", &format!("mode http\n  errorfile 503 {}", marker.display()));

    let f = checker(binary.clone(), Mode::Strict, Probe::detect(""));
    let out = check(&f, VALID, vec![]).await;
    assert!(passed(&out), "{out:?}");
    // the world's /tmp is its own: the host's file is not in it
    let out = check(&f, &naming, vec![]).await;
    let CheckOutcome::Refused { message } = &out else { panic!("{out:?}") };
    assert!(message.contains(&*marker.to_string_lossy()), "{message}");
    // bound: the library alone
    let exposed = f.checker.sandbox().and_then(|s| s.world().map(|w| w.exposed())).unwrap();
    assert!(exposed.iter().any(|p| p == &*library), "{exposed:?}");
    assert!(!exposed.iter().any(|p| p == Path::new("/tmp")), "{exposed:?}");
}

/// A haproxy that brings its own loader and a library of its own, found
/// through `RUNPATH=$ORIGIN/../lib` under a soname no system directory has
/// (so only the private copy can satisfy it), with `PT_INTERP` moved past
/// the first MiB of the file by patchelf. It must start in the sandbox.
#[tokio::test]
async fn a_haproxy_with_its_own_loader_and_libraries_runs_sandboxed() {
    let Some(patchelf) = tool("patchelf") else {
        return;
    };
    let source = haproxy();
    let dir = tempfile::tempdir().unwrap();
    let (bin, lib) = (dir.path().join("bin"), dir.path().join("lib"));
    std::fs::create_dir(&bin).unwrap();
    std::fs::create_dir(&lib).unwrap();
    let binary = bin.join("haproxy");
    std::fs::copy(&source, &binary).unwrap();
    // the first library it needs but libc, copied under a private soname
    let (name, system_copy) = first_needed_but_libc(&source);
    let private_name = name.replacen(".so", "-rgprivate.so", 1);
    std::fs::copy(system_copy, lib.join(&private_name)).unwrap();
    let interp = lib.join("ld-rgprivate.so");
    std::fs::copy(loader::closure(&source).unwrap().interpreter.unwrap(), &interp).unwrap();
    let run = |args: &[&std::ffi::OsStr]| run_patchelf(&patchelf, args);
    run(&["--set-soname".as_ref(), private_name.as_ref(), lib.join(&private_name).as_os_str()]);
    run(&["--replace-needed".as_ref(), name.as_ref(), private_name.as_ref(), binary.as_os_str()]);
    run(&["--set-rpath".as_ref(), "$ORIGIN/../lib".as_ref(), binary.as_os_str()]);
    run(&["--set-interpreter".as_ref(), interp.as_os_str(), binary.as_os_str()]);
    let elf = loader::Elf::read(&binary).unwrap();
    assert_eq!(elf.interpreter.as_deref(), Some(interp.as_path()));
    assert_eq!(elf.runpath.as_deref(), Some("$ORIGIN/../lib"));
    let grants = landlock::Grants::for_closure(&binary, loader::closure(&binary).ok().as_ref());
    assert!(grants.rules.iter().any(|(p, _)| p.ends_with(&private_name)), "{:?}", grants.rules);

    for (mode, probe) in [
        (Mode::Off, Probe::detect("")),
        (Mode::Strict, Probe::detect("")),
        (Mode::BestEffort, Probe::detect("seccomp")),
    ] {
        let f = checker(binary.clone(), mode, probe);
        let out = check(&f, VALID, vec![]).await;
        assert!(passed(&out), "{mode:?}: {out:?}");
        let out = check(&f, &VALID.replace("mode http", "mode bogus"), vec![]).await;
        assert!(matches!(out, CheckOutcome::Refused { .. }), "{mode:?}: {out:?}");
    }
}
