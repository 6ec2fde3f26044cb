//! `scoped-revert`: docs/behaviour.md's default policy as a component. The logic
//! is `policy_core::decide`, the very function the host's native fallback
//! runs, so the two cannot drift — except where the world does not reach:
//! a component sees each pod's plans, not the render it holds, so every pod
//! is matched by plan (on a pass, every pod holding the plan is promoted;
//! the built-in default promotes only those holding the content that
//! passed). The host's rules keep every promotion to content that passed.

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
