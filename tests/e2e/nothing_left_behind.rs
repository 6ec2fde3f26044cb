//! Nothing left behind (docs/protocol.md §1): SIGTERM and SIGINT to `serve`
//! and `check` during a check end haproxy's process group and remove the
//! check directory before the gate exits, with status 143 or 130; and
//! `--record` creates its file 0600, never through a symlink, and never over
//! a file it did not create unless told to.

use crate::support::*;
use serde_json::json;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The gate must be gone this soon after the signal (the check itself would
/// run for minutes).
const EXIT_BOUND: Duration = Duration::from_secs(5);

/// A stand-in haproxy that notes where it runs, starts a child in its
/// process group, notes both pids, and hangs. (`--no-sandbox`: the sandbox
/// would not let /bin/sh run.)
struct Hanging {
    dir: tempfile::TempDir,
    script: PathBuf,
}

impl Hanging {
    fn new() -> Hanging {
        let dir = tempfile::tempdir().unwrap();
        let marks = dir.path().join("marks");
        std::fs::create_dir(&marks).unwrap();
        let script = dir.path().join("haproxy");
        let body = format!(
            "#!/bin/sh\n[ \"$1\" = -v ] && {{ echo 'HAProxy version hanging'; exit 0; }}\n/bin/pwd -P > {m}/cwd.tmp\n/bin/sleep 300 &\necho $! > {m}/child\necho $$ > {m}/self\n\
mv {m}/cwd.tmp {m}/cwd\nwait\n",
            m = marks.display()
        );
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Hanging { dir, script }
    }

    fn mark(&self, name: &str) -> PathBuf {
        self.dir.path().join("marks").join(name)
    }

    /// Waits until the check runs; returns its directory and its two pids.
    fn running(&self, gate: &mut Child) -> (PathBuf, Vec<i32>) {
        let start = Instant::now();
        while !self.mark("cwd").exists() {
            assert!(gate.try_wait().unwrap().is_none(), "the gate exited before its check ran");
            assert!(start.elapsed() < Duration::from_secs(20), "the check never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        let read = |name: &str| std::fs::read_to_string(self.mark(name)).unwrap().trim().to_owned();
        let pids = [read("self"), read("child")].iter().map(|p| p.parse().unwrap()).collect();
        (PathBuf::from(read("cwd")), pids)
    }
}

/// Whether `pid` is a live process (a zombie is dead).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits for the gate; fails the test past [`EXIT_BOUND`].
fn exits_quickly(gate: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = gate.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > EXIT_BOUND {
            let _ = gate.kill();
            panic!("the gate did not exit within {EXIT_BOUND:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Signals the gate once its check runs, and asserts what must hold after.
fn stopped_by(signal: i32, expected_status: i32, start: impl FnOnce(&Path, &Path) -> Child) {
    let hanging = Hanging::new();
    let tmp = tempfile::tempdir().unwrap();
    let mut gate = start(&hanging.script, tmp.path());
    let (check_dir, pids) = hanging.running(&mut gate);
    assert!(
        check_dir.starts_with(tmp.path()),
        "{} is not in the gate's TMPDIR",
        check_dir.display()
    );
    assert!(check_dir.join("haproxy.cfg").exists(), "the render is laid out while the check runs");
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(gate.id() as i32, signal) }, 0);
    let status = exits_quickly(&mut gate);
    let stderr = {
        use std::io::Read;
        let mut text = String::new();
        gate.stderr.take().unwrap().read_to_string(&mut text).unwrap();
        text
    };
    // The gate killed the group before it exited; its children are reaped
    // by whoever inherits them, which may take a moment.
    let start = Instant::now();
    while pids.iter().any(|&p| alive(p)) && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!check_dir.exists(), "the check directory {} outlived the gate", check_dir.display());
    for pid in pids {
        assert!(!alive(pid), "process {pid} of the check's group outlived the gate");
    }
    assert_eq!(tree(tmp.path()), Vec::<PathBuf>::new(), "the gate's TMPDIR is not empty");
    assert_eq!(status.code(), Some(expected_status), "{status:?}; stderr: {stderr}");
}

fn serve_hanging(script: &Path, tmp: &Path) -> Child {
    let mut gate = Command::new(BIN)
        .args([
            "serve",
            "--no-sandbox",
            "--check-interval",
            "0s",
            "--check-timeout",
            "300s",
            "--haproxy",
        ])
        .arg(script)
        .env("TMPDIR", tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = rendered("plan-1", "r-1", &sample_config()).to_string();
    use std::io::Write;
    let mut stdin = gate.stdin.take().unwrap();
    writeln!(stdin, "{line}").unwrap();
    // the input stays open, as a controller's would: leaked on purpose until the gate exits
    std::mem::forget(stdin);
    gate
}

fn check_hanging(script: &Path, tmp: &Path) -> Child {
    Command::new(BIN)
        .args(["check", "--no-sandbox", "--timeout", "300s", "--haproxy"])
        .arg(script)
        .arg(sample_dir())
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn sigterm_to_serve_ends_the_check_and_removes_its_directory() {
    stopped_by(libc::SIGTERM, 143, serve_hanging);
}

#[test]
fn sigint_to_serve_ends_the_check_and_removes_its_directory() {
    stopped_by(libc::SIGINT, 130, serve_hanging);
}

#[test]
fn sigterm_to_check_ends_the_check_and_removes_its_directory() {
    stopped_by(libc::SIGTERM, 143, check_hanging);
}

#[test]
fn sigint_to_check_ends_the_check_and_removes_its_directory() {
    stopped_by(libc::SIGINT, 130, check_hanging);
}

// -- --record ---------------------------------------------------------------

/// `serve --record PATH EXTRA...` over one event and the end of input.
fn record(path: &Path, extra: &[&str]) -> std::process::Output {
    let line = rendered("plan-1", "r-1", &sample_config()).to_string();
    let mut args = vec!["serve", "--check-interval", "0s", "--haproxy"];
    let haproxy = haproxy();
    args.push(&haproxy);
    args.push("--record");
    args.push(path.to_str().unwrap());
    args.extend(extra);
    run(&args, &format!("{line}\n"), &[])
}

#[test]
fn record_creates_its_file_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ndjson");
    let out = record(&path, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(std::fs::read_to_string(&path).unwrap().contains("\"recording\":\"rendergate\""));
}

#[test]
fn record_refuses_a_symlink_even_when_told_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious");
    std::fs::write(&target, "precious\n").unwrap();
    let link = dir.path().join("run.ndjson");
    symlink(&target, &link).unwrap();
    for extra in [&[][..], &["--record-overwrite"][..]] {
        let out = record(&link, extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--record") && stderr.contains("symlink"), "{stderr}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
    }
}

#[test]
fn record_never_truncates_a_file_unless_told_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ndjson");
    std::fs::write(&path, "an earlier recording\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = record(&path, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--record-overwrite"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "an earlier recording\n");
    // told to: replaced, and owner-only from then on
    let out = record(&path, &["--record-overwrite"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("{\"recording\":\"rendergate\""), "{text}");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
}

/// The processes whose working directory is under `dir`.
fn working_in(dir: &Path) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// The real haproxy, sandboxed, busy in a Lua loop: SIGTERM to `check`
/// ends it and removes its directory as with the stand-in above.
#[test]
fn sigterm_to_check_ends_a_sandboxed_haproxy() {
    if !crate::needs::lua(Path::new(&haproxy())) {
        crate::needs::missing(
            &format!("{} has no Lua (for a check that runs long)", haproxy()),
            "this test",
        );
        return;
    }
    let render = tempfile::tempdir().unwrap();
    let config = sample_config().replacen("global\n", "global\n    lua-load busy.lua\n", 1);
    assert!(config.contains("lua-load"), "the sample config has a global section");
    std::fs::write(render.path().join("haproxy.cfg"), config).unwrap();
    std::fs::create_dir(render.path().join("maps")).unwrap();
    std::fs::copy(sample_dir().join("maps/hosts.map"), render.path().join("maps/hosts.map"))
        .unwrap();
    std::fs::write(render.path().join("busy.lua"), "while true do end\n").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut gate = Command::new(BIN)
        .args(["check", "--timeout", "300s", "--haproxy", &haproxy()])
        .arg(render.path())
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let pids = loop {
        let pids = working_in(tmp.path());
        if !pids.is_empty() {
            break pids;
        }
        assert!(gate.try_wait().unwrap().is_none(), "the gate exited before its check ran");
        assert!(start.elapsed() < Duration::from_secs(20), "the check never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(gate.id() as i32, libc::SIGTERM) }, 0);
    let status = exits_quickly(&mut gate);
    let start = Instant::now();
    while pids.iter().any(|&p| alive(p)) && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(tree(tmp.path()), Vec::<PathBuf>::new(), "the gate's TMPDIR is not empty");
    for pid in pids {
        assert!(!alive(pid), "haproxy ({pid}) outlived the gate");
    }
    assert_eq!(status.code(), Some(143));
}

/// Runs `body` (Python, given `args` as `sys.argv[1:]`) as a child
/// subreaper (PR_SET_CHILD_SUBREAPER, 36) that waits only for the gates it
/// runs, as a controller that is its container's pid 1 may; then asserts
/// that no process was left to it (an orphan is adopted there and never
/// reaped).
fn under_a_parent_that_never_reaps(body: &str, args: &[&str]) {
    let script = format!(
        r#"
import ctypes, json, os, signal, subprocess, sys, time
assert ctypes.CDLL(None).prctl(36, 1) == 0
{body}
time.sleep(0.5)
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        stat = open(f'/proc/{{pid}}/stat').read()
    except OSError:
        continue
    if int(stat.rsplit(') ', 1)[1].split()[1]) == os.getpid():
        print(stat.rsplit(') ', 1)[0] + ') ' + stat.rsplit(') ', 1)[1].split()[0])
"#
    );
    let out = Command::new("python3")
        .args(["-c", &script, BIN, &haproxy()])
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let left = String::from_utf8_lossy(&out.stdout);
    assert!(left.trim().is_empty(), "processes of the checks left: {left}");
}

/// Under a parent that never reaps, checks leave no process behind: the
/// reaper reaps the check's init and keeper before it tells haproxy's
/// status, after which the gate kills the check's group (an init or keeper
/// orphaned there would be kept for ever; docs/checking.md, "The check's
/// world").
#[test]
fn checks_under_a_parent_that_never_reaps_leave_no_process() {
    let dir = render_dir(&sample_config_anywhere());
    let body = r#"
for _ in range(10):
    subprocess.run([sys.argv[1], 'check', '--haproxy', sys.argv[2], sys.argv[3]],
                   stdout=subprocess.DEVNULL, check=True)
"#;
    under_a_parent_that_never_reaps(body, &[dir.path().to_str().unwrap()]);
}

/// A config whose Lua never ends: HAProxy runs until it is stopped.
fn endless_lua(config: &str) -> String {
    assert!(crate::needs::lua(&real_haproxy()), "{} has no Lua", haproxy());
    // last in the global section, after any `default-path`
    let config = config.replacen("\n\ndefaults", "\n    lua-load loop.lua\n\ndefaults", 1);
    assert!(config.contains("lua-load"), "the sample has no defaults section");
    config
}

const ENDLESS: &str = "while true do end\n";

/// The same parent, with checks that are stopped rather than finished: a
/// check that times out, and one whose gate gets SIGTERM while HAProxy runs.
/// Stopping a check ends its PID namespace and lets the reaper reap before
/// its group is killed: a reaper killed first would leave the check's init,
/// haproxy and keeper to the parent (docs/checking.md, "The check's world").
#[test]
fn checks_stopped_under_a_parent_that_never_reaps_leave_no_process() {
    let dir = render_dir(&endless_lua(&sample_config_anywhere()));
    std::fs::write(dir.path().join("loop.lua"), ENDLESS).unwrap();
    let body = r#"
check = [sys.argv[1], 'check', '--haproxy', sys.argv[2], '--timeout', '1s', sys.argv[3]]
for _ in range(3):
    out = subprocess.run(check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert b'timed out' in out.stdout, out.stdout
for _ in range(2):
    gate = subprocess.Popen(check[:5] + ['30s', sys.argv[3]], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    gate.send_signal(signal.SIGTERM)
    assert gate.wait() == 143, gate.returncode
"#;
    under_a_parent_that_never_reaps(body, &[dir.path().to_str().unwrap()]);
}

/// As above, through `serve`: checks that time out, one given up when
/// leadership is lost while HAProxy runs, one when the gate gets SIGTERM;
/// then the gate restarted, and its input's end.
#[test]
fn serve_stopping_checks_under_a_parent_that_never_reaps_leaves_no_process() {
    // a `general` file is laid out under general/, as on a pod
    let config = endless_lua(&sample_config()).replace("loop.lua", "general/loop.lua");
    let mut render = rendered("plan-1", "r-1", &config);
    let lua = json!({"kind": "general", "path": "loop.lua", "content": ENDLESS});
    render["files"].as_array_mut().unwrap().push(lua);
    let body = r#"
serve = [sys.argv[1], 'serve', '--haproxy', sys.argv[2], '--check-interval', '0s',
         '--check-timeout', '1s']
render = json.loads(sys.argv[3])
def start():
    return subprocess.Popen(serve, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def send(gate, n):
    line = {'type': 'lost_leadership'} if n is None else dict(render, plan=f'plan-{n}', render=f'r-{n}')
    gate.stdin.write((json.dumps(line) + '\n').encode())
    gate.stdin.flush()
def timed_out(gate):
    while True:
        line = json.loads(gate.stdout.readline())
        if line['type'] == 'verdict':
            assert not line['ok'] and 'timed out' in line['message'], line
            return
gate = start()
send(gate, 1)
timed_out(gate)
# given up while HAProxy runs: leadership lost, then SIGTERM
send(gate, 2)
time.sleep(0.5)
send(gate, None)
send(gate, 3)
timed_out(gate)
send(gate, 4)
time.sleep(0.5)
gate.send_signal(signal.SIGTERM)
assert gate.wait() == 143, gate.returncode
# restarted under the same parent, and ended by its input's end
gate = start()
send(gate, 5)
timed_out(gate)
gate.stdin.close()
assert gate.wait() == 0, gate.returncode
"#;
    under_a_parent_that_never_reaps(body, &[&render.to_string()]);
}
