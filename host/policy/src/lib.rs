//! rendergate-policy: the seat that decides promotions and reverts, and the
//! host that runs policies as WebAssembly components (the `rendergate:policy`
//! world, wit/policy.wit; docs/policies.md).
//!
//! A [`Policy`] proposes a decision for each trigger; the [`PolicySeat`]
//! gives the trigger its [`Fallback`] when a policy fails (the built-in
//! default's decision, or nothing: `--policy-fallback`), and holds every
//! decision to the host's rules ([`rules`]) so no policy can widen exposure.
//! The native default ([`native`]) and WebAssembly components
//! ([`component`]) implement the same trait, so swapping one for the other
//! changes nothing in the gate; [`reload`] swaps them while it runs,
//! [`cache`] keeps compiled components, [`fixture`] runs a policy against
//! recorded cases, [`worker`] decides off the gate's task, [`observe`]
//! shows each decision to whoever asked to see it, and [`bench`]
//! generates the fleets a policy's decision cost is measured on.
//! [`shadow`] runs a second policy beside the live one, compared and never
//! applied.
//!
//! The decision types are policy-core's, shared with every guest; this crate
//! converts them to and from the WIT bindings in one place
//! (`component.rs`). It depends on the core for nothing but hashing, and on
//! nothing of the gate's runtime, protocol or checker: the `rendergate` crate
//! drives it and registers its [`PolicyMetrics`]. Start reading at
//! [`PolicySeat::decide`], then `component.rs`.

pub mod bench;
pub mod cache;
pub mod component;
pub mod epoch;
pub mod fixture;
pub mod metrics;
pub mod native;
pub mod observe;
pub mod reload;
pub mod rules;
pub mod shadow;
pub mod stdio;
pub mod worker;

pub use component::{ComponentPolicy, DecisionCost, PolicyLimits};
pub use metrics::PolicyMetrics;
pub use native::NativeDefault;
pub use policy_core::{
    Decision, Fleet, Held, Name, Outcome, PodState, Promote, Revert, RevertTarget, Trigger,
};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// Why a policy gave no decision.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyFailure {
    #[error("the decision ran past its deadline")]
    Deadline,
    #[error("the decision ran out of fuel")]
    Fuel,
    #[error("the decision hit the memory limit")]
    Memory,
    #[error("the policy trapped: {0}")]
    Trap(String),
    #[error("the decision is {bytes} bytes, over the cap of {cap}")]
    TooLarge { bytes: usize, cap: usize },
    #[error("bad component: {0}")]
    BadComponent(String),
    /// The host cannot run any policy here (the address space is too small).
    #[error("cannot run a policy here: {0}")]
    Unrunnable(String),
}

impl PolicyFailure {
    /// Every [`PolicyFailure::reason`].
    pub const REASONS: [&str; 7] =
        ["deadline", "fuel", "memory", "trap", "too-large", "bad-component", "unrunnable"];

    /// The metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            PolicyFailure::Deadline => "deadline",
            PolicyFailure::Fuel => "fuel",
            PolicyFailure::Memory => "memory",
            PolicyFailure::Trap(_) => "trap",
            PolicyFailure::TooLarge { .. } => "too-large",
            PolicyFailure::BadComponent(_) => "bad-component",
            PolicyFailure::Unrunnable(_) => "unrunnable",
        }
    }
}

/// What a trigger gets when its policy fails (`--policy-fallback`, docs/policies.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fallback {
    /// The built-in default policy's decision.
    #[default]
    Default,
    /// No decision: no promotion, no revert.
    None,
}

impl Fallback {
    /// The flag's value and the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Fallback::Default => "default",
            Fallback::None => "none",
        }
    }

    /// The decision this fallback gives `trigger`.
    fn decide(self, trigger: &Trigger, fleet: &Fleet) -> Decision {
        match self {
            Fallback::Default => policy_core::decide(trigger, fleet),
            Fallback::None => Decision::default(),
        }
    }
}

impl std::str::FromStr for Fallback {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "default" => Ok(Fallback::Default),
            "none" => Ok(Fallback::None),
            _ => Err(format!("{text:?}: expected default or none")),
        }
    }
}

/// A policy's failure on one trigger. The seat uses its [`Fallback`] instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("policy {policy:?} failed: {failure}")]
pub struct PolicyError {
    pub policy: String,
    pub failure: PolicyFailure,
}

