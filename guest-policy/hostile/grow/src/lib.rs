//! Hostile test policy `grow`: grows memory without bound; the memory limit must stop it.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-grow".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let _ = (trigger, fleet);
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
