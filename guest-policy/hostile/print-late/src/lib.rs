//! Hostile test policy `print-late`: prints only once the fleet has 4 pods or more, then decides like the default.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-print-late".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        if fleet.pods.len() >= 4 {
            println!("hostile-print-late: {} pods now", fleet.pods.len());
        }
        policy_guest::plain(trigger, fleet, policy_guest::policy_core::decide)
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
