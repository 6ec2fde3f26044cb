//! Bounded input lines (docs/behaviour.md, "Bounded work"): a line past
//! `--max-line` gets one `error` naming it and the limit and is read past
//! without being held; a bad line under the limit costs at most about twice
//! its size to parse, whatever it holds; the next event is still answered.
//! Memory is `serve`'s peak resident size (`VmHWM`).

use crate::support::*;
use serde_json::{Value, json};
use std::io::Write;

const MIB: u64 = 1024 * 1024;

/// `serve`'s peak resident size so far, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
    let kib: u64 =
        line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().unwrap();
    kib * 1024
}

/// Writes `head`, then `repeat` until `size` bytes of it, then `tail` and a
/// newline: one line of about `size` bytes, never built in memory here.
fn send_big_line(gate: &mut Serve, head: &str, repeat: &[u8], size: usize, tail: &str) {
    let chunk = repeat.repeat((1 << 20) / repeat.len());
    let stdin = gate.stdin();
    stdin.write_all(head.as_bytes()).unwrap();
    let mut written = 0;
    while written < size {
        stdin.write_all(&chunk).unwrap();
        written += chunk.len();
    }
    stdin.write_all(tail.as_bytes()).unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
}

/// A valid render and its verdict: the gate still answers.
fn answered(gate: &mut Serve, render: &str) {
    gate.send(&rendered("plan-1", render, &sample_config()));
    let v = gate.until("verdict").pop().unwrap();
    assert_eq!((v["render"].as_str(), v["ok"].as_bool()), (Some(render), Some(true)), "{v}");
}

fn error_on(out: Value, line: u64) -> String {
    assert_eq!((out["type"].as_str(), out["line"].as_u64()), (Some("error"), Some(line)), "{out}");
    out["message"].as_str().unwrap().to_owned()
}

#[test]
fn a_200_mb_line_gets_one_error_naming_it_and_the_limit_and_is_never_held() {
    let mut gate = Serve::start(&[]);
    gate.send(&json!({"type": "pods_discovered", "pods": []}));
    gate.send_raw("");
    send_big_line(&mut gate, r#"{"type":"bogus","padding":""#, b"x", 200 * MIB as usize, r#""}"#);
    let error = gate.next();
    answered(&mut gate, "r-1");
    let peak = peak_rss(gate.pid());
    eprintln!("peak RSS {} MiB after a line of 200 MiB", peak / MIB);
    assert!(peak < 512 * MIB, "peak RSS {} MiB", peak / MIB);
    assert_eq!(error_on(error, 3), "longer than --max-line 64MiB");
    let (rest, status) = gate.finish();
    assert!(status.success());
    assert!(rest.iter().all(|l| l["type"] != "error"), "one error for the long line: {rest:?}");
}

#[test]
fn the_limit_is_a_flag_and_a_line_just_under_it_is_parsed() {
    let mut gate = Serve::start(&["--max-line", "1KiB"]);
    let fits = json!({"type": "pods_discovered", "pods": ["x".repeat(980)]}).to_string();
    let long = json!({"type": "pods_discovered", "pods": ["x".repeat(1025)]}).to_string();
    gate.send_raw(&format!("{}{}", fits, " ".repeat(1024 - fits.len())));
    gate.send_raw(&long);
    assert_eq!(error_on(gate.next(), 2), "longer than --max-line 1KiB");
    gate.send_raw(&format!("{{\"type\":\"nope\",\"pad\":\"{}\"}}", "x".repeat(900)));
    assert!(error_on(gate.next(), 3).starts_with("unknown type `nope`"));
    let (rest, status) = gate.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn a_bad_60_mb_line_under_the_limit_costs_about_twice_its_size() {
    const SIZE: u64 = 60 * MIB;
    let mut gate = Serve::start(&[]);
    answered(&mut gate, "r-0");
    let baseline = peak_rss(gate.pid());
    // Thousands of tiny values: a JSON tree of them would cost ten times the line.
    let lines: [(&str, &[u8], &str, &str); 5] = [
        (r#"{"type":"bogus","padding":["#, b"[],", "[]]}", "unknown type `bogus`"),
        (
            r#"{"type":"applied","pod":"ns/a","plan":7,"padding":["#,
            b"{},",
            "{}]}",
            "invalid type: integer `7`",
        ),
        (r#"{"type":"bogus","padding":""#, b"x", r#""}"#, "unknown type `bogus`"),
        (
            r#"{"type":"rendered","plan":5,"render":"r","config":""#,
            b"global\\n",
            r#""}"#,
            "invalid type: integer `5`",
        ),
        // The wrong field after the big one: the big one is read first.
        (
            r#"{"type":"rendered","render":"r","config":""#,
            b"global\\n",
            r#"","plan":5}"#,
            "invalid type: integer `5`",
        ),
    ];
    for (n, (head, repeat, tail, expected)) in lines.into_iter().enumerate() {
        send_big_line(&mut gate, head, repeat, SIZE as usize, tail);
        let message = error_on(gate.next(), n as u64 + 2);
        assert!(message.starts_with(expected), "{message}");
        let peak = peak_rss(gate.pid());
        eprintln!("line {}: peak RSS {} MiB, {} MiB before", n + 2, peak / MIB, baseline / MIB);
        assert!(
            peak < baseline + 2 * SIZE + 32 * MIB,
            "line {}: peak RSS {} MiB, {} MiB before, for a line of {} MiB",
            n + 2,
            peak / MIB,
            baseline / MIB,
            SIZE / MIB
        );
    }
    // A valid line of a million short pod names: no string per name either.
    send_big_line(
        &mut gate,
        r#"{"type":"pods_discovered","pods":["#,
        br#""ab-cd","#,
        SIZE as usize,
        r#""x"]}"#,
    );
    answered(&mut gate, "r-1");
    let peak = peak_rss(gate.pid());
    eprintln!("pods_discovered: peak RSS {} MiB, {} MiB before", peak / MIB, baseline / MIB);
    assert!(peak < baseline + 3 * SIZE, "pods_discovered: peak RSS {} MiB", peak / MIB);
    let (_, status) = gate.finish();
    assert!(status.success());
}
