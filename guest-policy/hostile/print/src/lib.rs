//! Hostile test policy `print`: prints on stdout and stderr on every call, then decides like the default.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        println!("hostile-print: asked my name");
        "hostile-print".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        println!("hostile-print: stdout: deciding for {} pods", fleet.pods.len());
        eprintln!("hostile-print: stderr: deciding for {} pods", fleet.pods.len());
        policy_guest::plain(trigger, fleet, policy_guest::policy_core::decide)
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
