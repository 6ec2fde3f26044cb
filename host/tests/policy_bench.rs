//! `rendergate policy bench` through the real binary with the shipped
//! guests: a row per fleet size in the table and in `--json`, timings and
//! costs that hang together, a comparison with the built-in default that
//! tells a different policy apart, failing decisions reported in their row,
//! and bad flags refused in one line.

use policy_artifacts as built;
use serde_json::Value;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rendergate");
const KINDS: [&str; 5] = ["passed", "refused", "refused-stale", "could-not-run", "applied"];

fn bench(args: &[&str]) -> Output {
    Command::new(BIN).args(["policy", "bench"]).args(args).output().expect("run rendergate")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `policy bench --json` over `component`, parsed.
fn bench_json(component: &str, pods: &[&str]) -> Value {
    let mut args = vec![component, "--json"];
    for n in pods {
        args.extend(["--pods", n]);
    }
    let out = bench(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout(&out)).expect("one JSON document")
}

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_table_has_a_row_per_default_size_with_every_trigger_kind() {
    let out = bench(&[built::SCOPED_REVERT]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let mut lines = text.lines();
    let first = lines.next().unwrap();
    assert!(
        first.starts_with("policy \"scoped-revert\"") && first.contains("compiled in"),
        "{text}"
    );
    let header = text.lines().find(|l| l.trim_start().starts_with("pods")).expect("a header");
    for kind in KINDS {
        assert!(header.contains(kind), "{header}");
    }
    assert!(header.contains("fuel (max)") && header.contains("peak memory"), "{header}");
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("pods"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    let sizes: Vec<&str> = rows.iter().map(|r| r.split_whitespace().next().unwrap()).collect();
    assert_eq!(sizes, ["10", "100", "1000"], "{text}");
    for row in rows {
        // pods, then per kind `p50/p99 | p50/p99`, then fuel and `N.N KiB|MiB`.
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), 1 + 5 * 3 + 3, "{row}");
        for kind in 0..5 {
            let (policy, bar, default) =
                (cells[1 + 3 * kind], cells[2 + 3 * kind], cells[3 + 3 * kind]);
            assert_eq!(bar, "|", "{row}");
            for pair in [policy, default] {
                let (p50, p99) = pair.split_once('/').unwrap_or_else(|| panic!("{row}"));
                let (p50, p99): (f64, f64) = (p50.parse().unwrap(), p99.parse().unwrap());
                assert!(0.0 < p50 || pair == default, "{row}");
                assert!(p50 <= p99, "{row}");
            }
        }
        let fuel: u64 = cells[16].parse().unwrap();
        assert!(fuel > 0, "{row}");
        assert!(["KiB", "MiB"].contains(&cells[18]), "{row}");
    }
    assert!(!text.contains("unlike the default"), "scoped-revert decides as the default: {text}");
}

#[test]
fn json_holds_each_size_and_trigger_with_plausible_costs() {
    let doc = bench_json(built::SCOPED_REVERT, &["10", "50"]);
    assert_eq!(doc["policy"], "scoped-revert");
    assert!(number(&doc["compile_ms"]) > 0.0, "{doc}");
    assert!(number(&doc["component_bytes"]) > 0.0, "{doc}");
    assert!(number(&doc["instantiate_us"]["p50"]) <= number(&doc["instantiate_us"]["p99"]));
    assert!(number(&doc["limits"]["fuel"]) > 0.0 && number(&doc["limits"]["memory"]) > 0.0);
    let sizes = doc["sizes"].as_array().unwrap();
    assert_eq!(sizes.iter().map(|s| s["pods"].as_u64().unwrap()).collect::<Vec<_>>(), [10, 50]);
    for size in sizes {
        let pods = size["pods"].as_u64().unwrap();
        let triggers = size["triggers"].as_array().unwrap();
        let kinds: Vec<&str> = triggers.iter().map(|t| t["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, KINDS);
        for t in triggers {
            let (policy, default) = (&t["policy"], &t["default"]);
            assert!(policy.get("error").is_none(), "{t}");
            assert!(number(&policy["p50_us"]) > 0.0, "{t}");
            assert!(number(&policy["p50_us"]) <= number(&policy["p99_us"]), "{t}");
            assert!(number(&default["p50_us"]) <= number(&default["p99_us"]), "{t}");
            assert!(policy["rounds"].as_u64().unwrap() >= 10, "{t}");
            assert!(policy["fuel"].as_u64().unwrap() > 0, "{t}");
            let memory = policy["peak_memory"].as_u64().unwrap();
            assert!(memory > 0 && memory <= doc["limits"]["memory"].as_u64().unwrap(), "{t}");
            assert_eq!(policy["same_as_default"], true, "{t}");
            assert_eq!(policy["promote"], default["promote"], "{t}");
            assert!(size["fuel"].as_u64().unwrap() >= policy["fuel"].as_u64().unwrap());
        }
        // The kinds ask for the work their names say: a pass promotes every pod.
        assert_eq!(triggers[0]["default"]["promote"].as_u64(), Some(pods));
        assert!(triggers[1]["default"]["revert"].as_u64().unwrap() > 0);
        assert_eq!(triggers[3]["default"]["promote"].as_u64(), Some(0));
    }
    // Deciding over 50 pods burns more than over 10.
    assert!(sizes[1]["fuel"].as_u64() > sizes[0]["fuel"].as_u64(), "{doc}");
}

#[test]
fn a_policy_unlike_the_default_is_told_apart() {
    let doc = bench_json(built::OBSERVE_ONLY, &["10"]);
    let triggers = doc["sizes"][0]["triggers"].as_array().unwrap();
    let passed = &triggers[0];
    assert_eq!(passed["policy"]["promote"], 0, "{passed}");
    assert_eq!(passed["default"]["promote"], 10, "{passed}");
    assert_eq!(passed["policy"]["same_as_default"], false, "{passed}");
    let out = bench(&[built::OBSERVE_ONLY, "--pods", "10"]);
    assert!(
        stdout(&out).contains("decisions unlike the default's: passed at 10 pods"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_decision_that_fails_is_reported_in_its_row() {
    let doc = bench_json(built::HOSTILE_GROW, &["10"]);
    for t in doc["sizes"][0]["triggers"].as_array().unwrap() {
        assert_eq!(t["policy"]["error"], "the decision hit the memory limit", "{t}");
        assert!(number(&t["default"]["p50_us"]) <= number(&t["default"]["p99_us"]), "{t}");
    }
    let out = bench(&[built::HOSTILE_GROW, "--pods", "10"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    let row = text.lines().find(|l| l.trim_start().starts_with("10 ")).expect("the row");
    assert_eq!(row.matches("failed | ").count(), 5, "{row}");
    assert!(
        text.contains("failed: passed at 10 pods (the decision hit the memory limit)"),
        "{text}"
    );
}

#[test]
fn bad_flags_exit_2_with_one_line_naming_the_flag() {
    let cases: [(&[&str], &str); 6] = [
        (&[built::SCOPED_REVERT, "--pods", "0"], "--pods"),
        (&[built::SCOPED_REVERT, "--pods", "-5"], "--pods"),
        (&[built::SCOPED_REVERT, "--pods", "many"], "--pods"),
        (&[built::SCOPED_REVERT, "--pods", "100001"], "--pods"),
        (&[built::SCOPED_REVERT, "--fast"], "--fast"),
        (&["/nonexistent/policy.wasm"], "/nonexistent/policy.wasm"),
    ];
    for (args, named) in cases {
        let out = bench(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
