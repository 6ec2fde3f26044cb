//! Promotion to judged content only, through `serve` and the real haproxy
//! (docs/behaviour.md, "The promotion and revert policy"): a pass of one
//! render of a plan never promotes a pod that reports another render of the
//! same plan whose content was never judged; the built-in default promotes
//! on a pass only the pods holding the content that passed; the `promote`
//! line always names a render whose content passed.

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
    assert_eq!(promoted, [("ns/pod-0", "r-a"), ("ns/pod-2", "r-a")], "{rest:#?}");
    let reverts = of_type(&rest, "revert");
    let reverted: Vec<&str> = reverts.iter().map(|r| r["pod"].as_str().unwrap()).collect();
    assert_eq!(reverted, ["ns/pod-1"], "{rest:#?}");
}

/// A plan-only report: the line names the plan's render whose content
/// passed (docs/protocol.md §3: "The host adds the render to the line,
/// always"), the newest one when several did.
#[test]
fn a_promote_line_names_a_render_even_when_the_pods_report_names_none() {
    let mut gate = Serve::start(&[]);
    gate.send(&rendered("plan-1", "r-1", &sample_config()));
    let verdict = gate.until("verdict").pop().unwrap();
    assert_eq!(verdict["ok"], true, "{verdict}");
    gate.send(&json!({"type": "applied", "pod": "ns/a", "plan": "plan-1",
                      "running_plan": "plan-1", "baseline_plan": "plan-0"}));
    let promote = gate.until("promote").pop().unwrap();
    assert_eq!(
        promote,
        json!({"type": "promote", "pod": "ns/a", "plan": "plan-1", "render": "r-1"}),
        "{promote}"
    );
    // r-2, newer content of plan-1, passes too: a later plan-only report names it
    gate.send(&rendered("plan-1", "r-2", &format!("{}\n# r-2\n", sample_config())));
    let verdict = gate.until("verdict").pop().unwrap();
    assert_eq!((verdict["render"].as_str(), verdict["ok"].as_bool()), (Some("r-2"), Some(true)));
    // its group promotes ns/a again (it names no render: matched by plan), to r-2
    let promote = gate.until("promote").pop().unwrap();
    assert_eq!((promote["pod"].as_str(), promote["render"].as_str()), (Some("ns/a"), Some("r-2")));
    gate.send(&json!({"type": "applied", "pod": "ns/b", "plan": "plan-1",
                      "running_plan": "plan-0", "baseline_plan": "plan-0"}));
    let (rest, status) = gate.finish();
    assert!(status.success());
    let promotes = of_type(&rest, "promote");
    assert_eq!(
        promotes,
        [&json!({"type": "promote", "pod": "ns/b", "plan": "plan-1", "render": "r-2"})],
        "{rest:#?}"
    );
}

/// docs/behaviour.md's default: on a pass, only the pods holding the
/// content that passed (this verdict's render, or a report without a render
/// id) are promoted. pod-0 holds r-a, another render of the plan whose
/// content passed: r-b's pass does not promote it (a custom policy may:
/// the host's rule is looser).
#[test]
fn the_default_promotes_on_a_pass_only_pods_holding_the_content_that_passed() {
    let mut gate = Serve::start(&[]);
    gate.send(&rendered("plan-x", "r-a", &sample_config()));
    let verdict = gate.until("verdict").pop().unwrap();
    assert_eq!(verdict["ok"], true, "{verdict}");
    gate.send(&applied("ns/pod-0", "r-a", "plan-x", "plan-x", "plan-0"));
    let promote = gate.until("promote").pop().unwrap();
    assert_eq!(
        (promote["pod"].as_str(), promote["render"].as_str()),
        (Some("ns/pod-0"), Some("r-a"))
    );
    // pod-1 names no render; pod-2 holds r-b, not yet judged (not promoted now)
    gate.send(&json!({"type": "applied", "pod": "ns/pod-1", "plan": "plan-x",
                      "running_plan": "plan-x", "baseline_plan": "plan-0"}));
    let promote = gate.until("promote").pop().unwrap();
    assert_eq!(promote["pod"], "ns/pod-1", "{promote}");
    gate.send(&applied("ns/pod-2", "r-b", "plan-x", "plan-0", "plan-0"));
    gate.send(&rendered("plan-x", "r-b", &format!("{}\n# r-b\n", sample_config())));
    let (rest, status) = gate.finish();
    assert!(status.success());
    let at = rest
        .iter()
        .position(|l| l["type"] == "verdict" && l["render"] == "r-b")
        .unwrap_or_else(|| panic!("no verdict on r-b: {rest:#?}"));
    assert_eq!(rest[at]["ok"], true, "{rest:#?}");
    assert!(of_type(&rest[..at], "promote").is_empty(), "{rest:#?}");
    let promoted: Vec<(&str, &str)> = of_type(&rest[at..], "promote")
        .iter()
        .map(|p| (p["pod"].as_str().unwrap(), p["render"].as_str().unwrap_or("-")))
        .collect();
    assert_eq!(promoted, [("ns/pod-1", "r-b"), ("ns/pod-2", "r-b")], "{rest:#?}");
}

/// A report that names a render of another plan contradicts itself: that
/// render's pass says nothing of the plan reported (docs/behaviour.md,
/// "another render of the same plan"). A pod reporting refused plan-2 with
/// plan-1's passed r-1 is reverted; one reporting plan-1 with plan-3's
/// passed r-3 is not promoted to plan-1.
#[test]
fn a_render_of_another_plan_neither_shields_from_a_revert_nor_promotes() {
    let mut gate = Serve::start(&[]);
    gate.send(&rendered("plan-1", "r-1", &sample_config()));
    gate.send(&rendered("plan-3", "r-3", &format!("{}\n# r-3\n", sample_config())));
    gate.send(&rendered("plan-2", "r-2", &broken_config()));
    gate.send(&applied("ns/a", "r-1", "plan-2", "plan-0", "plan-0"));
    gate.send(&applied("ns/b", "r-3", "plan-1", "plan-0", "plan-0"));
    let (rest, status) = gate.finish();
    assert!(status.success());
    let verdicts: Vec<(&str, bool)> = of_type(&rest, "verdict")
        .iter()
        .map(|v| (v["render"].as_str().unwrap(), v["ok"].as_bool().unwrap()))
        .collect();
    assert!(verdicts.contains(&("r-2", false)), "{rest:#?}");
    let reverted: Vec<&str> =
        of_type(&rest, "revert").iter().map(|r| r["pod"].as_str().unwrap()).collect();
    assert_eq!(reverted, ["ns/a"], "{rest:#?}");
    assert!(of_type(&rest, "promote").is_empty(), "{rest:#?}");
}
