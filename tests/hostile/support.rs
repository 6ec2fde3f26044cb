//! The machinery of the hostile suite: a scene per case (a render directory,
//! secrets planted outside it, a private TMPDIR), running the real binary
//! over it (`check DIR` or `serve`), and the checks every case gets.

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_rendergate");
/// The deadline every case runs under (`--timeout` / `--check-timeout`).
pub const TIMEOUT: Duration = Duration::from_secs(5);
pub const TIMEOUT_FLAG: &str = "5s";
/// A case must be over within the deadline plus this.
pub const SLACK: Duration = Duration::from_secs(1);
/// What an operator may be shown at most (HAProxy's output is capped at 64 KiB).
pub const MESSAGE_LIMIT: usize = 70 * 1024;
/// The opt-in variable of the canary mode.
pub const CANARY_VAR: &str = "RENDERGATE_HOSTILE_CANARY";
/// Set to print every case's verdict and message (with `--nocapture`).
pub const VERBOSE_VAR: &str = "RENDERGATE_HOSTILE_VERBOSE";

/// The first line of this host's /etc/passwd in full (`root:x:0:0:root:/root:/bin/bash`),
/// when it holds more than names and ids: never shown (the world's stand-in
/// keeps `name:x:uid:gid:::` only, which may show).
pub fn passwd_first_line() -> Option<&'static str> {
    static LINE: OnceLock<Option<String>> = OnceLock::new();
    LINE.get_or_init(|| {
        let text = std::fs::read_to_string("/etc/passwd").ok()?;
        let line = text.lines().next()?.trim().to_owned();
        let fields: Vec<&str> = line.split(':').collect();
        // gecos, home or shell: what the stand-in drops
        (fields.len() > 4 && fields[4..].iter().any(|f| !f.is_empty())).then_some(line)
    })
    .as_deref()
}

/// The host's /etc/passwd first line as the stand-in shows it (`root:x:0:0:::`).
pub fn passwd_first_stand_in() -> Option<String> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    let fields: Vec<&str> = text.lines().next()?.split(':').collect();
    (fields.len() >= 4).then(|| format!("{}:x:{}:{}:::", fields[0], fields[2], fields[3]))
}

// ---------------------------------------------------------------------------
// The tools this suite runs

/// The haproxy the suite runs, as an absolute path (the environment of the
/// gate is cleared, so no `PATH` lookup happens there).
pub fn haproxy() -> &'static Path {
    static HAPROXY: OnceLock<PathBuf> = OnceLock::new();
    HAPROXY.get_or_init(|| {
        let name = std::env::var("RENDERGATE_TEST_HAPROXY").unwrap_or_else(|_| "haproxy".into());
        if name.contains('/') {
            return std::path::absolute(&name).unwrap();
        }
        // Debian puts it in /usr/sbin, which a user's PATH may lack
        which(&name)
            .or_else(|| {
                ["/usr/sbin", "/usr/local/sbin"]
                    .iter()
                    .map(|d| Path::new(d).join(&name))
                    .find(|p| p.is_file())
            })
            .unwrap_or_else(|| panic!("no {name} on PATH: the hostile suite needs haproxy"))
    })
}

pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Whether this haproxy runs Lua, asked once.
pub fn has_lua() -> bool {
    static LUA: OnceLock<bool> = OnceLock::new();
    *LUA.get_or_init(|| crate::needs::lua(haproxy()))
}

/// A case's skip for a haproxy without Lua.
pub fn no_lua() -> Spec {
    Spec::missing(format!("{} has no Lua", haproxy().display()))
}

/// A self-signed certificate and its key (PEM), made once with `openssl`, or
/// `None` when there is no openssl.
pub fn self_signed() -> Option<&'static (String, String)> {
    static CERT: OnceLock<Option<(String, String)>> = OnceLock::new();
    CERT.get_or_init(|| {
        let openssl = which("openssl")?;
        let dir = tempfile::tempdir().ok()?;
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let status = Command::new(openssl)
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
            ])
            .args(["-subj", "/CN=hostile.test", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
        Some((std::fs::read_to_string(cert).ok()?, std::fs::read_to_string(key).ok()?))
    })
    .as_ref()
}