/// A promotion and revert strategy. `decide` takes `&self`: a decision that
/// is running when the policy is replaced finishes on the policy it began with.
pub trait Policy: Send + Sync {
    /// The policy's own name, for logs and metrics.
    fn name(&self) -> &str;
    fn decide(&self, trigger: &Trigger, fleet: &Fleet) -> Result<Decision, PolicyError>;
    /// Whether the seat times each decision (`rendergate_policy_decision_seconds`).
    /// The built-in default decides in well under a microsecond, less than
    /// timing it would cost, and says no.
    fn timed(&self) -> bool {
        true
    }
    /// Whether the gate may decide on the task that drives it instead of the
    /// policy worker ([`worker`]). Only host code that cannot be slow says
    /// yes: the built-in default.
    fn inline(&self) -> bool {
        false
    }
}

/// The policy in force; [`reload`] replaces it.
#[derive(Clone)]
pub struct LivePolicy(Arc<Live>);

struct Live {
    policy: RwLock<Arc<dyn Policy>>,
    /// Bumped by every replacement, so a seat can keep its own handle and
    /// look at one atomic per decision instead of taking the lock.
    generation: AtomicU64,
}

impl std::fmt::Debug for LivePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LivePolicy").field(&self.current().name()).finish()
    }
}

impl LivePolicy {
    pub fn new(policy: Arc<dyn Policy>) -> Self {
        LivePolicy(Arc::new(Live { policy: RwLock::new(policy), generation: AtomicU64::new(0) }))
    }

    pub fn current(&self) -> Arc<dyn Policy> {
        self.0.policy.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn replace(&self, policy: Arc<dyn Policy>) {
        *self.0.policy.write().unwrap_or_else(|e| e.into_inner()) = policy;
        self.0.generation.fetch_add(1, Ordering::Release);
    }

    fn generation(&self) -> u64 {
        self.0.generation.load(Ordering::Acquire)
    }
}

/// What the seat settled on for one trigger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    pub promote: Vec<Promote>,
    pub revert: Vec<Revert>,
    /// The policy failed and the seat's [`Fallback`] decided instead.
    pub failure: Option<PolicyError>,
    /// Items the rules dropped.
    pub dropped: Vec<rules::Dropped>,
    pub notes: Vec<String>,
}

/// A policy, held to the host's rules, with a [`Fallback`] for its failures.
#[derive(Clone)]
pub struct PolicySeat {
    live: LivePolicy,
    /// The live policy as of `generation`.
    policy: Arc<dyn Policy>,
    generation: u64,
    fallback: Fallback,
    /// Shown every decision (`rendergate replay --fixtures`).
    observer: Option<Arc<dyn observe::DecisionObserver>>,
}

impl PolicySeat {
    pub fn new(policy: Arc<dyn Policy>) -> Self {
        PolicySeat::live(LivePolicy::new(policy))
    }

    /// A seat whose policy a [`reload::Reloader`] may replace.
    pub fn live(live: LivePolicy) -> Self {
        let generation = live.generation();
        PolicySeat {
            policy: live.current(),
            live,
            generation,
            fallback: Fallback::Default,
            observer: None,
        }
    }

