//! Hostile test policy `recurse`: recurses without bound; the stack limit must stop it.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-recurse".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let _ = (trigger, &fleet);
        #[allow(unconditional_recursion)]
        fn deeper(n: u64) -> u64 {
            std::hint::black_box(deeper(std::hint::black_box(n + 1))) + 1
        }
        let _ = deeper(0);
        unreachable!()
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