/// A file in /etc/ssl/private this process can open (as root), if any: the
/// private keys that sit next to the system CA store.
pub fn readable_private_key() -> Option<PathBuf> {
    std::fs::read_dir("/etc/ssl/private")
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| std::fs::File::open(p).is_ok() && p.is_file())
}

pub const NO_PRIVATE_KEY: &str = "no readable file in /etc/ssl/private on this host (or not root)";

/// A fresh random hex string (the markers are unguessable and unique per case).
pub fn random_hex() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos(),
    );
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    format!("{:016x}", h.finish())
}

/// Says a case was skipped and why (shown with `--nocapture`, and in the
/// log of a failing run); a missing need fails it in CI (tests/needs.rs).
pub fn skip(case: &str, why: &Skip) {
    match why {
        Skip::NothingHere(why) => eprintln!("note: hostile case {case} skipped: {why}"),
        Skip::Missing(what) => crate::needs::missing(what, &format!("hostile case {case}")),
    }
}

// ---------------------------------------------------------------------------
// The scene of one case

/// One case's ground: `root/render` (the DIR checked), `root/outside` (host
/// files the render must not reach, among them the secret), `root/tmp` (the
/// gate's TMPDIR, which must be empty afterwards).
pub struct Scene {
    _root: tempfile::TempDir,
    pub root: PathBuf,
    pub render: PathBuf,
    pub tmp: PathBuf,
    pub outside: PathBuf,
    /// `outside/TOPSECRET-<random>`; its first line is `secret`.
    pub secret_path: PathBuf,
    /// The content marker of the secret file.
    pub secret: String,
    /// The value of `SECRET_TOKEN` in the gate's environment.
    pub token: String,
    /// A case-unique string for command lines and file names.
    pub tag: String,
    planted: Vec<String>,
    /// Host paths outside `root` a case may create; removed afterwards.
    cleanup: Vec<PathBuf>,
}

impl Scene {
    pub fn new() -> Scene {
        let dir = tempfile::Builder::new().prefix("rendergate-hostile-").tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (render, tmp, outside) = (root.join("render"), root.join("tmp"), root.join("outside"));
        for d in [&render, &tmp, &outside] {
            std::fs::create_dir(d).unwrap();
        }
        let secret_name = format!("TOPSECRET-{}", random_hex());
        let secret = format!("SECRETLINE-{}", random_hex());
        let secret_path = outside.join(&secret_name);
        std::fs::write(&secret_path, format!("{secret}\n")).unwrap();
        // as secrets are: readable by their owner (the gate's user) only
        std::fs::set_permissions(&secret_path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        Scene {
            _root: dir,
            root,
            render,
            tmp,
            outside,
            secret_path,
            secret,
            token: format!("TOKEN-{}", random_hex()),
            tag: format!("hostile{}", random_hex()),
            planted: vec![secret_name],
            cleanup: vec![],
        }
    }

    pub fn secret(&self) -> &str {
        self.secret_path.to_str().unwrap()
    }

    /// Writes `outside/name`; returns its path.
    pub fn plant(&mut self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.outside.join(name);
        std::fs::write(&path, content).unwrap();
        self.planted.push(name.to_owned());
        path
    }

    /// Records `outside/name`, made by the test some other way, as planted.
    pub fn adopt(&mut self, name: &str) -> PathBuf {
        self.planted.push(name.to_owned());
        self.outside.join(name)
    }

    /// Makes a FIFO `outside/name` nobody writes to.
    pub fn plant_fifo(&mut self, name: &str) -> PathBuf {
        let path = self.outside.join(name);
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", path.display());
        self.planted.push(name.to_owned());
        path
    }

    /// Makes an empty directory `outside/name`.
    pub fn plant_dir(&mut self, name: &str) -> PathBuf {
        let path = self.outside.join(name);
        std::fs::create_dir(&path).unwrap();
        self.planted.push(name.to_owned());
        path
    }

    /// A path outside the scene (e.g. in /tmp) that a case targets; it is
    /// watched like the others and removed when the scene ends.
    pub fn host_path(&mut self, path: PathBuf) -> PathBuf {
        self.cleanup.push(path.clone());
        path
    }

    /// What `outside/` holds that the test did not put there.
    fn unplanted(&self) -> Vec<String> {
        let planted: BTreeSet<&String> = self.planted.iter().collect();
        std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !planted.contains(n))
            .collect()
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        for p in &self.cleanup {
            let _ = std::fs::remove_file(p);
        }
        kill_leftovers(self);
    }
}

