//! The host's rules over any decision (docs/protocol.md §3): whatever a policy
//! says, it can only promote a pod to a plan HAProxy passed and that the pod
//! holds — and, when the pod's report names a render, only when that
//! render's content is content that passed, and when it names none, only
//! while a render id names content of the plan that passed (the line names
//! that render) — and only revert a pod to its baseline or to a passed
//! plan, never a pod whose render's content passed.

use super::{Decision, Fleet, Name, Outcome, Promote, Revert, RevertTarget, Trigger};
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
    /// `plan-not-held`, `content-not-passed`, `target-not-passed`,
    /// `content-passed`.
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
            let held = fleet.held.of(&p.pod, &p.plan);
            let why = match pod(&p.pod) {
                None => Some(("unknown-pod", "the pod is not in the fleet".into())),
                Some(_) if !passed(&p.plan) => {
                    Some(("plan-not-passed", "the plan has not passed".into()))
                }
                Some(state) if state.applied_plan.as_deref() != Some(&*p.plan) => {
                    Some(("plan-not-held", "the pod does not hold the plan".into()))
                }
                // another render of the plan, never judged or refused: it waits for its own verdict
                Some(_) if held.is_some_and(|(_, judged)| judged != Some(Outcome::Passed)) => {
                    let (render, judged) = held.expect("matched");
                    let of_another =
                        fleet.held.plans.get(&**render).is_some_and(|of| *of != p.plan);
                    let what = match judged {
                        Some(_) => "was refused",
                        None if of_another => "is a render of another plan",
                        None => "was never judged",
                    };
                    Some((
                        "content-not-passed",
                        format!("the pod holds render {render}, whose content {what}"),
                    ))
                }
                // a report without a render, and no render to name: the plan's
                // render was sent again with other content, not yet judged
                Some(_) if held.is_none() && fleet.held.plan_content_lost(&p.plan) => Some((
                    "content-not-passed",
                    "no render id names content of the plan that passed now".into(),
                )),
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
            let held = fleet.held.of(&r.pod, &r.plan);
            let why = match (&r.target, pod(&r.pod)) {
                (_, None) => Some(("unknown-pod", "the pod is not in the fleet".into())),
                (RevertTarget::Plan(plan), _) if !passed(plan) => {
                    Some(("target-not-passed", "the target plan has not passed".into()))
                }
                // a pod holding content of the plan that passed is not reverted for another render of it
                (_, Some(state))
                    if state.applied_plan.as_deref() == Some(&*r.plan)
                        && held.is_some_and(|(_, judged)| judged == Some(Outcome::Passed)) =>
                {
                    let (render, _) = held.expect("matched");
                    Some((
                        "content-passed",
                        format!("the pod holds render {render}, whose content passed"),
                    ))
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

/// The render a `promote` line names, always one whose content passed: the
/// one the pod's report names (the rules drop the promotion otherwise),
/// else, for a report without one, the render whose pass is the trigger,
/// else the plan's newest render whose content passed. `None` only for a
/// fleet that does not say which renders passed (not the gate's).
pub fn promoted_render(promote: &Promote, trigger: &Trigger, fleet: &Fleet) -> Option<Name> {
    if let Some((render, _)) = fleet.held.of(&promote.pod, &promote.plan) {
        return Some(render.clone());
    }
    match trigger {
        Trigger::Verdict(v) if v.plan == *promote.plan && v.outcome == Outcome::Passed => {
            Some(v.render.as_str().into())
        }
        _ => fleet.held.passed_render(&promote.plan).cloned(),
    }
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
    use std::sync::Arc;

    fn fleet() -> Fleet {
        Fleet {
            held: Default::default(),
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

    /// `ns/a` holds plan p2 through render `render`, judged `judged`.
    fn holding(render: &str, judged: Option<Outcome>) -> Fleet {
        let mut fleet = fleet();
        fleet.held = crate::Held {
            renders: Arc::new([("ns/a".into(), render.into())].into_iter().collect()),
            judged: Arc::new(judged.map(|j| (render.into(), j)).into_iter().collect()),
            plans: Arc::default(),
            passed: None,
        };
        fleet
    }

    /// [`holding`], the render judged as a render of plan `of`.
    fn holding_of(render: &str, judged: Outcome, of: &str) -> Fleet {
        let mut fleet = holding(render, Some(judged));
        fleet.held.plans = Arc::new([(render.into(), of.into())].into_iter().collect());
        fleet
    }

    /// A report naming a render of another plan (contradicting itself)
    /// holds nothing judged of the plan it reports: a pass of that render
    /// neither promotes the pod to its plan nor keeps it from a revert.
    #[test]
    fn a_render_of_another_plan_counts_for_nothing() {
        let promotion = Decision { promote: vec![promote("ns/a", "p2")], ..Decision::default() };
        let checked = enforce(promotion.clone(), &holding_of("r-1", Outcome::Passed, "p1"));
        assert!(checked.promote.is_empty());
        assert!(
            checked.dropped[0]
                .item
                .contains("render r-1, whose content is a render of another plan")
        );
        let checked = enforce(promotion, &holding_of("r-2", Outcome::Passed, "p2"));
        assert_eq!(checked.promote, vec![promote("ns/a", "p2")]);
        let revert = Decision {
            revert: vec![revert("ns/a", RevertTarget::Baseline)],
            ..Decision::default()
        };
        let checked = enforce(revert, &holding_of("r-1", Outcome::Passed, "p1"));
        assert_eq!(checked.revert.len(), 1, "{:?}", checked.dropped);
    }

    #[test]
    fn a_promotion_needs_the_pods_render_to_hold_content_that_passed() {
        let decision = || Decision { promote: vec![promote("ns/a", "p2")], ..Decision::default() };
        let checked = enforce(decision(), &holding("r-2", Some(Outcome::Passed)));
        assert_eq!(checked.promote, vec![promote("ns/a", "p2")]);
        for (judged, what) in [(None, "was never judged"), (Some(Outcome::Refused), "was refused")]
        {
            let checked = enforce(decision(), &holding("r-2b", judged));
            assert!(checked.promote.is_empty(), "{judged:?}");
            assert_eq!(checked.dropped[0].rule, "content-not-passed");
            assert!(
                checked.dropped[0].item.contains(&format!("render r-2b, whose content {what}"))
            );
        }
    }

    #[test]
    fn a_pod_holding_content_that_passed_is_not_reverted_for_another_render_of_its_plan() {
        let decision = || Decision {
            revert: vec![revert("ns/a", RevertTarget::Baseline)],
            ..Decision::default()
        };
        let checked = enforce(decision(), &holding("r-2", Some(Outcome::Passed)));
        assert!(checked.revert.is_empty());
        assert_eq!(checked.dropped[0].rule, "content-passed");
        for judged in [None, Some(Outcome::Refused)] {
            let checked = enforce(decision(), &holding("r-2", judged));
            assert_eq!(checked.revert.len(), 1, "{judged:?}");
        }
    }

    #[test]
    fn the_promote_line_names_the_pods_render_else_the_passing_one() {
        let verdict = |plan: &str| {
            Trigger::Verdict(policy_core::Verdict {
                plan: plan.into(),
                render: "r-v".into(),
                outcome: Outcome::Passed,
                newest: true,
                pinned: false,
                remembered: false,
                message: String::new(),
            })
        };
        let p = promote("ns/a", "p2");
        let held = holding("r-2", Some(Outcome::Passed));
        assert_eq!(promoted_render(&p, &verdict("p2"), &held).as_deref(), Some("r-2"));
        assert_eq!(promoted_render(&p, &verdict("p2"), &fleet()).as_deref(), Some("r-v"));
        // another trigger: the plan's newest render whose content passed
        let mut gates = fleet();
        gates.held.passed =
            Some(Arc::new([("p2".into(), "r-newest".into())].into_iter().collect()));
        assert_eq!(promoted_render(&p, &verdict("p1"), &gates).as_deref(), Some("r-newest"));
        assert_eq!(promoted_render(&p, &verdict("p1"), &fleet()), None);
    }

    #[test]
    fn a_plan_only_promotion_needs_a_render_naming_content_of_the_plan_that_passed() {
        let decision = || Decision { promote: vec![promote("ns/a", "p2")], ..Decision::default() };
        let mut gates = fleet();
        gates.held.passed = Some(Arc::new([("p2".into(), "r-2".into())].into_iter().collect()));
        assert_eq!(enforce(decision(), &gates).promote, vec![promote("ns/a", "p2")]);
        // r-2 was sent again with other content: no render id names p2's passed content
        gates.held.passed = Some(Arc::default());
        let checked = enforce(decision(), &gates);
        assert!(checked.promote.is_empty());
        assert_eq!(checked.dropped[0].rule, "content-not-passed");
        // a fleet that does not say: matched by plan
        assert_eq!(enforce(decision(), &fleet()).promote.len(), 1);
    }

    proptest::proptest! {
        /// Whatever a policy proposes over whatever the fleet holds, a kept
        /// promotion's pod holds the plan, and when its report names a
        /// render, that render's content passed; a kept revert never takes
        /// a pod off content of its plan that passed.
        #[test]
        fn no_promotion_to_content_that_did_not_pass(
            pods in proptest::collection::vec((0..3usize, proptest::option::of(0..4usize), 0..3usize), 1..8),
            promotions in proptest::collection::vec((0..8usize, 0..3usize), 0..12),
            reverts in proptest::collection::vec((0..8usize, 0..3usize), 0..12),
        ) {
            let plan = |i: usize| Name::from(format!("p{i}"));
            let outcome = |j: usize| [None, Some(Outcome::Passed), Some(Outcome::Refused)][j];
            let mut states = Vec::new();
            let mut renders = std::collections::HashMap::new();
            let mut judged = std::collections::HashMap::new();
            for (i, (applied, render, judgement)) in pods.iter().enumerate() {
                let pod: Name = format!("ns/{i}").into();
                states.push(PodState {
                    pod: pod.clone(),
                    applied_plan: Some(plan(*applied)),
                    running_plan: None,
                    baseline_plan: Some(plan(0)),
                });
                if let Some(r) = render {
                    let id: Name = format!("r-{r}").into();
                    renders.insert(pod, id.clone());
                    if let Some(o) = outcome(*judgement) {
                        judged.insert(id, o);
                    }
                }
            }
            let fleet = Fleet {
                pods: Arc::new(states),
                passed_plans: vec![plan(0), plan(1)].into(),
                refused_plans: vec![plan(2)].into(),
                held: crate::Held {
                    renders: Arc::new(renders),
                    judged: Arc::new(judged),
                    plans: Arc::default(),
                    passed: None,
                },
            };
            let pod = |i: usize| Name::from(format!("ns/{}", i % pods.len()));
            let decision = Decision {
                promote: promotions.iter().map(|(i, p)| Promote { pod: pod(*i), plan: plan(*p) }).collect(),
                revert: reverts
                    .iter()
                    .map(|(i, p)| Revert { pod: pod(*i), plan: plan(*p), target: RevertTarget::Baseline })
                    .collect(),
                notes: vec![],
            };
            let checked = enforce(decision, &fleet);
            for p in &checked.promote {
                let state = fleet.pods.iter().find(|s| s.pod == p.pod).unwrap();
                proptest::prop_assert_eq!(state.applied_plan.as_ref(), Some(&p.plan));
                if let Some((_, judged)) = fleet.held.of(&p.pod, &p.plan) {
                    proptest::prop_assert_eq!(judged, Some(Outcome::Passed));
                }
            }
            for r in &checked.revert {
                let state = fleet.pods.iter().find(|s| s.pod == r.pod).unwrap();
                let on_passed_content = state.applied_plan.as_ref() == Some(&r.plan)
                    && fleet.held.of(&r.pod, &r.plan).is_some_and(|(_, j)| j == Some(Outcome::Passed));
                proptest::prop_assert!(!on_passed_content, "{r:?}");
            }
        }
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
            held: Default::default(),
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
