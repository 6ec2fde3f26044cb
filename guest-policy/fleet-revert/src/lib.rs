//! `fleet-revert`: the Data Plane API's whole-fleet last-known-good. On a
//! refusal, every pod whose running plan is not the newest passed plan is
//! reverted to that plan; promotions as the default policy.

use policy_core::{Decision, Fleet, Outcome, Revert, RevertTarget, Trigger};
use policy_guest::Guest;

struct FleetRevert;

impl Guest for FleetRevert {
    fn name() -> String {
        "fleet-revert".into()
    }

    fn decide(
        trigger: policy_guest::Trigger,
        fleet: policy_guest::Fleet,
    ) -> policy_guest::Decision {
        policy_guest::plain(trigger, fleet, decide)
    }
}

fn decide(trigger: &Trigger, fleet: &Fleet) -> Decision {
    let Trigger::Verdict(verdict) = trigger else {
        return policy_core::decide(trigger, fleet);
    };
    if verdict.outcome != Outcome::Refused {
        return policy_core::decide(trigger, fleet);
    }
    let Some(good) = fleet.passed_plans.last() else {
        // No plan is known good: fall back to each pod's own baseline, and
        // say so on the default's decision (a note pushed on a decision that
        // is then thrown away was how this policy lost its notes).
        let mut decision = policy_core::decide(trigger, fleet);
        decision.notes.push("no passed plan known: reverting to baselines".into());
        return decision;
    };
    let mut decision = Decision::default();
    for pod in fleet.pods.iter() {
        if pod.running_plan.as_deref() == Some(good) && pod.applied_plan.as_deref() == Some(good) {
            continue;
        }
        if pod.running_plan.as_deref() == Some(verdict.plan.as_str()) {
            continue; // its own HAProxy loaded the refused plan: stronger evidence
        }
        decision.revert.push(Revert {
            pod: pod.pod.clone(),
            plan: pod.applied_plan.clone().unwrap_or_default(),
            target: RevertTarget::Plan(good.clone()),
        });
    }
    decision.notes.push(format!(
        "{} refused: {} pod(s) back to {good}",
        verdict.plan,
        decision.revert.len()
    ));
    decision
}

policy_guest::export_policy!(FleetRevert with_types_in policy_guest::bindings);
