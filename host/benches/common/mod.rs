//! What the benchmarks against bare `haproxy -c` share: the haproxy they
//! run, the configs they judge, bare's run, and their arguments.

#![allow(dead_code)] // each benchmark uses its own part

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `RENDERGATE_TEST_HAPROXY`, else `haproxy` on PATH, else /usr/sbin/haproxy.
pub fn haproxy() -> String {
    if let Ok(path) = std::env::var("RENDERGATE_TEST_HAPROXY") {
        return path;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("haproxy"))
        .find(|p| p.is_file());
    on_path.map_or_else(|| "/usr/sbin/haproxy".into(), |p| p.display().to_string())
}

/// `backends` backends of one server each behind one frontend; `refused`
/// adds a `use_backend` HAProxy refuses (the last line, so the whole config
/// is parsed); `maps` map files the frontend reads ([`map_files`]). `round`
/// makes each round's content new, so no verdict comes from memory.
pub fn config(backends: usize, refused: bool, round: usize, maps: usize) -> String {
    let mut cfg = format!(
        "# round {round}\nglobal\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n\
frontend f\n  bind 127.0.0.1:18080\n  default_backend b0\n"
    );
    for i in 0..maps {
        cfg.push_str(&format!(
            "  http-request set-header x-m{i} %[req.hdr(host),map(maps/m{i}.map)]\n"
        ));
    }
    if refused {
        cfg.push_str("  use_backend nope if { path /nope }\n");
    }
    for i in 0..backends {
        cfg.push_str(&format!("backend b{i}\n  server s 127.0.0.1:{}\n", 10_000 + i % 50_000));
    }
    cfg
}

/// The `maps` map files a [`config`] of `round` reads: paths relative to
/// its directory, and contents.
pub fn map_files(maps: usize, round: usize) -> Vec<(String, String)> {
    (0..maps).map(|i| (format!("maps/m{i}.map"), format!("host{round}.example b{i}\n"))).collect()
}

/// Bare haproxy over the same config and files, laid out on their own.
pub fn bare(config: &str, files: &[(String, String)]) -> (Duration, bool) {
    let (took, status) = timed(config, files, |dir| {
        let mut command = Command::new(haproxy());
        command.args(["-dr", "-c", "-f", "haproxy.cfg"]).current_dir(dir).env_clear();
        command
    });
    (took, matches!(status.code(), Some(0 | 2)))
}

/// `config` laid out on its own as `haproxy.cfg`, with `files`, and how
/// long the command `over` makes for its directory takes, output thrown away.
pub fn timed(
    config: &str,
    files: &[(String, String)],
    over: impl FnOnce(&std::path::Path) -> Command,
) -> (Duration, std::process::ExitStatus) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("haproxy.cfg"), config).unwrap();
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let mut command = over(dir.path());
    let started = Instant::now();
    let status =
        command.stdout(Stdio::null()).stderr(Stdio::null()).status().expect("run the command");
    (started.elapsed(), status)
}

/// HAProxy's own run in a gate's check, from the word given to its exit,
/// by the `rendergate::timing` trace's timestamps (its last check in
/// `trace`; `2026-12-06T10:41:15.209798Z TRACE …`: seconds of the day
/// suffice).
pub fn haproxy_run(trace: &str) -> Duration {
    let at = |event: &str| -> f64 {
        let line = trace.lines().rfind(|l| l.ends_with(event)).expect("the timing trace");
        let time = &line[line.find('T').unwrap() + 1..line.find('Z').unwrap()];
        let mut parts = time.split(':').map(|p| p.parse::<f64>().unwrap());
        let (h, m, s) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        h * 3600.0 + m * 60.0 + s
    };
    Duration::from_secs_f64((at("haproxy exited") - at("word given")).max(0.0))
}

pub fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `--rounds N` (`--quick`: 11; else 31) and `--backends 100,1000` (else
/// `default`).
pub fn rounds_and_sizes(default: &[usize]) -> (usize, Vec<usize>) {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let asked =
        args.iter().position(|a| a == "--rounds").and_then(|i| args.get(i + 1)?.parse().ok());
    let rounds = asked.unwrap_or(if quick { 11 } else { 31 });
    let sizes: Vec<usize> = args
        .iter()
        .position(|a| a == "--backends")
        .and_then(|i| args.get(i + 1))
        .map(|list| list.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec());
    (rounds, sizes)
}
