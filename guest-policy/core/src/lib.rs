//! The default promotion and revert decision, as plain Rust.
//!
//! The types mirror the `rendergate:policy` WIT world (`wit/policy.wit`) one
//! to one, so the host's native default and every WebAssembly guest share the
//! same decision code: a guest converts its generated bindings into these
//! types, calls [`decide`], and converts back. With the `serde` feature
//! (the host's), they are also the JSON of policy fixtures
//! (docs/protocol.md §4): one definition, no mirror.

use std::collections::HashMap;
use std::sync::Arc;

/// A pod or plan name. On the host it is shared (`Arc<str>`): cloning one
/// copies a pointer, not the text, so a report, the fleet, a trigger and a
/// promotion name the same pod without a copy each. Inside a WebAssembly
/// guest it is a plain `String`: names arrive there owned, one per value,
/// from the component ABI, and turning each into an `Arc` would only copy
/// it again. Code that builds names with `.into()` and reads them through
/// `&*name` or `as_deref()` compiles for both.
#[cfg(not(target_arch = "wasm32"))]
pub type Name = Arc<str>;
#[cfg(target_arch = "wasm32")]
pub type Name = String;

/// One HAProxy pod as the gate knows it.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodState {
    /// "namespace/name".
    pub pod: Name,
    /// The plan the pod was last given.
    #[cfg_attr(feature = "serde", serde(default))]
    pub applied_plan: Option<Name>,
    /// The plan the pod's own HAProxy last loaded.
    #[cfg_attr(feature = "serde", serde(default))]
    pub running_plan: Option<Name>,
    /// The plan the pod falls back to on a revert.
    #[cfg_attr(feature = "serde", serde(default))]
    pub baseline_plan: Option<Name>,
}

/// What HAProxy said about a render.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Passed,
    Refused,
    /// The check could not run; HAProxy judged nothing.
    Unavailable,
}

/// A published verdict, as the policy sees it.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub plan: String,
    pub render: String,
    pub outcome: Outcome,
    #[cfg_attr(feature = "serde", serde(default))]
    pub newest: bool,
    #[cfg_attr(feature = "serde", serde(default))]
    pub pinned: bool,
    #[cfg_attr(feature = "serde", serde(default))]
    pub remembered: bool,
    #[cfg_attr(feature = "serde", serde(default))]
    pub message: String,
}

/// What the policy is asked about.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", deny_unknown_fields))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    Verdict(Verdict),
    /// A pod's new report.
    Applied(PodState),
}

/// The fleet at the moment of the trigger.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fleet {
    /// Shared, not copied: the gate hands the same pod list to every
    /// decision and updates it in place between them. The gate keeps it
    /// sorted by pod name.
    pub pods: Arc<Vec<PodState>>,
    /// Plans HAProxy accepted, oldest first (bounded). Shared like `pods`:
    /// they change only with a verdict, not with every decision.
    pub passed_plans: Arc<[Name]>,
    /// Plans HAProxy refused, oldest first (bounded).
    pub refused_plans: Arc<[Name]>,
    /// Which render each pod holds and what HAProxy said of its content:
    /// the host's rules read it (promotion to judged content only). Not in
    /// the WIT world, nor in the fixture format: a policy decides by plans
    /// and never sees it, and a fixture judges the policy's own decision.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub held: Held,
}

/// The renders the pods' reports name, and what HAProxy said of the
/// content each of those render ids names now (docs/behaviour.md, "The
/// promotion and revert policy"). Shared like the pod list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Pod → the render id its report names (pods whose report names none are absent).
    pub renders: Arc<HashMap<Name, Name>>,
    /// Render id → HAProxy's judgement of its present content; absent when
    /// that content was never judged (or could not be).
    pub judged: Arc<HashMap<Name, Outcome>>,
    /// Render id → the plan it was judged as, for the ids `judged` names;
    /// empty for a fleet that does not say (fixtures, hand-made fleets).
    pub plans: Arc<HashMap<Name, Name>>,
    /// Plan → its newest render whose content passed (the `promote` line of
    /// a pod whose report names no render names it), for every passed plan
    /// a render id still names passed content of. `None` for a fleet that
    /// does not say (fixtures, hand-made fleets): the gate's always does.
    pub passed: Option<Arc<HashMap<Name, Name>>>,
}