// ---------------------------------------------------------------------------
// What a case is

/// The verdict kinds, plus "check DIR refused the directory" (no verdict).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pass,
    Refused,
    CouldNotRun,
    /// No verdict at all: exit 2 and an error on stderr (`check DIR`
    /// refused the directory, or the command line).
    NoVerdict,
}

/// How the render reaches the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// `rendergate check --json DIR`.
    Check,
    /// One `rendered` line to `rendergate serve`; `{GATE_PID}` in the config
    /// becomes the pid of that serve process.
    Serve,
}

/// What the fixture does to an unsandboxed `haproxy -c` (the canary checks it still does).
#[derive(Clone, Debug)]
pub enum Leak {
    /// The secret file's content or the token shows in the output.
    Marker,
    /// This text shows in the output.
    Text(String),
    /// This file exists afterwards.
    Created(PathBuf),
    /// The check passes (HAProxy read the host file and liked it).
    Passes,
    /// A process carrying the scene's tag outlives the check.
    Process,
    /// The check runs into the deadline.
    Blocks,
}

/// One file of a render.
pub struct RFile {
    pub kind: &'static str,
    pub path: String,
    pub content: String,
}

pub fn file(path: &str, content: impl Into<String>) -> RFile {
    RFile { kind: "general", path: path.into(), content: content.into() }
}

pub type Extra = Box<dyn FnOnce(&Outcome) -> Vec<String> + Send>;
/// Runs beside the gate, given the gate's TMPDIR and a flag raised once the
/// gate has exited; each string it returns is a failure.
pub type Observer = Box<dyn FnOnce(&Path, &std::sync::atomic::AtomicBool) -> Vec<String> + Send>;

/// One case as built over a scene.
pub struct Spec {
    pub via: Via,
    pub config: String,
    pub files: Vec<RFile>,
    /// Symlinks planted in DIR: (relative path, target).
    pub symlinks: Vec<(String, PathBuf)>,
    /// The verdict kinds that are right under the sandbox.
    pub expect: &'static [Kind],
    /// Never in the output (besides the secret, the token and /etc/passwd's first line).
    pub forbidden: Vec<String>,
    /// In the message, case-insensitively; `a|b` means either.
    pub must_contain: Vec<String>,
    /// Must not exist afterwards.
    pub watch: Vec<PathBuf>,
    /// What happens without the sandbox; empty: not a leaking fixture.
    pub leaks: Vec<Leak>,
    /// Why this case cannot run here.
    pub skip: Option<Skip>,
    /// Case-specific checks, after the common ones; each string is a failure.
    pub extra: Option<Extra>,
    /// Watches while the gate runs (check DIR only).
    pub observer: Option<Observer>,
    /// A cap on the gate's address space (a safety net for the memory bomb
    /// when the sandbox does not limit haproxy).
    pub rlimit_as: Option<u64>,
    /// More flags for the gate (`--check-hostname NAME`, `--check-read PATH`).
    pub args: Vec<String>,
    /// More variables in the gate's own environment.
    pub env: Vec<(String, String)>,
    /// Flags put first in the canary's unsandboxed run only: the gate clears
    /// HAProxy's environment with or without the sandbox, so an environment
    /// fixture proves its mechanism there by `--check-env`.
    pub canary_args: Vec<String>,
}

