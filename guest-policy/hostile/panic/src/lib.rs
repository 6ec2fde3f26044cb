//! Hostile test policy `panic`: panics; the trap must fall back to the default.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-panic".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let _ = (trigger, fleet);
        panic!("hostile-panic: this policy always panics")
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
