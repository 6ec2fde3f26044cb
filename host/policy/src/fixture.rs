//! Policy fixtures (docs/protocol.md §4): a JSON array of cases, each a trigger,
//! a fleet and the expected promotions and reverts. `rendergate policy test`
//! runs a policy over them; promotions and reverts compare as sets, notes
//! are not compared.

use super::{Policy, PolicyError};
use policy_core as plain;
use serde::Deserialize;
use std::collections::BTreeSet;

#[derive(Debug, Deserialize)]
pub struct Case {
    pub name: String,
    pub trigger: TriggerJson,
    pub fleet: FleetJson,
    pub expect: ExpectJson,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TriggerJson {
    Verdict(VerdictJson),
    Applied(PodJson),
}

#[derive(Debug, Deserialize)]
pub struct VerdictJson {
    pub plan: String,
    pub render: String,
    pub outcome: OutcomeJson,
    #[serde(default)]
    pub newest: bool,
    #[serde(default)]
    pub pinned: bool,
    #[serde(default)]
    pub remembered: bool,
    #[serde(default)]
    pub message: String,
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeJson {
    Passed,
    Refused,
    Unavailable,
}

#[derive(Debug, Deserialize)]
pub struct PodJson {
    pub pod: String,
    #[serde(default)]
    pub applied_plan: Option<String>,
    #[serde(default)]
    pub running_plan: Option<String>,
    #[serde(default)]
    pub baseline_plan: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct FleetJson {
    #[serde(default)]
    pub pods: Vec<PodJson>,
    #[serde(default)]
    pub passed_plans: Vec<String>,
    #[serde(default)]
    pub refused_plans: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ExpectJson {
    #[serde(default)]
    pub promote: Vec<PromoteJson>,
    #[serde(default)]
    pub revert: Vec<RevertJson>,
}

#[derive(Debug, Deserialize)]
pub struct PromoteJson {
    pub pod: String,
    pub plan: String,
}

#[derive(Debug, Deserialize)]
pub struct RevertJson {
    pub pod: String,
    pub plan: String,
    pub target: TargetJson,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetJson {
    Baseline,
    Plan(String),
}

/// Reads a fixture file.
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
    let trigger = case.trigger.to_plain();
    let fleet = case.fleet.to_plain();
    let decision = match policy.decide(&trigger, &fleet) {
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
        .chain(case.expect.revert.iter().map(|r| revert_line(&r.pod, &r.plan, &r.target.to_plain())))
        .collect();
    let mut diff: Vec<String> = expected.difference(&decided).map(|l| format!("- {l}")).collect();
    diff.extend(decided.difference(&expected).map(|l| format!("+ {l}")));
    if diff.is_empty() { CaseResult::Passed } else { CaseResult::Failed(diff) }
}

fn promote_line(pod: &str, plan: &str) -> String {
    format!("promote {pod} to {plan}")
}

fn revert_line(pod: &str, plan: &str, target: &plain::RevertTarget) -> String {
    match target {
        plain::RevertTarget::Baseline => format!("revert {pod} from {plan} to baseline"),
        plain::RevertTarget::Plan(to) => format!("revert {pod} from {plan} to plan {to}"),
    }
}

impl TriggerJson {
    pub fn to_plain(&self) -> plain::Trigger {
        match self {
            TriggerJson::Verdict(v) => plain::Trigger::Verdict(plain::Verdict {
                plan: v.plan.clone(),
                render: v.render.clone(),
                outcome: match v.outcome {
                    OutcomeJson::Passed => plain::Outcome::Passed,
                    OutcomeJson::Refused => plain::Outcome::Refused,
                    OutcomeJson::Unavailable => plain::Outcome::Unavailable,
                },
                newest: v.newest,
                pinned: v.pinned,
                remembered: v.remembered,
                message: v.message.clone(),
            }),
            TriggerJson::Applied(p) => plain::Trigger::Applied(p.to_plain()),
        }
    }
}

impl PodJson {
    fn to_plain(&self) -> plain::PodState {
        plain::PodState {
            pod: self.pod.as_str().into(),
            applied_plan: self.applied_plan.as_deref().map(Into::into),
            running_plan: self.running_plan.as_deref().map(Into::into),
            baseline_plan: self.baseline_plan.as_deref().map(Into::into),
        }
    }
}

impl FleetJson {
    pub fn to_plain(&self) -> plain::Fleet {
        plain::Fleet {
            pods: std::sync::Arc::new(self.pods.iter().map(PodJson::to_plain).collect()),
            passed_plans: self.passed_plans.iter().map(|p| p.as_str().into()).collect(),
            refused_plans: self.refused_plans.iter().map(|p| p.as_str().into()).collect(),
        }
    }
}

impl TargetJson {
    fn to_plain(&self) -> plain::RevertTarget {
        match self {
            TargetJson::Baseline => plain::RevertTarget::Baseline,
            TargetJson::Plan(p) => plain::RevertTarget::Plan(p.as_str().into()),
        }
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