impl Spec {
    pub fn check(config: String, expect: &'static [Kind]) -> Spec {
        Spec {
            via: Via::Check,
            config,
            files: vec![],
            symlinks: vec![],
            expect,
            forbidden: vec![],
            must_contain: vec![],
            watch: vec![],
            leaks: vec![],
            skip: None,
            extra: None,
            observer: None,
            rlimit_as: None,
            args: vec![],
            env: vec![],
            canary_args: vec![],
        }
    }

    pub fn serve(config: String, expect: &'static [Kind]) -> Spec {
        Spec { via: Via::Serve, ..Spec::check(config, expect) }
    }

    pub fn files(mut self, files: Vec<RFile>) -> Self {
        self.files.extend(files);
        self
    }
    pub fn leaks(mut self, leaks: Vec<Leak>) -> Self {
        self.leaks = leaks;
        self
    }
    pub fn forbid(mut self, text: impl Into<String>) -> Self {
        self.forbidden.push(text.into());
        self
    }
    pub fn must_say(mut self, text: impl Into<String>) -> Self {
        self.must_contain.push(text.into());
        self
    }
    /// One more flag (or flag value) for the gate.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }
    /// `--check-env NAME=VALUE` in the canary's run only (see `canary_args`).
    pub fn canary_env(mut self, name: &str, value: &str) -> Self {
        self.canary_args.extend(["--check-env".to_owned(), format!("{name}={value}")]);
        self
    }
    /// One more variable in the gate's own environment.
    pub fn gate_env(mut self, name: &str, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
    pub fn watch(mut self, path: PathBuf) -> Self {
        self.watch.push(path);
        self
    }
    pub fn extra(mut self, f: impl FnOnce(&Outcome) -> Vec<String> + Send + 'static) -> Self {
        self.extra = Some(Box::new(f));
        self
    }
    pub fn observe(
        mut self,
        f: impl FnOnce(&Path, &std::sync::atomic::AtomicBool) -> Vec<String> + Send + 'static,
    ) -> Self {
        self.observer = Some(Box::new(f));
        self
    }
    /// The host has nothing for this case to reach: skipped, in CI too.
    pub fn nothing_here(why: impl Into<String>) -> Spec {
        Spec { skip: Some(Skip::NothingHere(why.into())), ..Spec::check(String::new(), &[]) }
    }
    /// A tool or a HAProxy feature the case needs is missing.
    pub fn missing(what: impl Into<String>) -> Spec {
        Spec { skip: Some(Skip::Missing(what.into())), ..Spec::check(String::new(), &[]) }
    }
}

/// Why a case cannot run here.
pub enum Skip {
    /// The host has nothing for the case to reach (the file it would hide, a
    /// readable private key): the case proves nothing here, anywhere.
    NothingHere(String),
    /// A tool or a HAProxy feature the case needs: in CI its absence fails
    /// the case (tests/needs.rs).
    Missing(String),
}

pub const PASS: &[Kind] = &[Kind::Pass];
pub const REFUSED: &[Kind] = &[Kind::Refused];
pub const COULD_NOT_RUN: &[Kind] = &[Kind::CouldNotRun];
/// Must not block nor pass: HAProxy cannot read it, or the deadline ends it.
pub const NOT_PASS: &[Kind] = &[Kind::Refused, Kind::CouldNotRun];
pub const NO_VERDICT: &[Kind] = &[Kind::NoVerdict];

/// A case: its name and how to build it over a scene.
pub type Build = fn(&mut Scene) -> Spec;

// ---------------------------------------------------------------------------
// Running the gate

/// The sandbox a run asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No flag: the default, which is strict.
    Default,
    BestEffort,
    /// `--no-sandbox`.
    Off,
}

