//! Bounded work on renders (docs/behaviour.md, "Render limits"), through the
//! real binary: the render limits of `serve` and `check DIR`, preparing the
//! check directory under the timeout and off the event loop, and a refusal
//! of a big config in memory bounded by it.

use crate::support::*;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What one run of the binary did: exit status, output, its peak RSS, and how long it took.
struct Measured {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// Peak resident set (KiB) of the binary, or of a haproxy it waited for
    /// if that was larger.
    max_rss_kib: u64,
    wall: Duration,
}

/// Runs `rendergate ARGS` to completion with empty input and `TMPDIR` as
/// given, under GNU time. (The peak RSS of a child spawned from this test
/// process starts at this process's own peak: Linux folds the parent's
/// high-water mark in at exec. GNU time's child is forked from GNU time.)
fn measured(args: &[&str], tmpdir: &Path) -> Measured {
    const TIME: &str = "/usr/bin/time";
    assert!(
        Path::new(TIME).exists(),
        "these tests measure peak RSS with GNU time ({TIME}); install it"
    );
    let report = tempfile::NamedTempFile::new().unwrap();
    let started = Instant::now();
    let out = Command::new(TIME)
        .args(["-f", "%M", "-o"])
        .arg(report.path())
        .arg(BIN)
        .args(args)
        .env("TMPDIR", tmpdir)
        .stdin(Stdio::null())
        .output()
        .expect("start rendergate under GNU time");
    let wall = started.elapsed();
    let report = std::fs::read_to_string(report.path()).unwrap();
    let max_rss_kib = report.lines().last().and_then(|l| l.trim().parse().ok()).expect(&report);
    Measured {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        max_rss_kib,
        wall,
    }
}

#[test]
fn serve_answers_a_render_past_a_limit_with_could_not_run_naming_it() {
    let work = tempfile::tempdir().unwrap();
    let mut many = rendered("plan-1", "r-1", &sample_config());
    many["files"] = json!([
        {"kind": "map", "path": "maps/hosts.map", "content": "a b\n"},
        {"kind": "map", "path": "maps/b.map", "content": "a b\n"},
        {"kind": "map", "path": "maps/c.map", "content": "a b\n"},
    ]);
    let mut big = rendered("plan-2", "r-2", &sample_config());
    big["files"] =
        json!([{"kind": "map", "path": "maps/hosts.map", "content": "x".repeat(70_000)}]);
    let mut deep = rendered("plan-3", "r-3", &sample_config());
    deep["files"] = json!([{"kind": "general", "path": vec!["d"; 40].join("/"), "content": ""}]);
    // one gate per render: a burst would leave the superseded ones unchecked
    let message = |line: &serde_json::Value| {
        let args = [
            "serve",
            "--haproxy",
            &haproxy(),
            "--max-render-files",
            "2",
            "--max-render-size",
            "64KiB",
        ];
        let out = run(&args, &format!("{line}\n"), &[("TMPDIR", work.path())]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v = lines(&out).into_iter().find(|l| l["type"] == "verdict").expect("a verdict");
        assert_eq!((v["ok"].as_bool(), v["refused"].as_bool()), (Some(false), Some(false)), "{v}");
        v["message"].as_str().unwrap().to_owned()
    };
    assert_eq!(message(&many), "the render has 3 files, more than --max-render-files 2");
    let bytes = sample_config().len() + 70_000;
    assert_eq!(
        message(&big),
        format!("the render has {bytes} bytes, more than --max-render-size 64KiB")
    );
    let deep = message(&deep);
    assert!(
        deep.ends_with("lands 40 components deep, more than the 32 a render path may have"),
        "{deep}"
    );
    assert!(tree(work.path()).is_empty(), "{:?}", tree(work.path()));
}

#[test]
fn check_refuses_a_directory_past_a_limit_with_exit_2_naming_it() {
    let work = tempfile::tempdir().unwrap();
    let dir = render_dir(&sample_config());
    std::fs::write(dir.path().join("maps/b.map"), "a b\n").unwrap();
    let path = dir.path().to_str().unwrap();
    let haproxy = haproxy();
    let out =
        measured(&["check", "--haproxy", &haproxy, "--max-render-files", "1", path], work.path());
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let expected = format!(
        "error: {path}/maps: the render has at least 2 files, more than --max-render-files 1"
    );
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
    // raised by the flag, it passes
    let out =
        measured(&["check", "--haproxy", &haproxy, "--max-render-files", "2", path], work.path());
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
}

#[test]
fn check_refuses_a_6_gib_sparse_file_by_its_size_without_reading_it() {
    let work = tempfile::tempdir().unwrap();
    let dir = render_dir(&sample_config());
    let sparse = std::fs::File::create(dir.path().join("maps/huge.map")).unwrap();
    sparse.set_len(6 << 30).unwrap();
    let path = dir.path().to_str().unwrap();
    let out = measured(&["check", "--haproxy", &haproxy(), path], work.path());
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("error: {path}/maps/huge.map: the render has at least "))
            && out.stderr.contains(" bytes, more than --max-render-size 128MiB"),
        "{}",
        out.stderr
    );
    // Reading it would take seconds and gigabytes.
    assert!(out.wall < Duration::from_secs(5), "{:?}", out.wall);
    assert!(out.max_rss_kib < 64 * 1024, "peak RSS {} KiB", out.max_rss_kib);
    assert!(tree(work.path()).is_empty(), "{:?}", tree(work.path()));
}

