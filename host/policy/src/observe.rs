//! Watching the seat decide: a [`DecisionObserver`] given to a
//! [`PolicySeat`](super::PolicySeat) is shown every trigger the seat
//! decides, with its fleet, what the policy proposed and what the seat
//! settled on. It sees the gate's own decisions, on whichever thread makes
//! them (the policy worker, or the driver for the built-in default), so no
//! second decision is ever made to learn what the first was.
//! `rendergate replay --fixtures` turns what it sees into fixture cases.

use super::{Decision, Fleet, Settled, Trigger};

/// One decision as the seat made it.
#[derive(Debug)]
pub struct Observed<'a> {
    pub trigger: &'a Trigger,
    pub fleet: &'a Fleet,
    /// The live policy's name.
    pub policy: &'a str,
    /// What the policy proposed, before the host's rules; when the policy
    /// failed ([`Settled::failure`]), what the seat's fallback proposed.
    pub proposed: &'a Decision,
    /// What the seat settled on: the proposal held to the host's rules.
    pub settled: &'a Settled,
}

/// Shown each decision, in the order the seat makes them; called on the
/// deciding thread, so it should be quick (copy what it needs and return).
pub trait DecisionObserver: Send + Sync {
    fn decided(&self, decision: &Observed<'_>);
}