#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub mode: Mode,
    /// `RENDERGATE_SANDBOX_DISABLE` for the gate.
    pub disable: Option<&'static str>,
}

pub const SANDBOXED: Run = Run { mode: Mode::Default, disable: None };
pub const UNSANDBOXED: Run = Run { mode: Mode::Off, disable: None };

impl Run {
    fn flags(&self) -> Vec<&'static str> {
        match self.mode {
            Mode::Default => vec![],
            Mode::BestEffort => vec!["--sandbox", "best-effort"],
            Mode::Off => vec!["--no-sandbox"],
        }
    }
}

/// What one run gave.
#[derive(Debug)]
pub struct Outcome {
    pub kind: Result<Kind, String>,
    /// What an observer found wrong while the gate ran.
    pub observed: Vec<String>,
    /// The verdict's message (check DIR's error line when there is no verdict).
    pub message: String,
    pub stdout: String,
    pub stderr: String,
    /// From start (check) or from sending the render (serve) to the verdict.
    pub wall: Duration,
    pub status: Option<ExitStatus>,
}

impl Outcome {
    /// Everything the gate printed.
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// The gate's environment: nothing but the secret token and the private
/// TMPDIR (and the layer knob). `SECRET_TOKEN` sorts before `TMPDIR`, so it is
/// the first entry of `/proc/<pid>/environ`, the one HAProxy quotes.
fn gate_command(scene: &Scene, run: Run, spec: &Spec) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_clear().env("SECRET_TOKEN", &scene.token).env("TMPDIR", &scene.tmp);
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    let rlimit_as = spec.rlimit_as;
    if let Some(disable) = run.disable {
        cmd.env("RENDERGATE_SANDBOX_DISABLE", disable);
    }
    if let Some(limit) = rlimit_as {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs in the hook.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit { rlim_cur: limit, rlim_max: limit };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Reads a pipe to its end in a thread of its own.
fn drain(mut r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

/// What a drained pipe held; a pipe some leftover process still holds open
/// after the gate exited shows as such (and fails the case) instead of hanging.
fn drained(rx: mpsc::Receiver<String>) -> String {
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| "<the gate's output never ended: something still holds it open>".into())
}

/// Waits for `child`, killing it after `guard` (so a broken gate fails the
/// case instead of hanging the suite).
fn wait_guarded(child: &mut Child, guard: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if start.elapsed() > guard {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn write_render(scene: &Scene, spec: &Spec) {
    std::fs::write(scene.render.join("haproxy.cfg"), &spec.config).unwrap();
    for f in &spec.files {
        let path = scene.render.join(&f.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &f.content).unwrap();
    }
    for (rel, target) in &spec.symlinks {
        let path = scene.render.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    }
}

/// `rendergate check --json --timeout 5s DIR`.
fn run_check(scene: &Scene, spec: &mut Spec, run: Run) -> Outcome {
    write_render(scene, spec);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let observer = spec.observer.take().map(|watch| {
        let (tmp, done) = (scene.tmp.clone(), done.clone());
        std::thread::spawn(move || watch(&tmp, &done))
    });
    let mut cmd = gate_command(scene, run, spec);
    cmd.args(["check", "--json", "--timeout", TIMEOUT_FLAG, "--haproxy"]).arg(haproxy());
    cmd.args(run.flags()).args(&spec.args).arg(&scene.render).stdin(Stdio::null());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("start rendergate check");
    let (out, err) = (drain(child.stdout.take().unwrap()), drain(child.stderr.take().unwrap()));
    let status = wait_guarded(&mut child, Duration::from_secs(30));
    let wall = started.elapsed();
    done.store(true, Ordering::SeqCst);
    let observed = observer.map(|t| t.join().unwrap()).unwrap_or_default();
    let (stdout, stderr) = (drained(out), drained(err));
    let verdict: Option<Value> = stdout.lines().find_map(|l| serde_json::from_str(l).ok());
    let kind = match (status.and_then(|s| s.code()), &verdict) {
        (None, _) => Err(format!("rendergate did not exit normally: {status:?}")),
        (Some(code), Some(v)) => verdict_kind(v).and_then(|k| {
            let want = match k {
                Kind::Pass => 0,
                Kind::Refused => 1,
                _ => 2,
            };
            if code == want {
                Ok(k)
            } else {
                Err(format!("exit {code} does not match the verdict {k:?}"))
            }
        }),
        (Some(2), None) if stdout.trim().is_empty() => Ok(Kind::NoVerdict),
        (Some(code), None) => Err(format!("exit {code} without a verdict object")),
    };
    let message = match &verdict {
        Some(v) => v["message"].as_str().unwrap_or_default().to_owned(),
        None => stderr.clone(),
    };
    Outcome { kind, observed, message, stdout, stderr, wall, status }
}

fn verdict_kind(v: &Value) -> Result<Kind, String> {
    if v["type"] != "verdict" {
        return Err(format!("not a verdict: {v}"));
    }
    match (v["ok"].as_bool(), v["refused"].as_bool()) {
        (Some(true), Some(false)) => Ok(Kind::Pass),
        (Some(false), Some(true)) => Ok(Kind::Refused),
        (Some(false), Some(false)) => Ok(Kind::CouldNotRun),
        _ => Err(format!("ok/refused inconsistent: {v}")),
    }
}

/// `rendergate serve`, one `rendered` line, its verdict, end of input.
fn run_serve(scene: &Scene, spec: &Spec, run: Run) -> Outcome {
    let mut cmd = gate_command(scene, run, spec);
    cmd.args(["serve", "--check-interval", "0s", "--check-timeout", TIMEOUT_FLAG, "--haproxy"])
        .arg(haproxy());
    cmd.args(run.flags()).args(&spec.args).stdin(Stdio::piped());
    let mut child = cmd.spawn().expect("start rendergate serve");
    let pid = child.id();
    let err = drain(child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let files: Vec<Value> = spec
        .files
        .iter()
        .map(|f| json!({"kind": f.kind, "path": f.path, "content": f.content}))
        .collect();
    let config = spec.config.replace("{GATE_PID}", &pid.to_string());
    let line = json!({"type": "rendered", "plan": "plan-1", "render": "r-1", "config": config, "files": files});
    let mut stdin = child.stdin.take().unwrap();
    let started = Instant::now();
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    let mut lines = Vec::new();
    let mut verdict = None;
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(30).saturating_sub(started.elapsed())) {
        let v: Option<Value> = serde_json::from_str(&l).ok();
        lines.push(l);
        if let Some(v) = v.filter(|v| v["type"] == "verdict") {
            verdict = Some(v);
            break;
        }
    }
    let wall = started.elapsed();
    drop(stdin);
    let status = wait_guarded(&mut child, Duration::from_secs(20));
    drop(reader); // it ends with the output; waited for through the channel below
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(l) => lines.push(l),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                lines.push("<the gate's output never ended: something still holds it open>".into());
                break;
            }
        }
    }
    let stderr = drained(err);
    let kind = match (&verdict, status) {
        (None, _) => Err("no verdict within 30 s".to_owned()),
        (Some(_), Some(s)) if !s.success() => Err(format!("serve ended badly: {s:?}")),
        (Some(_), None) => Err("serve did not end at end of input".to_owned()),
        (Some(v), Some(_)) => verdict_kind(v),
    };
    let message =
        verdict.as_ref().and_then(|v| v["message"].as_str()).unwrap_or_default().to_owned();
    Outcome { kind, observed: vec![], message, stdout: lines.join("\n"), stderr, wall, status }
}

pub fn run_spec(scene: &Scene, spec: &mut Spec, run: Run) -> Outcome {
    match spec.via {
        Via::Check => run_check(scene, spec, run),
        Via::Serve => run_serve(scene, spec, run),
    }
}

// ---------------------------------------------------------------------------
// What is left behind

/// Processes tied to the scene: a command line carrying its tag, or a
/// working directory inside it (HAProxy runs in the check directory, which
/// is under the scene's TMPDIR). Zombies are dead and do not count.
pub fn leftovers(scene: &Scene) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let dir = entry.path();
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else { continue };
        if status.lines().any(|l| l.starts_with("State:") && l.contains('Z')) {
            continue;
        }
        let cmdline = std::fs::read(dir.join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "));
        let cmdline = cmdline.unwrap_or_default();
        let cwd = std::fs::read_link(dir.join("cwd")).ok();
        let in_scene = cwd.as_ref().is_some_and(|c| c.starts_with(&scene.root));
        if cmdline.contains(&scene.tag) || in_scene {
            found.push((pid, format!("pid {pid} [{}] cwd {:?}", cmdline.trim(), cwd)));
        }
    }
    found
}

