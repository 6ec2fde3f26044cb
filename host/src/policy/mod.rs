//! The seat that decides promotions and reverts.
//!
//! A [`Policy`] proposes a decision for each trigger; the [`PolicySeat`]
//! falls back to the built-in default when a policy fails, and holds every
//! decision to the host's rules ([`rules`]) so no policy can widen exposure.
//! The native default ([`native`]) and WebAssembly components implement the
//! same trait, so swapping one for the other changes nothing in the gate.

pub mod native;
pub mod rules;

pub use native::NativeDefault;
pub use policy_core::{Decision, Fleet, PodState, Promote, Revert, RevertTarget, Trigger};

/// Why a policy gave no decision. The seat uses the default decision instead.
#[derive(Debug, thiserror::Error)]
#[error("policy {policy:?} failed: {reason}")]
pub struct PolicyError {
    pub policy: String,
    pub reason: String,
}

/// A promotion and revert strategy.
pub trait Policy: Send {
    /// The policy's own name, for logs.
    fn name(&self) -> &str;
    fn decide(&mut self, trigger: &Trigger, fleet: &Fleet) -> Result<Decision, PolicyError>;
}

/// What the seat settled on for one trigger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    pub promote: Vec<Promote>,
    pub revert: Vec<Revert>,
    /// The policy failed and the default decided instead.
    pub fell_back: Option<String>,
    /// Items the rules dropped, with why.
    pub dropped: Vec<String>,
}

/// A policy, held to the host's rules, with the default as its fallback.
pub struct PolicySeat {
    policy: Box<dyn Policy>,
}

impl PolicySeat {
    pub fn new(policy: Box<dyn Policy>) -> Self {
        PolicySeat { policy }
    }

    pub fn name(&self) -> &str {
        self.policy.name()
    }

    pub fn decide(&mut self, trigger: &Trigger, fleet: &Fleet) -> Settled {
        let (decision, fell_back) = match self.policy.decide(trigger, fleet) {
            Ok(d) => (d, None),
            Err(e) => (policy_core::decide(trigger, fleet), Some(e.to_string())),
        };
        let checked = rules::enforce(decision, fleet);
        Settled { promote: checked.promote, revert: checked.revert, fell_back, dropped: checked.dropped }
    }
}

impl Default for PolicySeat {
    fn default() -> Self {
        PolicySeat::new(Box::new(NativeDefault))
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
        fn decide(&mut self, _: &Trigger, _: &Fleet) -> Result<Decision, PolicyError> {
            Err(PolicyError { policy: "broken".into(), reason: "trap".into() })
        }
    }

    #[test]
    fn a_failing_policy_falls_back_to_the_default_decision() {
        let pod = PodState {
            pod: "ns/a".into(),
            applied_plan: Some("p1".into()),
            running_plan: None,
            baseline_plan: None,
        };
        let fleet = Fleet { pods: vec![pod.clone()], passed_plans: vec!["p1".into()], refused_plans: vec![] };
        let settled = PolicySeat::new(Box::new(Broken)).decide(&Trigger::Applied(pod), &fleet);
        assert_eq!(settled.promote, vec![Promote { pod: "ns/a".into(), plan: "p1".into() }]);
        assert!(settled.fell_back.unwrap().contains("trap"));
    }
}
