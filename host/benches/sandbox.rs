//! What one check costs, sandboxed and not, against bare `haproxy -c` and
//! against bubblewrap running the same check, measured in one run.
//!
//! `cargo bench -p rendergate --bench sandbox` (add `-- --quick` for fewer rounds).
//! Each variant judges examples/render (a map file, `default-path origin`);
//! the `@system-ca` variants add a `ca-file @system-ca` server so the system
//! CA store is loaded in every variant alike.

use rendergate::check::Checker;
use rendergate::check::sandbox::{Mode, SandboxOptions};
use rendergate::{FileKind, HaproxyChecker, HaproxyOptions, Render, RenderFile};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn render(with_ca: bool) -> Render {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/render");
    let mut config = std::fs::read_to_string(dir.join("haproxy.cfg")).unwrap();
    if with_ca {
        config.push_str(
            "\nbackend tls\n    server s1 127.0.0.1:8443 ssl verify required ca-file @system-ca\n",
        );
    }
    let map = std::fs::read(dir.join("maps/hosts.map")).unwrap();
    Render::new(
        "bench",
        "r",
        config,
        vec![RenderFile { kind: FileKind::Map, path: "maps/hosts.map".into(), content: map }],
    )
}

/// The same render laid out once on disk, for the bare and bwrap runs. The
/// config points `default-path origin` at the directory itself.
fn laid_out(render: &Render) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = std::str::from_utf8(render.config()).expect("the sample config is text").replace(
        "default-path origin /etc/haproxy",
        &format!("default-path origin {}", dir.path().display()),
    );
    std::fs::write(dir.path().join("haproxy.cfg"), config).unwrap();
    std::fs::create_dir(dir.path().join("maps")).unwrap();
    std::fs::write(dir.path().join("maps/hosts.map"), &render.files()[0].content).unwrap();
    dir
}

fn median(rounds: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[rounds / 2]
}

fn run(cmd: &mut Command) {
    let status =
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap();
    assert!(status.success(), "{cmd:?} failed");
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 10 } else { 40 };
    let haproxy = which("haproxy").expect("haproxy on PATH");
    let bwrap = which("bwrap");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let checker = |mode| {
        HaproxyChecker::new(HaproxyOptions {
            sandbox: SandboxOptions { mode, ..SandboxOptions::default() },
            ..HaproxyOptions::default()
        })
    };
    let (plain, strict) = (checker(Mode::Off), checker(Mode::Strict));

    println!("## One check of examples/render, median of {rounds} (ms)\n");
    println!("| variant | no CA store | `@system-ca` |");
    println!("|---|---:|---:|");
    let mut rows: Vec<(&str, Vec<Duration>)> = vec![];
    for with_ca in [false, true] {
        let r = render(with_ca);
        let dir = laid_out(&r);
        let bare = median(rounds, || {
            run(Command::new(&haproxy)
                .args(["-dr", "-c", "-f", "haproxy.cfg"])
                .current_dir(dir.path()))
        });
        let check = |c: &HaproxyChecker| {
            median(rounds, || {
                let outcome = runtime
                    .block_on(c.check(&r, tokio::time::Instant::now() + Duration::from_secs(30)))
                    .outcome;
                assert_eq!(outcome.label(), "pass", "{outcome:?}");
            })
        };
        let off = check(&plain);
        let sandboxed = check(&strict);
        let bw = bwrap.as_ref().map(|bwrap| {
            let d = dir.path().to_str().unwrap().to_owned();
            median(rounds, || {
                run(Command::new(bwrap)
                    .args([
                        "--ro-bind",
                        "/usr",
                        "/usr",
                        "--ro-bind",
                        "/lib",
                        "/lib",
                        "--ro-bind",
                        "/lib64",
                        "/lib64",
                    ])
                    .args(["--ro-bind", "/etc", "/etc", "--bind", &d, &d, "--chdir", &d])
                    .args(["--unshare-all", "--die-with-parent", "--clearenv", "--new-session"])
                    .arg(&haproxy)
                    .args(["-dr", "-c", "-f", "haproxy.cfg"]))
            })
        });
        let all = [Some(bare), Some(off), Some(sandboxed), bw];
        for (i, (name, d)) in [
            "bare `haproxy -c` (baseline)",
            "checker, `--no-sandbox`",
            "checker, sandbox strict",
            "bwrap + `haproxy -c`",
        ]
        .into_iter()
        .zip(all)
        .enumerate()
        {
            if let Some(d) = d {
                match rows.get_mut(i) {
                    Some(row) => row.1.push(d),
                    None => rows.push((name, vec![d])),
                }
            }
        }
    }
    for (name, times) in &rows {
        println!("| {name} | {} | {} |", ms(times[0]), times.get(1).map_or("—".into(), |d| ms(*d)));
    }
    let (bare, strict) = (&rows[0].1, &rows[2].1);
    println!(
        "\nSandbox strict vs bare, CA store loaded in both: {:+.2} ms ({:.2}x).",
        (strict[1].as_secs_f64() - bare[1].as_secs_f64()) * 1e3,
        strict[1].as_secs_f64() / bare[1].as_secs_f64()
    );
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}