/// Kills what the scene's case left running (they are our own descendants).
fn kill_leftovers(scene: &Scene) {
    for (pid, _) in leftovers(scene) {
        // SAFETY: signalling a process this case started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Every entry under `dir`, recursively.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut all = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                all.extend(tree(&p));
            }
            all.push(p);
        }
    }
    all
}

// ---------------------------------------------------------------------------
// The checks of every case

/// Every check that holds for a sandboxed run, as a list of failures.
pub fn unmet_checks(scene: &Scene, spec: &Spec, outcome: &Outcome) -> Vec<String> {
    let mut fails = outcome.observed.clone();
    if outcome.all().contains("<the gate's output never ended") {
        fails.push("the gate's stdout or stderr stayed open after it exited".into());
    }
    // 1. The verdict kind (exit code and JSON agree: `kind` is an error otherwise).
    match &outcome.kind {
        Ok(k) if spec.expect.contains(k) => {}
        Ok(k) => fails.push(format!("verdict {k:?}, expected one of {:?}", spec.expect)),
        Err(e) => fails.push(format!("no proper verdict: {e}")),
    }
    // 2. No secret in anything the gate printed.
    let all = outcome.all();
    let mut forbidden = vec![scene.secret.clone(), scene.token.clone()];
    forbidden.extend(passwd_first_line().map(str::to_owned));
    forbidden.extend(spec.forbidden.iter().cloned());
    for f in &forbidden {
        if all.contains(f.as_str()) {
            fails.push(format!("the output shows {f:?}"));
        }
    }
    // The check directory is shown relative, never as a host path.
    let tmp = scene.tmp.to_string_lossy();
    if all.contains(tmp.as_ref()) {
        fails.push(format!("the output names the check directory's host path ({tmp})"));
    }
    if outcome.message.len() > MESSAGE_LIMIT {
        fails.push(format!("the message is {} bytes, over {MESSAGE_LIMIT}", outcome.message.len()));
    }
    let lower = outcome.message.to_lowercase();
    for m in &spec.must_contain {
        if !m.split('|').any(|alt| lower.contains(&alt.to_lowercase())) {
            fails.push(format!("the message does not say {m:?}"));
        }
    }
    // 3. No file created outside the directory.
    let extra = scene.unplanted();
    if !extra.is_empty() {
        fails.push(format!("created next to the secret: {extra:?}"));
    }
    for w in &spec.watch {
        if std::fs::symlink_metadata(w).is_ok() {
            fails.push(format!("created: {}", w.display()));
        }
    }
    let left = tree(&scene.tmp);
    if !left.is_empty() {
        fails.push(format!("the gate's TMPDIR is not empty afterwards: {left:?}"));
    }
    // 4. No process left behind.
    let procs = leftovers(scene);
    if !procs.is_empty() {
        fails.push(format!("processes left behind: {procs:?}"));
    }
    // 5. Within the deadline.
    if outcome.wall > TIMEOUT + SLACK {
        fails.push(format!("took {:?}, over the {TIMEOUT:?} deadline + {SLACK:?}", outcome.wall));
    }
    fails
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes in all]", &text[..end], text.len())
}