impl Held {
    /// The render `pod` reports holding as `plan`, and its content's
    /// judgement (`None`: not judged, or judged as a render of another plan,
    /// which says nothing of this plan's content); `None` when the pod's
    /// report names no render.
    pub fn of(&self, pod: &str, plan: &str) -> Option<(&Name, Option<Outcome>)> {
        let render = self.renders.get(pod)?;
        let its_plan = self.plans.get(&**render).is_none_or(|p| **p == *plan);
        Some((render, self.judged.get(&**render).copied().filter(|_| its_plan)))
    }

    /// The newest render of `plan` whose content passed, when the fleet says.
    pub fn passed_render(&self, plan: &str) -> Option<&Name> {
        self.passed.as_ref()?.get(plan)
    }

    /// Whether no render id names content of the passed `plan` that passed
    /// any more (its render was sent again with other content, not yet
    /// judged): a pod whose report names no render holds nothing judged.
    pub fn plan_content_lost(&self, plan: &str) -> bool {
        self.passed.as_ref().is_some_and(|passed| !passed.contains_key(plan))
    }
}

#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RevertTarget {
    Baseline,
    Plan(Name),
}

#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Promote {
    pub pod: Name,
    pub plan: Name,
}

#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Revert {
    pub pod: Name,
    /// The plan being reverted away from.
    pub plan: Name,
    pub target: RevertTarget,
}

/// What a policy decided for one trigger.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub promote: Vec<Promote>,
    pub revert: Vec<Revert>,
    /// Free-form remarks for the logs; never compared by fixtures.
    // Not read from JSON: a fixture's notes are not compared, whatever their shape.
    #[cfg_attr(
        feature = "serde",
        serde(skip_deserializing, skip_serializing_if = "Vec::is_empty")
    )]
    pub notes: Vec<String>,
}

/// The default policy's name, as `name()` reports it.
pub const DEFAULT_NAME: &str = "default";

/// The default decision (docs/behaviour.md, "The promotion and revert policy"):
///
/// - a pass for plan P: every pod that applied P and whose baseline is not P
///   may promote its baseline to P, only when it holds the content that
///   passed: a pod whose report names another render of P is not promoted
///   on this pass (it was on its own render's, or waits for it); a report
///   without a render id is matched by plan;
/// - a refusal of P: every pod that applied P but whose own HAProxy does not
///   run P is reverted to its baseline; a pod that loaded P is left alone,
///   its reload being stronger evidence than `haproxy -c`, and so is a pod
///   whose report names a render of P whose content passed;
/// - could not run: nothing;
/// - a pod reporting P applied after P passed may promote then (when what
///   it holds passed); a pod reporting a refused P it does not run is
///   reverted then (unless what it holds passed).
///
/// Which render a pod holds is in [`Fleet::held`], which the WIT world
/// does not carry: inside a guest every pod is matched by plan.
pub fn decide(trigger: &Trigger, fleet: &Fleet) -> Decision {
    let mut decision = Decision::default();
    let held = &fleet.held;
    match trigger {
        Trigger::Verdict(verdict) => {
            let plan: Name = verdict.plan.as_str().into(); // one copy, shared by every item
            match verdict.outcome {
                Outcome::Passed => {
                    // the plan, and this render when the report names one
                    let holds_this = |p: &PodState| {
                        applied_is(p, &plan)
                            && held
                                .of(&p.pod, &plan)
                                .is_none_or(|(render, _)| **render == verdict.render)
                    };
                    for pod in fleet.pods.iter().filter(|p| holds_this(p)) {
                        push_promote(&mut decision, pod, &plan);
                    }
                }
                Outcome::Refused => {
                    for pod in fleet.pods.iter().filter(|p| applied_is(p, &plan)) {
                        push_revert(&mut decision, held, pod, &plan);
                    }
                }
                Outcome::Unavailable => {}
            }
        }
        Trigger::Applied(pod) => {
            if let Some(plan) = &pod.applied_plan {
                if fleet.passed_plans.contains(plan) {
                    let passed = match held.of(&pod.pod, plan) {
                        Some((_, judged)) => judged == Some(Outcome::Passed),
                        None => !held.plan_content_lost(plan),
                    };
                    if passed {
                        push_promote(&mut decision, pod, plan);
                    }
                } else if fleet.refused_plans.contains(plan) {
                    push_revert(&mut decision, held, pod, plan);
                }
            }
        }
    }
    decision
}

