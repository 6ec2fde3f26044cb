//! Hostile test policy `slow`: answers like the default, but only after burning a lot of time.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-slow".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let mut n: u64 = 0;
        for i in 0..20_000_000_000u64 {
            n = std::hint::black_box(n ^ i);
        }
        let _ = n;
        policy_guest::plain(trigger, fleet, policy_guest::policy_core::decide)
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