/// Builds the case on a fresh scene, runs it sandboxed (or as `run` says),
/// and fails the test with every broken expectation.
pub fn hostile(name: &str, build: Build, run: Run) {
    if let Err(e) = attempt(name, build, run, |_| {}) {
        panic!("{e}");
    }
}

/// As [`hostile`], with the spec adjusted first; the failures as an error.
pub fn attempt(
    name: &str,
    build: Build,
    run: Run,
    adjust: impl FnOnce(&mut Spec),
) -> Result<(), String> {
    let mut scene = Scene::new();
    let mut spec = build(&mut scene);
    if let Some(why) = &spec.skip {
        skip(name, why);
        return Ok(());
    }
    adjust(&mut spec);
    let outcome = run_spec(&scene, &mut spec, run);
    if std::env::var_os(VERBOSE_VAR).is_some() {
        eprintln!(
            "== {name} ({run:?}): {:?} in {} ms\n{}\n",
            outcome.kind,
            outcome.wall.as_millis(),
            clip(&outcome.message, 1500)
        );
    }
    let mut fails = unmet_checks(&scene, &spec, &outcome);
    if let Some(extra) = spec.extra.take() {
        fails.extend(extra(&outcome));
    }
    if fails.is_empty() {
        return Ok(());
    }
    Err(format!(
        "hostile case {name} ({run:?}):\n  - {}\nkind {:?} in {:?}; message:\n{}\nstderr:\n{}",
        fails.join("\n  - "),
        outcome.kind,
        outcome.wall,
        clip(&outcome.message, 3000),
        clip(&outcome.stderr, 2000),
    ))
}

