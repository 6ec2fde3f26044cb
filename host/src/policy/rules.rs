//! The host's rules over any decision (protocol.md §3): whatever a policy
//! says, it can only promote a pod to a plan HAProxy passed and that the pod
//! holds, and only revert a pod to its baseline or to a passed plan.

use super::{Decision, Fleet, Promote, Revert, RevertTarget};

/// A decision with the items that broke a rule removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    pub promote: Vec<Promote>,
    pub revert: Vec<Revert>,
    /// One line per dropped item, saying which rule it broke.
    pub dropped: Vec<String>,
}

pub fn enforce(decision: Decision, fleet: &Fleet) -> Checked {
    let mut checked = Checked::default();
    let passed = |plan: &str| fleet.passed_plans.iter().any(|p| p == plan);
    let pod = |name: &str| fleet.pods.iter().find(|p| p.pod == name);
    for p in decision.promote {
        let why = match pod(&p.pod) {
            None => Some("the pod is not in the fleet"),
            Some(_) if !passed(&p.plan) => Some("the plan has not passed"),
            Some(state) if state.applied_plan.as_deref() != Some(p.plan.as_str()) => {
                Some("the pod does not hold the plan")
            }
            Some(_) => None,
        };
        match why {
            Some(why) => checked.dropped.push(format!("promote {} to {}: {why}", p.pod, p.plan)),
            None if checked.promote.contains(&p) => {}
            None => checked.promote.push(p),
        }
    }
    for r in decision.revert {
        let why = match (&r.target, pod(&r.pod)) {
            (_, None) => Some("the pod is not in the fleet"),
            (RevertTarget::Plan(plan), _) if !passed(plan) => Some("the target plan has not passed"),
            _ => None,
        };
        match why {
            Some(why) => checked.dropped.push(format!("revert {} from {}: {why}", r.pod, r.plan)),
            None if checked.revert.contains(&r) => {}
            None => checked.revert.push(r),
        }
    }
    checked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PodState;

    fn fleet() -> Fleet {
        Fleet {
            pods: vec![PodState {
                pod: "ns/a".into(),
                applied_plan: Some("p2".into()),
                running_plan: Some("p1".into()),
                baseline_plan: Some("p1".into()),
            }],
            passed_plans: vec!["p1".into(), "p2".into()],
            refused_plans: vec!["p3".into()],
        }
    }
    fn promote(pod: &str, plan: &str) -> Promote {
        Promote { pod: pod.into(), plan: plan.into() }
    }
    fn revert(pod: &str, target: RevertTarget) -> Revert {
        Revert { pod: pod.into(), plan: "p2".into(), target }
    }

    #[test]
    fn promotions_need_a_known_pod_a_passed_plan_and_the_pod_holding_it() {
        let decision = Decision {
            promote: vec![promote("ns/a", "p2"), promote("ns/ghost", "p2"), promote("ns/a", "p1"), promote("ns/a", "p3"), promote("ns/a", "p2")],
            ..Decision::default()
        };
        let checked = enforce(decision, &fleet());
        assert_eq!(checked.promote, vec![promote("ns/a", "p2")]);
        assert_eq!(checked.dropped.len(), 3);
        assert!(checked.dropped[0].contains("not in the fleet"));
        assert!(checked.dropped[1].contains("does not hold"));
        assert!(checked.dropped[2].contains("has not passed"));
    }

    #[test]
    fn reverts_go_only_to_the_baseline_or_a_passed_plan() {
        let decision = Decision {
            revert: vec![
                revert("ns/a", RevertTarget::Baseline),
                revert("ns/a", RevertTarget::Plan("p1".into())),
                revert("ns/a", RevertTarget::Plan("p3".into())),
                revert("ns/a", RevertTarget::Plan("never-judged".into())),
                revert("ns/ghost", RevertTarget::Baseline),
            ],
            ..Decision::default()
        };
        let checked = enforce(decision, &fleet());
        assert_eq!(checked.revert, vec![revert("ns/a", RevertTarget::Baseline), revert("ns/a", RevertTarget::Plan("p1".into()))]);
        assert_eq!(checked.dropped.len(), 3);
    }
}
