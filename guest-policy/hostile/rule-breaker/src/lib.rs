//! Hostile test policy `rule-breaker`: breaks every host rule at once; every item must be dropped.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-rule-breaker".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let _ = trigger;
        let known = fleet.pods.first().map(|p| p.pod.clone()).unwrap_or_else(|| "ns/any".into());
        let refused = fleet.refused_plans.first().cloned().unwrap_or_else(|| "refused".into());
        Decision {
            promote: vec![
                policy_guest::Promote {
                    pod: "ns/ghost".into(),
                    plan: fleet.passed_plans.first().cloned().unwrap_or_default(),
                },
                policy_guest::Promote { pod: known.clone(), plan: "never-passed".into() },
                policy_guest::Promote { pod: known.clone(), plan: refused.clone() },
            ],
            revert: vec![
                policy_guest::Revert {
                    pod: "ns/ghost".into(),
                    plan: "p".into(),
                    target: policy_guest::RevertTarget::Baseline,
                },
                policy_guest::Revert {
                    pod: known.clone(),
                    plan: "p".into(),
                    target: policy_guest::RevertTarget::Plan(refused),
                },
                policy_guest::Revert {
                    pod: known,
                    plan: "p".into(),
                    target: policy_guest::RevertTarget::Plan("never-judged".into()),
                },
            ],
            notes: vec!["breaking every rule".into()],
        }
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
