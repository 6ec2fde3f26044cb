//! Policy fixtures (docs/protocol.md §4): a JSON array of cases, each a trigger,
//! a fleet and the expected promotions and reverts. `rendergate policy test`
//! runs a policy over them; promotions and reverts compare as sets, notes
//! are not compared.

use super::{Policy, PolicyError};
use crate::{Decision, Fleet, RevertTarget, Trigger};
use serde::Deserialize;
use std::collections::BTreeSet;

/// One fixture case: a trigger, the fleet it sees, and the decision
/// expected (its `notes` are never compared). The types are policy-core's,
/// read as JSON through its `serde` feature.
#[derive(Debug, Deserialize)]
pub struct Case {
    pub name: String,
    pub trigger: Trigger,
    pub fleet: Fleet,
    pub expect: Decision,
}

pub fn parse(text: &str) -> Result<Vec<Case>, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// How one case went.
#[derive(Debug, PartialEq, Eq)]
pub enum CaseResult {
    Passed,
    /// Lines of a diff: `- expected, missing` and `+ decided, unexpected`.
    Failed(Vec<String>),
    /// The policy gave no decision.
    Error(PolicyError),
}

/// Runs `policy` over one case.
pub fn run(policy: &dyn Policy, case: &Case) -> CaseResult {
    let decision = match policy.decide(&case.trigger, &case.fleet) {
        Ok(d) => d,
        Err(e) => return CaseResult::Error(e),
    };
    let decided: BTreeSet<String> = decision
        .promote
        .iter()
        .map(|p| promote_line(&p.pod, &p.plan))
        .chain(decision.revert.iter().map(|r| revert_line(&r.pod, &r.plan, &r.target)))
        .collect();
    let expected: BTreeSet<String> = case
        .expect
        .promote
        .iter()
        .map(|p| promote_line(&p.pod, &p.plan))
        .chain(case.expect.revert.iter().map(|r| revert_line(&r.pod, &r.plan, &r.target)))
        .collect();
    let mut diff: Vec<String> = expected.difference(&decided).map(|l| format!("- {l}")).collect();
    diff.extend(decided.difference(&expected).map(|l| format!("+ {l}")));
    if diff.is_empty() { CaseResult::Passed } else { CaseResult::Failed(diff) }
}

fn promote_line(pod: &str, plan: &str) -> String {
    format!("promote {pod} to {plan}")
}

fn revert_line(pod: &str, plan: &str, target: &RevertTarget) -> String {
    match target {
        RevertTarget::Baseline => format!("revert {pod} from {plan} to baseline"),
        RevertTarget::Plan(to) => format!("revert {pod} from {plan} to plan {to}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NativeDefault;

    /// docs/protocol.md §4's example, verbatim.
    const EXAMPLE: &str = r#"[{"name":"refusal reverts only the pod that did not load the plan",
  "trigger":{"verdict":{"plan":"plan-2","render":"r-2","outcome":"refused",
             "newest":true,"pinned":false,"remembered":false,"message":""}},
  "fleet":{"pods":[{"pod":"haptic/haproxy-0","applied_plan":"plan-2",
                    "running_plan":"plan-1","baseline_plan":"plan-1"},
                   {"pod":"haptic/haproxy-1","applied_plan":"plan-1",
                    "running_plan":"plan-1","baseline_plan":"plan-1"}],
           "passed_plans":["plan-1"],"refused_plans":["plan-2"]},
  "expect":{"promote":[],
            "revert":[{"pod":"haptic/haproxy-0","plan":"plan-2","target":"baseline"}]}}]"#;

    #[test]
    fn the_protocol_example_parses_and_the_native_default_passes_it() {
        let cases = parse(EXAMPLE).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(run(&NativeDefault, &cases[0]), CaseResult::Passed);
    }

    #[test]
    fn a_wrong_expectation_fails_with_a_diff() {
        let text = EXAMPLE.replace(r#""target":"baseline""#, r#""target":{"plan":"plan-1"}"#);
        let cases = parse(&text).unwrap();
        let CaseResult::Failed(diff) = run(&NativeDefault, &cases[0]) else { panic!() };
        assert_eq!(
            diff,
            [
                "- revert haptic/haproxy-0 from plan-2 to plan plan-1",
                "+ revert haptic/haproxy-0 from plan-2 to baseline"
            ]
        );
    }
}