/// One piece of work for [`parallel`].
pub type Job<'a, T> = Box<dyn FnOnce() -> T + Send + 'a>;

/// Runs `jobs` on at most `width` threads at once; their results in order.
pub fn parallel<T: Send>(width: usize, jobs: Vec<Job<'_, T>>) -> Vec<T> {
    let jobs: Vec<_> = jobs.into_iter().map(|j| std::sync::Mutex::new(Some(j))).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<T>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..width.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = jobs.get(i).and_then(|j| j.lock().unwrap().take()) else {
                        break;
                    };
                    let r = job();
                    *results[i].lock().unwrap() = Some(r);
                }
            });
        }
    });
    results.into_iter().map(|r| r.into_inner().unwrap().expect("every job ran")).collect()
}

/// Whether each leak of the fixture happened in an unsandboxed run; `None`
/// for a case that is skipped here.
pub fn canary(name: &str, build: Build) -> Option<Vec<(Leak, bool)>> {
    let mut scene = Scene::new();
    let mut spec = build(&mut scene);
    if let Some(why) = &spec.skip {
        skip(name, why);
        return None;
    }
    let mut args = std::mem::take(&mut spec.canary_args);
    args.append(&mut spec.args);
    spec.args = args;
    let outcome = run_spec(&scene, &mut spec, UNSANDBOXED);
    let all = outcome.all();
    let procs = leftovers(&scene);
    let seen = spec
        .leaks
        .iter()
        .map(|leak| {
            let happened = match leak {
                Leak::Marker => all.contains(&scene.secret) || all.contains(&scene.token),
                Leak::Text(t) => all.contains(t.as_str()),
                Leak::Created(p) => std::fs::symlink_metadata(p).is_ok(),
                Leak::Passes => outcome.kind == Ok(Kind::Pass),
                Leak::Process => !procs.is_empty(),
                Leak::Blocks => outcome.wall >= TIMEOUT && outcome.kind == Ok(Kind::CouldNotRun),
            };
            (leak.clone(), happened)
        })
        .collect();
    Some(seen)
}
