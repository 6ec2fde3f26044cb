//! Hostile test policy `sleep`: sleeps 200 ms (a WASI clock subscription and poll) on every
//! decision, then decides like the default; the deadline must cut the sleep short.

use policy_guest::{Decision, Fleet, Guest, Trigger};

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-sleep".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        eprintln!("hostile-sleep: sleeping 200 ms");
        std::thread::sleep(std::time::Duration::from_millis(200));
        eprintln!("hostile-sleep: woke up");
        policy_guest::plain(trigger, fleet, policy_guest::policy_core::decide)
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