    /// Shows every decision of this seat and its clones to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn observe::DecisionObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// What a trigger gets when the policy fails (the built-in default unless told).
    pub fn with_fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = fallback;
        self
    }

    pub fn fallback(&self) -> Fallback {
        self.fallback
    }

    pub fn name(&self) -> String {
        self.live.current().name().to_owned()
    }

    /// The name of the policy that decided the seat's last trigger (as of
    /// its last [`PolicySeat::decide`]; [`PolicySeat::name`] looks afresh).
    pub fn decided_by(&self) -> &str {
        self.policy.name()
    }

    /// Whether the policy in force may decide on the gate's own task ([`Policy::inline`]).
    pub fn inline(&mut self) -> bool {
        self.follow();
        self.policy.inline()
    }

    /// Takes the live policy if it was replaced.
    fn follow(&mut self) {
        let generation = self.live.generation();
        if generation != self.generation {
            (self.policy, self.generation) = (self.live.current(), generation);
        }
    }

    /// Decides one trigger; records failures, drops and timing in `metrics`.
    pub fn decide(&mut self, trigger: &Trigger, fleet: &Fleet, metrics: &PolicyMetrics) -> Settled {
        self.follow();
        let policy = &self.policy;
        let started = policy.timed().then(Instant::now);
        let (mut decision, failure) = match policy.decide(trigger, fleet) {
            Ok(d) => (d, None),
            Err(e) => (self.fallback.decide(trigger, fleet), Some(e)),
        };
        if let Some(started) = started {
            metrics.decided(started.elapsed());
        }
        if let Some(e) = &failure {
            let fallback = self.fallback.as_str();
            metrics.failed(&e.policy, &e.failure);
            metrics.fell_back(&e.policy, fallback);
            match self.fallback {
                Fallback::Default => tracing::warn!(
                    policy = e.policy,
                    reason = e.failure.reason(),
                    fallback,
                    "{e}; the default policy decided instead"
                ),
                Fallback::None => tracing::warn!(
                    policy = e.policy,
                    reason = e.failure.reason(),
                    fallback,
                    "{e}; no decision for this trigger (--policy-fallback none)"
                ),
            }
        }
        let notes = std::mem::take(&mut decision.notes);
        // The proposal as it was, for the observer: the rules consume it.
        let proposed = self.observer.as_ref().map(|_| decision.clone());
        let checked = rules::enforce(decision, fleet);
        for dropped in &checked.dropped {
            metrics.dropped(policy.name(), dropped.rule);
            tracing::warn!(policy = policy.name(), rule = dropped.rule, "dropped {}", dropped.item);
        }
        let (promote, revert, dropped) =
            (checked.promote.len(), checked.revert.len(), checked.dropped.len());
        // Reverts and dropped items matter to an operator; promotions are
        // routine (one per pod per passed plan) and would flood the log.
        if revert + dropped > 0 {
            let dropped_items: Vec<&str> =
                checked.dropped.iter().map(|d| d.item.as_str()).collect();
            tracing::info!(policy = policy.name(), promote, revert, dropped, dropped_items = ?dropped_items, "policy decided");
        } else if promote > 0 {
            tracing::debug!(policy = policy.name(), promote, "policy decided");
        }
        let settled = Settled {
            promote: checked.promote,
            revert: checked.revert,
            failure,
            dropped: checked.dropped,
            notes,
        };
        if let (Some(observer), Some(mut proposed)) = (&self.observer, proposed) {
            proposed.notes.clone_from(&settled.notes);
            observer.decided(&observe::Observed {
                trigger,
                fleet,
                policy: policy.name(),
                proposed: &proposed,
                settled: &settled,
            });
        }
        settled
    }
}

impl Default for PolicySeat {
    fn default() -> Self {
        PolicySeat::new(Arc::new(NativeDefault))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Broken;
    impl Policy for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        fn decide(&self, _: &Trigger, _: &Fleet) -> Result<Decision, PolicyError> {
            Err(PolicyError {
                policy: "broken".into(),
                failure: PolicyFailure::Trap("unreachable".into()),
            })
        }
    }

    /// One pod that applied p1, which passed.
    fn one_pod_applied_p1() -> (PodState, Fleet) {
        let pod = PodState {
            pod: "ns/a".into(),
            applied_plan: Some("p1".into()),
            running_plan: None,
            baseline_plan: None,
        };
        let fleet = Fleet {
            held: Default::default(),
            pods: vec![pod.clone()].into(),
            passed_plans: vec!["p1".into()].into(),
            refused_plans: Arc::from([]),
        };
        (pod, fleet)
    }

    #[test]
    fn a_failing_policy_falls_back_to_the_default_decision_and_is_counted() {
        let (pod, fleet) = one_pod_applied_p1();
        let metrics = PolicyMetrics::default();
        let settled =
            PolicySeat::new(Arc::new(Broken)).decide(&Trigger::Applied(pod), &fleet, &metrics);
        assert_eq!(settled.promote, vec![Promote { pod: "ns/a".into(), plan: "p1".into() }]);
        assert_eq!(settled.failure.unwrap().failure.reason(), "trap");
        assert_eq!(metrics.failures("broken", "trap"), 1);
        assert_eq!(metrics.fallbacks("broken", "default"), 1);
    }