fn applied_is(pod: &PodState, plan: &str) -> bool {
    pod.applied_plan.as_deref() == Some(plan)
}

fn push_promote(decision: &mut Decision, pod: &PodState, plan: &Name) {
    if pod.baseline_plan.as_deref() != Some(&**plan) {
        decision.promote.push(Promote { pod: pod.pod.clone(), plan: plan.clone() });
    }
}

fn push_revert(decision: &mut Decision, held: &Held, pod: &PodState, plan: &Name) {
    if pod.running_plan.as_deref() == Some(&**plan) {
        return; // its own HAProxy loaded the plan: stronger evidence than `-c`
    }
    if held.of(&pod.pod, plan).is_some_and(|(_, judged)| judged == Some(Outcome::Passed)) {
        return; // it holds content of the plan that passed: not reverted for another render
    }
    decision.revert.push(Revert {
        pod: pod.pod.clone(),
        plan: plan.clone(),
        target: RevertTarget::Baseline,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, applied: &str, running: &str, baseline: &str) -> PodState {
        let opt = |s: &str| (!s.is_empty()).then(|| s.into());
        PodState {
            pod: name.into(),
            applied_plan: opt(applied),
            running_plan: opt(running),
            baseline_plan: opt(baseline),
        }
    }

    fn verdict(plan: &str, outcome: Outcome) -> Trigger {
        Trigger::Verdict(Verdict {
            plan: plan.into(),
            render: format!("r-{plan}"),
            outcome,
            newest: true,
            pinned: false,
            remembered: false,
            message: String::new(),
        })
    }

    fn fleet() -> Fleet {
        Fleet {
            held: Default::default(),
            pods: vec![
                pod("ns/a", "p2", "p1", "p1"), // took p2, did not load it
                pod("ns/b", "p2", "p2", "p1"), // took p2 and loaded it
                pod("ns/c", "p1", "p1", "p1"), // never took p2
                pod("ns/d", "p2", "", "p2"),   // baseline already p2
            ]
            .into(),
            passed_plans: Arc::from([]),
            refused_plans: Arc::from([]),
        }
    }

    #[test]
    fn pass_promotes_pods_that_applied_the_plan_unless_already_baseline() {
        let d = decide(&verdict("p2", Outcome::Passed), &fleet());
        let pods: Vec<_> = d.promote.iter().map(|p| &*p.pod).collect();
        assert_eq!(pods, ["ns/a", "ns/b"]);
        assert!(d.promote.iter().all(|p| &*p.plan == "p2"));
        assert!(d.revert.is_empty());
    }

    #[test]
    fn refusal_reverts_only_pods_that_did_not_load_the_plan() {
        let d = decide(&verdict("p2", Outcome::Refused), &fleet());
        let pods: Vec<_> = d.revert.iter().map(|r| &*r.pod).collect();
        assert_eq!(pods, ["ns/a", "ns/d"]);
        assert!(d.revert.iter().all(|r| &*r.plan == "p2" && r.target == RevertTarget::Baseline));
        assert!(d.promote.is_empty());
    }

    #[test]
    fn unavailable_decides_nothing() {
        assert_eq!(decide(&verdict("p2", Outcome::Unavailable), &fleet()), Decision::default());
    }

    /// `ns/a` reports render `r-p2` (judged `judged`), `ns/b` another
    /// render of p2, `r-other` (passed); the others name no render.
    fn holding(judged: Option<Outcome>) -> Fleet {
        let mut f = fleet();
        let name = |s: &str| -> Name { s.into() };
        f.held = Held {
            renders: Arc::new(
                [(name("ns/a"), name("r-p2")), (name("ns/b"), name("r-other"))]
                    .into_iter()
                    .collect(),
            ),
            judged: Arc::new(
                [(name("r-other"), Outcome::Passed)]
                    .into_iter()
                    .chain(judged.map(|j| (name("r-p2"), j)))
                    .collect(),
            ),
            plans: Arc::default(),
            passed: Some(Arc::new([(name("p2"), name("r-other"))].into_iter().collect())),
        };
        f.passed_plans = vec!["p2".into()].into();
        f
    }

    #[test]
    fn a_pass_promotes_only_pods_holding_this_verdicts_render_or_naming_none() {
        // the verdict is on r-p2: ns/b holds r-other (passed too, another content)
        let d = decide(&verdict("p2", Outcome::Passed), &holding(Some(Outcome::Passed)));
        let pods: Vec<_> = d.promote.iter().map(|p| &*p.pod).collect();
        assert_eq!(pods, ["ns/a"]);
        // a fleet that says nothing of renders: matched by plan, as a guest sees it
        let d = decide(&verdict("p2", Outcome::Passed), &fleet());
        assert_eq!(d.promote.len(), 2);
    }

    #[test]
    fn a_refusal_leaves_alone_a_pod_holding_content_of_the_plan_that_passed() {
        let d = decide(&verdict("p2", Outcome::Refused), &holding(Some(Outcome::Refused)));
        let pods: Vec<_> = d.revert.iter().map(|r| &*r.pod).collect();
        assert_eq!(pods, ["ns/a", "ns/d"]); // ns/b holds r-other, which passed
    }

    #[test]
    fn a_late_report_promotes_only_when_what_the_pod_holds_passed() {
        let report = pod("ns/a", "p2", "p1", "p1");
        for (judged, promoted) in
            [(Some(Outcome::Passed), true), (None, false), (Some(Outcome::Refused), false)]
        {
            let d = decide(&Trigger::Applied(report.clone()), &holding(judged));
            assert_eq!(d.promote.len(), usize::from(promoted), "{judged:?}");
        }
        // a report without a render: matched by plan, unless no render id
        // names content of the plan that passed any more
        let plan_only = pod("ns/e", "p2", "p1", "p1");
        let mut f = holding(None);
        assert_eq!(decide(&Trigger::Applied(plan_only.clone()), &f).promote.len(), 1);
        f.held.passed = Some(Arc::default());
        assert!(decide(&Trigger::Applied(plan_only), &f).promote.is_empty());
    }

    #[test]
    fn late_report_of_a_passed_plan_promotes_and_of_a_refused_plan_reverts() {
        let mut f = fleet();
        f.passed_plans = vec!["p2".into()].into();
        let late = pod("ns/e", "p2", "p1", "p1");
        let d = decide(&Trigger::Applied(late.clone()), &f);
        assert_eq!(d.promote, vec![Promote { pod: "ns/e".into(), plan: "p2".into() }]);

        f.passed_plans = Arc::from([]);
        f.refused_plans = vec!["p2".into()].into();
        let d = decide(&Trigger::Applied(late), &f);
        assert_eq!(d.revert.len(), 1);
        assert!(d.promote.is_empty());

        // An unjudged plan: nothing either way.
        f.refused_plans = Arc::from([]);
        assert_eq!(
            decide(&Trigger::Applied(pod("ns/e", "p2", "p1", "p1")), &f),
            Decision::default()
        );
    }
}
