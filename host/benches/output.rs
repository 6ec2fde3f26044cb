//! Reading HAProxy's output as a stream: what a warning flood costs the gate.
//!
//! Renders of N backends without timeouts (HAProxy prints one four-line
//! `[WARNING]` for each) and one `use_backend` naming a missing backend, sized
//! so HAProxy prints about 64 KiB, 1 MiB and 8 MiB. For each: bare
//! `haproxy -dr -c` wall time and exit status, `rendergate check` wall time,
//! its verdict (it must be a refusal: the alert is in the flood), and the
//! gate's own peak RSS (VmHWM of the `rendergate` process, sampled until it
//! exits; HAProxy's memory is its own process's). The streaming reader keeps
//! memory flat: the 8 MiB row must cost no more than the 64 KiB one.
//!
//! `cargo bench -p rendergate --bench output` (add `-- --quick` for fewer runs).
//! Prints a Markdown table.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rendergate");

fn haproxy() -> String {
    std::env::var("RENDERGATE_TEST_HAPROXY").unwrap_or_else(|_| "haproxy".into())
}

fn render(dir: &Path, backends: usize) {
    let mut cfg = String::from(
        "global\ndefaults\n  mode http\nfrontend f\n  bind 127.0.0.1:18080\n  timeout client 1s\n  use_backend missing-backend if { path /x }\n  default_backend b0\n",
    );
    for i in 0..backends {
        cfg.push_str(&format!("backend b{i}\n  server s 127.0.0.1:80\n"));
    }
    std::fs::write(dir.join("haproxy.cfg"), cfg).unwrap();
}

/// Bare `haproxy -dr -c`: exit status, bytes printed, wall ms.
fn bare(dir: &Path) -> (i32, usize, f64) {
    let t = Instant::now();
    let out = Command::new(haproxy())
        .args(["-dr", "-c", "-f", "haproxy.cfg"])
        .current_dir(dir)
        .output()
        .unwrap();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    (out.status.code().unwrap_or(-1), out.stdout.len() + out.stderr.len(), ms)
}

/// `rendergate check`: exit status (1 = refused), wall ms, peak RSS in KiB.
fn gate(dir: &Path) -> (i32, f64, u64) {
    let t = Instant::now();
    let mut child = Command::new(BIN)
        .args(["check", "--haproxy", &haproxy(), "--timeout", "120s"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if let Ok(text) = std::fs::read_to_string(&status_path)
            && let Some(kib) = text.lines().find_map(|l| l.strip_prefix("VmHWM:"))
        {
            peak = peak.max(kib.trim().trim_end_matches("kB").trim().parse().unwrap_or(0));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    (status.code().unwrap_or(-1), t.elapsed().as_secs_f64() * 1e3, peak)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[xs.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { 9 };
    println!("## Warning floods: bare `haproxy -dr -c` vs `rendergate check` (sandbox strict)\n");
    println!(
        "| HAProxy output | backends | bare exit | bare ms (median) | gate verdict | gate ms (median) | gate peak RSS (max of {runs}) |"
    );
    println!("|---:|---:|---:|---:|---|---:|---:|");
    let mut peaks = Vec::new();
    for backends in [200, 3_200, 25_600] {
        let dir = tempfile::tempdir().unwrap();
        render(dir.path(), backends);
        let (mut bare_ms, mut gate_ms, mut peak) = (Vec::new(), Vec::new(), 0);
        let (mut exit, mut bytes, mut verdict) = (0, 0, 0);
        for _ in 0..runs {
            let b = bare(dir.path());
            (exit, bytes) = (b.0, b.1);
            bare_ms.push(b.2);
            let g = gate(dir.path());
            verdict = g.0;
            gate_ms.push(g.1);
            peak = peak.max(g.2);
        }
        assert_eq!(exit, 1, "bare haproxy must refuse the flood render");
        assert_eq!(
            verdict, 1,
            "the gate must refuse what bare haproxy refuses ({backends} backends)"
        );
        peaks.push(peak);
        println!(
            "| {:.0} KiB | {backends} | {exit} | {:.1} | refused | {:.1} | {:.1} MiB |",
            bytes as f64 / 1024.0,
            median(bare_ms),
            median(gate_ms),
            peak as f64 / 1024.0
        );
    }
    println!(
        "\nPeak RSS, largest flood / smallest: {:.3}x",
        *peaks.last().unwrap() as f64 / peaks[0] as f64
    );
}