    #[test]
    fn with_fallback_none_a_failing_policy_gives_no_decision_and_is_counted() {
        let (pod, fleet) = one_pod_applied_p1();
        let metrics = PolicyMetrics::default();
        let mut seat = PolicySeat::new(Arc::new(Broken)).with_fallback(Fallback::None);
        let settled = seat.decide(&Trigger::Applied(pod), &fleet, &metrics);
        assert!(settled.promote.is_empty() && settled.revert.is_empty(), "{settled:?}");
        assert_eq!(settled.failure.unwrap().failure.reason(), "trap");
        assert_eq!(metrics.failures("broken", "trap"), 1);
        assert_eq!(metrics.fallbacks("broken", "none"), 1);
        assert_eq!(metrics.fallbacks("broken", "default"), 0);
        assert_eq!("none".parse(), Ok(Fallback::None));
        assert!("nothing".parse::<Fallback>().is_err());
    }

    /// Promotes a pod the fleet does not have, beside a good promotion.
    struct Overreaching;
    impl Policy for Overreaching {
        fn name(&self) -> &str {
            "overreaching"
        }
        fn decide(&self, t: &Trigger, f: &Fleet) -> Result<Decision, PolicyError> {
            let mut d = policy_core::decide(t, f);
            d.promote.push(Promote { pod: "ns/ghost".into(), plan: "p1".into() });
            d.notes.push("reached too far".into());
            Ok(d)
        }
    }

    /// What an observer was shown of one decision.
    struct Shown {
        policy: String,
        proposed: Decision,
        promoted: Vec<Promote>,
        failed: bool,
    }

    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<Shown>>);
    impl observe::DecisionObserver for Seen {
        fn decided(&self, d: &observe::Observed<'_>) {
            self.0.lock().unwrap().push(Shown {
                policy: d.policy.to_owned(),
                proposed: d.proposed.clone(),
                promoted: d.settled.promote.clone(),
                failed: d.settled.failure.is_some(),
            });
        }
    }

    #[test]
    fn an_observer_sees_the_proposal_before_the_rules_and_what_was_settled() {
        let (pod, fleet) = one_pod_applied_p1();
        let metrics = PolicyMetrics::default();
        let seen = Arc::new(Seen::default());
        let mut seat = PolicySeat::new(Arc::new(Overreaching)).with_observer(seen.clone());
        let settled = seat.clone().decide(&Trigger::Applied(pod.clone()), &fleet, &metrics);
        PolicySeat::new(Arc::new(Broken)).decide(&Trigger::Applied(pod.clone()), &fleet, &metrics);
        seat = PolicySeat::new(Arc::new(Broken)).with_observer(seen.clone());
        seat.decide(&Trigger::Applied(pod), &fleet, &metrics);
        let seen = seen.0.lock().unwrap();
        let good = Promote { pod: "ns/a".into(), plan: "p1".into() };
        let ghost = Promote { pod: "ns/ghost".into(), plan: "p1".into() };
        assert_eq!(seen.len(), 2, "a seat without the observer showed nothing");
        let first = &seen[0];
        assert_eq!(first.policy, "overreaching");
        assert_eq!(first.proposed.promote, [good.clone(), ghost]);
        assert_eq!(first.proposed.notes, ["reached too far"]);
        assert_eq!((&first.promoted, first.failed), (&settled.promote, false));
        assert_eq!(settled.promote, std::slice::from_ref(&good), "the rules dropped the ghost");
        let second = &seen[1];
        assert_eq!((second.policy.as_str(), second.failed), ("broken", true));
        assert_eq!(second.proposed.promote, [good], "the fallback's proposal");
    }

    #[test]
    fn a_seat_follows_its_live_policy_when_it_is_replaced() {
        let (pod, fleet) = one_pod_applied_p1();
        let metrics = PolicyMetrics::default();
        let live = LivePolicy::new(Arc::new(NativeDefault));
        let mut seat = PolicySeat::live(live.clone());
        assert!(seat.decide(&Trigger::Applied(pod.clone()), &fleet, &metrics).failure.is_none());
        live.replace(Arc::new(Broken));
        let settled = seat.decide(&Trigger::Applied(pod), &fleet, &metrics);
        assert_eq!(
            settled.failure.map(|e| e.policy).as_deref(),
            Some("broken"),
            "the seat took the new policy"
        );
        assert_eq!(seat.name(), "broken");
    }
}
