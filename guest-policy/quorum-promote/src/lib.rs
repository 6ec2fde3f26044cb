//! `quorum-promote`: reverts as the default policy, but lets pods promote to
//! a passed plan only once at least half of the fleet reports it applied;
//! then every pod that holds it promotes.

use policy_core::{Decision, Fleet, Outcome, Promote, Trigger};
use policy_guest::Guest;

struct QuorumPromote;

impl Guest for QuorumPromote {
    fn name() -> String {
        "quorum-promote".into()
    }

    fn decide(
        trigger: policy_guest::Trigger,
        fleet: policy_guest::Fleet,
    ) -> policy_guest::Decision {
        policy_guest::plain(trigger, fleet, decide)
    }
}

fn decide(trigger: &Trigger, fleet: &Fleet) -> Decision {
    let plan: policy_core::Name = match trigger {
        Trigger::Verdict(v) if v.outcome == Outcome::Passed => v.plan.as_str().into(),
        Trigger::Applied(p) => match &p.applied_plan {
            Some(plan) if fleet.passed_plans.contains(plan) => plan.clone(),
            _ => return policy_core::decide(trigger, fleet),
        },
        _ => return policy_core::decide(trigger, fleet),
    };
    let mut decision = Decision::default();
    let holders: Vec<_> =
        fleet.pods.iter().filter(|p| p.applied_plan.as_deref() == Some(&*plan)).collect();
    if fleet.pods.is_empty() || holders.len() * 2 < fleet.pods.len() {
        decision.notes.push(format!(
            "{plan}: {} of {} pods hold it, below quorum",
            holders.len(),
            fleet.pods.len()
        ));
        return decision;
    }
    for pod in holders {
        if pod.baseline_plan.as_deref() != Some(&*plan) {
            decision.promote.push(Promote { pod: pod.pod.clone(), plan: plan.clone() });
        }
    }
    decision
}

policy_guest::export_policy!(QuorumPromote with_types_in policy_guest::bindings);
