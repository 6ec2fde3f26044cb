//! `scoped-revert`: docs/behaviour.md's default policy as a component. The logic
//! is `policy_core::decide`, the very function the host's native fallback
//! runs, so the two cannot drift.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct ScopedRevert;

impl Guest for ScopedRevert {
    fn name() -> String {
        "scoped-revert".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        policy_guest::plain(trigger, fleet, policy_core::decide)
    }
}

policy_guest::export_policy!(ScopedRevert with_types_in policy_guest::bindings);
