//! The two sides of a case (the gate and bare HAProxy) and the kind each one gives.
//!
//! The gate: the real binary, `rendergate check --json --haproxy H DIR`
//! (exit 0 pass, 1 refused, 2 could not run; the JSON must say the same).
//! Bare: `H -dr -c -f haproxy.cfg` with DIR as its working directory and an
//! empty environment, as the gate runs it. `-dr` is part of the gate's
//! documented contract (an unresolvable server name is a warning, so a DNS
//! blip never reverts a fleet), so the reference gets it too; without it the
//! two would differ by design on every unresolvable name. Bare's kind: exit
//! 0 pass, exit 2 pass (HAProxy's "valid but will not start (no listener)"),
//! exit 1 refused, anything else (a signal, another code) could not run.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_rendergate");
/// How long either side may take before it is killed (and could not run).
const DEADLINE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Pass,
    Refused,
    CouldNotRun,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Pass => "pass",
            Kind::Refused => "refused",
            Kind::CouldNotRun => "could not run",
        })
    }
}

/// The haproxy under test, as an absolute path (bare runs with an empty
/// environment, so nothing is looked up on PATH there). Missing is a
/// failure, never a skip.
pub fn haproxy() -> &'static Path {
    static HAPROXY: OnceLock<PathBuf> = OnceLock::new();
    HAPROXY.get_or_init(|| {
        let name = std::env::var("RENDERGATE_TEST_HAPROXY").unwrap_or_else(|_| "haproxy".into());
        let found = if name.contains('/') {
            Some(std::path::absolute(&name).unwrap()).filter(|p| p.is_file())
        } else {
            // Debian puts it in /usr/sbin, which a user's PATH may lack
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
                .map(|d| d.join(&name))
                .find(|p| p.is_file())
        };
        found.unwrap_or_else(|| {
            panic!("haproxy {name:?} not found: the differential test needs it (set RENDERGATE_TEST_HAPROXY)")
        })
    })
}

/// A process run to its end (or killed at the deadline).
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` with its output captured, killed after [`DEADLINE`].
pub fn run(mut command: Command) -> Run {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Run { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

/// Bare HAProxy's kind for how it ended.
pub fn bare_kind(status: ExitStatus) -> Kind {
    match status.code() {
        Some(0 | 2) => Kind::Pass,
        Some(1) => Kind::Refused,
        _ => Kind::CouldNotRun,
    }
}

/// Bare `haproxy -dr -c -f haproxy.cfg` in `dir`.
pub fn bare(dir: &Path) -> (Kind, Run) {
    bare_with(haproxy(), dir)
}

pub fn bare_with(haproxy: &Path, dir: &Path) -> (Kind, Run) {
    let mut command = Command::new(haproxy);
    command.args(["-dr", "-c", "-f", "haproxy.cfg"]).current_dir(dir).env_clear();
    let run = run(command);
    (bare_kind(run.status), run)
}

/// The gate's verdict on `dir`: its kind, or why its answer cannot be read
/// (no JSON, or JSON that contradicts the exit status).
pub fn gate(dir: &Path) -> (Result<Kind, String>, Run) {
    gate_with(haproxy(), dir)
}

pub fn gate_with(haproxy: &Path, dir: &Path) -> (Result<Kind, String>, Run) {
    let mut command = Command::new(BIN);
    command.args(["check", "--json", "--timeout", "20s", "--haproxy"]).arg(haproxy).arg(dir);
    let run = run(command);
    (gate_kind(&run), run)
}

fn gate_kind(run: &Run) -> Result<Kind, String> {
    let by_exit = match run.status.code() {
        Some(0) => Kind::Pass,
        Some(1) => Kind::Refused,
        Some(2) => Kind::CouldNotRun,
        _ => return Err(format!("the gate itself ended with {}", run.status)),
    };
    let verdict: serde_json::Value = serde_json::from_str(run.stdout.trim())
        .map_err(|e| format!("the gate printed no verdict object ({e}), exit {}", run.status))?;
    let by_json = match (verdict["ok"].as_bool(), verdict["refused"].as_bool()) {
        (Some(true), Some(false)) => Kind::Pass,
        (Some(false), Some(true)) => Kind::Refused,
        (Some(false), Some(false)) => Kind::CouldNotRun,
        other => return Err(format!("the verdict's ok/refused make no kind: {other:?}")),
    };
    if by_json != by_exit {
        return Err(format!("exit status says {by_exit}, the JSON says {by_json}"));
    }
    Ok(by_exit)
}
