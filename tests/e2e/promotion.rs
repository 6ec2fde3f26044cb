//! Promotion to judged content only, through `serve` and the real haproxy
//! (docs/behaviour.md, "The promotion and revert policy"): a pass of one
//! render of a plan never promotes a pod that reports another render of the
//! same plan whose content was never judged; the `promote` line names the
//! render that passed.

use crate::support::*;
use serde_json::{Value, json};

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

#[test]
fn a_pass_promotes_only_pods_whose_render_holds_the_content_that_passed() {
    let mut gate = Serve::start(&[]);
    gate.send(&rendered("plan-x", "r-a", &sample_config()));
    let verdict = gate.until("verdict").pop().unwrap();
    assert_eq!(verdict["ok"], true, "{verdict}");
    // pod-0 holds r-a (judged: passed); pod-1 holds r-b, another render of
    // plan-x the gate has not seen; pod-2 reports the plan without a render
    gate.send(&applied("ns/pod-0", "r-a", "plan-x", "plan-x", "plan-0"));
    gate.send(&applied("ns/pod-1", "r-b", "plan-x", "plan-0", "plan-0"));
    gate.send(&json!({"type": "applied", "pod": "ns/pod-2", "plan": "plan-x",
                      "running_plan": "plan-x", "baseline_plan": "plan-0"}));
    // r-b arrives, broken: refused, and only pod-1 (which did not load it) is reverted
    gate.send(&rendered("plan-x", "r-b", &broken_config()));
    let (rest, status) = gate.finish();
    assert!(status.success());
    let promotes = of_type(&rest, "promote");
    let promoted: Vec<(&str, &str)> = promotes
        .iter()
        .map(|p| (p["pod"].as_str().unwrap(), p["render"].as_str().unwrap_or("-")))
        .collect();
    assert_eq!(promoted, [("ns/pod-0", "r-a"), ("ns/pod-2", "-")], "{rest:#?}");
    let reverts = of_type(&rest, "revert");
    let reverted: Vec<&str> = reverts.iter().map(|r| r["pod"].as_str().unwrap()).collect();
    assert_eq!(reverted, ["ns/pod-1"], "{rest:#?}");
}
