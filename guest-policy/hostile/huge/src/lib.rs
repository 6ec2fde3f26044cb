//! Hostile test policy `huge`: returns a decision of about 100 MB (more than the memory limit allows).

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-huge".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let _ = trigger;
        let pod = fleet.pods.first().map(|p| p.pod.clone()).unwrap_or_default();
        let notes = (0..100).map(|_| "x".repeat(1 << 20)).collect();
        Decision {
            promote: vec![policy_guest::Promote { pod, plan: "p".into() }],
            revert: vec![],
            notes,
        }
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