#[test]
fn a_refused_config_of_many_lines_costs_memory_proportional_to_it_not_16x() {
    // 8 MiB of empty lines before the line HAProxy refuses: the refusal
    // quotes the lines around it. An index of every line cost 16 bytes a
    // line, 128 MiB here on top of the config, its checked copy and the
    // gate itself (30 MiB together; 160 MiB with the index).
    let work = tempfile::tempdir().unwrap();
    let config = format!("{}{}    bogus-keyword\n", sample_config(), "\n".repeat(8 << 20));
    let dir = render_dir(&config);
    let out = measured(
        &["check", "--haproxy", &haproxy(), "--timeout", "120s", dir.path().to_str().unwrap()],
        work.path(),
    );
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    let line = config.lines().count();
    assert!(out.stdout.contains(&format!("  → {line}      bogus-keyword")), "{}", out.stdout);
    assert!(out.stdout.len() < 8 * 1024, "{}", out.stdout.len());
    assert!(out.max_rss_kib < 64 * 1024, "peak RSS {} KiB", out.max_rss_kib);
}

#[test]
fn a_huge_render_times_out_while_preparing_and_the_loop_answers_meanwhile() {
    // 1,000,000 files, allowed by the flag: writing them takes far longer
    // than the 2 s timeout. The check gives up at the timeout, the event
    // loop answers while the files are written, and nothing is left behind.
    let work = tempfile::tempdir().unwrap();
    let mut child = serve_command(&[
        "--check-timeout",
        "2s",
        "--max-render-files",
        "2000000",
        "--log-level",
        "debug",
    ])
    .env("TMPDIR", work.path())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start rendergate serve");
    let (started_tx, started_rx) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("check started") {
                let _ = started_tx.send(Instant::now());
            }
        }
    });
    let (lines_tx, outputs) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        // `hello` first, before any input: not one of the answers timed here.
        for line in stdout.lines().map_while(Result::ok).skip(1) {
            let _ = lines_tx
                .send((Instant::now(), serde_json::from_str::<serde_json::Value>(&line).unwrap()));
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    let config = serde_json::to_string(&sample_config()).unwrap();
    let mut line = format!(
        r#"{{"type":"rendered","plan":"plan-1","render":"r-1","config":{config},"files":["#
    );
    for n in 0..1_000_000 {
        let comma = if n == 0 { "" } else { "," };
        line.push_str(&format!(
            r#"{comma}{{"kind":"general","path":"d{}/f{n}","content":""}}"#,
            n % 100
        ));
    }
    line.push_str("]}\n");
    stdin.write_all(line.as_bytes()).unwrap();
    stdin.flush().unwrap();
    drop(line);

    let check_started =
        started_rx.recv_timeout(Duration::from_secs(120)).expect("the check starts");
    // the loop answers a bad line at once while the directory is prepared
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    stdin.write_all(b"not json\n").unwrap();
    stdin.flush().unwrap();
    let (at, error) = outputs.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(error["type"], "error", "{error}");
    assert!(at - sent < Duration::from_secs(1), "the error took {:?}", at - sent);

    let (at, verdict) = outputs.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(
        (verdict["type"].as_str(), verdict["ok"].as_bool(), verdict["refused"].as_bool()),
        (Some("verdict"), Some(false), Some(false)),
        "{verdict}"
    );
    let message = verdict["message"].as_str().unwrap();
    // the gate's own bound on the check, or the checker's, whichever spoke first
    assert!(message.contains("timed out after 2"), "{message}");
    assert!(
        at - check_started < Duration::from_secs(3),
        "the verdict took {:?}",
        at - check_started
    );
    let (_, latch) = outputs.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(latch, json!({"type": "latch", "state": "pessimistic", "reason": "unavailable"}));

    // the next render is checked at once, and passes
    let sent = Instant::now();
    writeln!(stdin, "{}", rendered("plan-2", "r-2", &sample_config())).unwrap();
    stdin.flush().unwrap();
    let (at, verdict) = outputs.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(
        (verdict["render"].as_str(), verdict["ok"].as_bool()),
        (Some("r-2"), Some(true)),
        "{verdict}"
    );
    assert!(at - sent < Duration::from_secs(3), "the next verdict took {:?}", at - sent);

    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert!(tree(work.path()).is_empty(), "{} left", tree(work.path()).len());
}
