//! Hostile test policy `spin`: loops forever; the deadline or fuel must stop it.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-spin".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let _ = (trigger, fleet);
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
