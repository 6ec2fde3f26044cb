//! The host's rules over any decision (docs/protocol.md §3): whatever a policy
//! says, it can only promote a pod to a plan HAProxy passed and that the pod
//! holds, and only revert a pod to its baseline or to a passed plan.

use super::{Decision, Fleet, Promote, Revert, RevertTarget};
use std::collections::HashSet;
use std::hash::Hash;

/// A decision with the items that broke a rule removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    pub promote: Vec<Promote>,
    pub revert: Vec<Revert>,
    pub dropped: Vec<Dropped>,
}

/// One item a rule dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The rule, as a metric label: `unknown-pod`, `plan-not-passed`,
    /// `plan-not-held`, `target-not-passed`.
    pub rule: &'static str,
    /// The item and why, for the log.
    pub item: String,
}

pub fn enforce(decision: Decision, fleet: &Fleet) -> Checked {
    let mut dropped = Vec::new();
    let passed = |plan: &str| fleet.passed_plans.iter().any(|p| **p == *plan);
    // The gate's fleet is sorted by name: a binary search finds a pod; the
    // linear scan covers fleets from elsewhere (fixtures) in any order.
    let pod = |name: &str| match fleet.pods.binary_search_by(|p| (*p.pod).cmp(name)) {
        Ok(at) => Some(&fleet.pods[at]),
        Err(_) => fleet.pods.iter().find(|p| *p.pod == *name),
    };
    let promote = keep(
        decision.promote,
        |p| {
            let why = match pod(&p.pod) {
                None => Some(("unknown-pod", "the pod is not in the fleet")),
                Some(_) if !passed(&p.plan) => Some(("plan-not-passed", "the plan has not passed")),
                Some(state) if state.applied_plan.as_deref() != Some(&*p.plan) => {
                    Some(("plan-not-held", "the pod does not hold the plan"))
                }
                Some(_) => None,
            };
            why.map(|(rule, why)| Dropped {
                rule,
                item: format!("promote {} to {}: {why}", p.pod, p.plan),
            })
        },
        &mut dropped,
    );
    let revert = keep(
        decision.revert,
        |r| {
            let why = match (&r.target, pod(&r.pod)) {
                (_, None) => Some(("unknown-pod", "the pod is not in the fleet")),
                (RevertTarget::Plan(plan), _) if !passed(plan) => {
                    Some(("target-not-passed", "the target plan has not passed"))
                }
                _ => None,
            };
            why.map(|(rule, why)| Dropped {
                rule,
                item: format!("revert {} from {}: {why}", r.pod, r.plan),
            })
        },
        &mut dropped,
    );
    Checked { promote, revert, dropped }
}

/// Keeps the items `broken` finds nothing wrong with, in order and without
/// repeats, in the vector they came in (a decision is checked on every
/// event: no allocation when nothing is dropped and the decision is small).
/// Repeats are found by a scan while the decision is small and by a set
/// once it is large, so a decision over 10,000 pods costs linear time.
fn keep<T: Eq + Hash + Clone>(
    mut items: Vec<T>,
    broken: impl Fn(&T) -> Option<Dropped>,
    dropped: &mut Vec<Dropped>,
) -> Vec<T> {
    const SCAN: usize = 32;
    let mut seen: HashSet<T> = HashSet::new();
    let mut kept = 0;
    for at in 0..items.len() {
        if let Some(why) = broken(&items[at]) {
            dropped.push(why);
            continue;
        }
        let new = if items.len() <= SCAN {
            !items[..kept].contains(&items[at])
        } else {
            seen.insert(items[at].clone())
        };
        if new {
            items.swap(kept, at);
            kept += 1;
        }
    }
    items.truncate(kept);
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PodState;

    fn fleet() -> Fleet {
        Fleet {
            pods: vec![PodState {
                pod: "ns/a".into(),
                applied_plan: Some("p2".into()),
                running_plan: Some("p1".into()),
                baseline_plan: Some("p1".into()),
            }]
            .into(),
            passed_plans: vec!["p1".into(), "p2".into()].into(),
            refused_plans: vec!["p3".into()].into(),
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
            promote: vec![
                promote("ns/a", "p2"),
                promote("ns/ghost", "p2"),
                promote("ns/a", "p1"),
                promote("ns/a", "p3"),
                promote("ns/a", "p2"),
            ],
            ..Decision::default()
        };
        let checked = enforce(decision, &fleet());
        assert_eq!(checked.promote, vec![promote("ns/a", "p2")]);
        let rules: Vec<_> = checked.dropped.iter().map(|d| d.rule).collect();
        assert_eq!(rules, ["unknown-pod", "plan-not-held", "plan-not-passed"]);
        assert!(checked.dropped[0].item.contains("ns/ghost"));
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
        assert_eq!(
            checked.revert,
            vec![
                revert("ns/a", RevertTarget::Baseline),
                revert("ns/a", RevertTarget::Plan("p1".into()))
            ]
        );
        let rules: Vec<_> = checked.dropped.iter().map(|d| d.rule).collect();
        assert_eq!(rules, ["target-not-passed", "target-not-passed", "unknown-pod"]);
    }

    #[test]
    fn large_decisions_keep_their_order_and_lose_their_repeats() {
        let pods: Vec<PodState> = (0..100)
            .map(|i| PodState {
                pod: format!("p{i:03}").into(),
                applied_plan: Some("plan-2".into()),
                running_plan: Some("plan-1".into()),
                baseline_plan: Some("plan-1".into()),
            })
            .collect();
        let fleet = Fleet {
            pods: pods.into(),
            passed_plans: vec!["plan-1".into()].into(),
            refused_plans: vec!["plan-2".into()].into(),
        };
        let revert = |i: usize| Revert {
            pod: format!("p{i:03}").into(),
            plan: "plan-2".into(),
            target: RevertTarget::Baseline,
        };
        // every pod twice, in reverse order, and one unknown pod
        let mut items: Vec<Revert> = (0..100).rev().chain((0..100).rev()).map(revert).collect();
        items.insert(
            50,
            Revert { pod: "nobody".into(), plan: "plan-2".into(), target: RevertTarget::Baseline },
        );
        let checked = enforce(Decision { promote: vec![], revert: items, notes: vec![] }, &fleet);
        assert_eq!(checked.revert, (0..100).rev().map(revert).collect::<Vec<_>>());
        assert_eq!(checked.dropped.len(), 1);
    }
}
