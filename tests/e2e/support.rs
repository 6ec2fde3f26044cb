//! Starting the binary and talking NDJSON to it.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_rendergate");

/// The haproxy the tests run.
pub fn haproxy() -> String {
    std::env::var("RENDERGATE_TEST_HAPROXY").unwrap_or_else(|_| "haproxy".into())
}

/// The test haproxy's absolute path (for copies and wrappers of it).
pub fn real_haproxy() -> PathBuf {
    let out = Command::new("/bin/sh")
        .args(["-c", r#"command -v "$1""#, "sh", &haproxy()])
        .output()
        .unwrap();
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(path.is_absolute(), "no haproxy found: {}", path.display());
    path
}

/// The sample render in `examples/render`.
pub fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/render")
}

/// A copy of the sample render in a fresh directory, with `config` as its haproxy.cfg.
pub fn render_dir(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("maps")).unwrap();
    std::fs::copy(sample_dir().join("maps/hosts.map"), dir.path().join("maps/hosts.map")).unwrap();
    std::fs::write(dir.path().join("haproxy.cfg"), config).unwrap();
    dir
}

/// Everything under `dir`, depth first. What vanishes while it is walked
/// (a check directory being removed right after its verdict) is left out;
/// `dir` itself must be there.
pub fn tree(dir: &Path) -> Vec<PathBuf> {
    assert!(dir.is_dir(), "{} is not a directory", dir.display());
    walk(dir)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.is_dir() {
            all.extend(walk(&path));
        }
        all.push(path);
    }
    all
}

pub fn sample_config() -> String {
    std::fs::read_to_string(sample_dir().join("haproxy.cfg")).unwrap()
}

/// The sample for a gate whose render does not lie at `/etc/haproxy`
/// (`--no-sandbox`'s fresh directory, a `--config-dir` elsewhere): there
/// `default-path origin /etc/haproxy` would send HAProxy 3.x, which resolves
/// a dynamic `use_backend`'s map after parsing, from the default path, to
/// the host's own directory.
pub fn sample_config_anywhere() -> String {
    let config = sample_config();
    let without = config.replace("    default-path origin /etc/haproxy\n", "");
    assert_ne!(without, config, "the sample no longer sets default-path");
    without
}

pub fn sample_files() -> Value {
    let map = std::fs::read_to_string(sample_dir().join("maps/hosts.map")).unwrap();
    json!([{"kind": "map", "path": "maps/hosts.map", "content": map}])
}

/// The sample config with one line HAProxy refuses, after `bind :8080`.
pub fn broken_config() -> String {
    sample_config().replace("    bind :8080\n", "    bind :8080\n    http-request bogus-action\n")
}

pub fn rendered(plan: &str, render: &str, config: &str) -> Value {
    json!({"type": "rendered", "plan": plan, "render": render, "config": config, "files": sample_files()})
}

pub fn applied(pod: &str, render: &str, plan: &str, running: &str, baseline: &str) -> Value {
    json!({"type": "applied", "pod": pod, "render": render, "plan": plan,
           "running_plan": running, "baseline_plan": baseline})
}

/// Runs `rendergate ARGS` to completion with `stdin` as input.
pub fn run(args: &[&str], stdin: &str, envs: &[(&str, &Path)]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (*k, *v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rendergate");
    // A command that refuses its arguments exits without reading its input:
    // the pipe is then closed, which is not the test's failure.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            panic!("write to rendergate's stdin: {e}")
        }
        _ => {}
    }
    child.wait_with_output().unwrap()
}

/// The output lines, without `serve`'s first line, `hello` (its own tests
/// read it: hello.rs).
pub fn lines(output: &Output) -> Vec<Value> {
    let mut lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    if lines.first().is_some_and(|l| l["type"] == "hello") {
        lines.remove(0);
    }
    lines
}

/// `rendergate serve --check-interval 0s [--haproxy H] EXTRA...`, with
/// stdin and stdout piped (the test haproxy unless EXTRA names one).
pub fn serve_command(extra: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(["serve", "--check-interval", "0s"]);
    if !extra.contains(&"--haproxy") {
        command.args(["--haproxy", &haproxy()]);
    }
    command.args(extra).stdin(Stdio::piped()).stdout(Stdio::piped());
    command
}

/// A running `rendergate serve`, fed line by line.
pub struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// The first line `serve` wrote, before any input.
    pub hello: Value,
}

impl Serve {
    pub fn start(extra: &[&str]) -> Serve {
        Serve::spawn(serve_command(extra))
    }

    /// As [`Serve::start`], from a command already made ([`serve_command`]).
    pub fn spawn(mut command: Command) -> Serve {
        let mut child = command.stderr(Stdio::inherit()).spawn().expect("start rendergate serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut serve = Serve { stdin: child.stdin.take(), child, lines, hello: Value::Null };
        serve.hello = serve.next();
        assert_eq!(serve.hello["type"], "hello", "serve's first line: {}", serve.hello);
        serve
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The input pipe, for lines too big to build in memory first.
    pub fn stdin(&mut self) -> &mut ChildStdin {
        self.stdin.as_mut().expect("input still open")
    }

    pub fn send(&mut self, line: &Value) {
        self.send_raw(&line.to_string());
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("input still open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next output line; fails the test after 20 s.
    pub fn next(&mut self) -> Value {
        let line =
            self.lines.recv_timeout(Duration::from_secs(20)).expect("an output line within 20 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
    }

    /// Output lines up to and including the next line of `kind`.
    pub fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut seen = vec![];
        loop {
            let line = self.next();
            let done = line["type"] == kind;
            seen.push(line);
            if done {
                return seen;
            }
        }
    }

    /// Closes the input; returns the remaining output lines and the exit status.
    pub fn finish(mut self) -> (Vec<Value>, std::process::ExitStatus) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        let rest = self.lines.iter().map(|l| serde_json::from_str(&l).unwrap()).collect();
        (rest, status)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
