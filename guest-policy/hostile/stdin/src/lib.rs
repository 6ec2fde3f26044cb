//! Hostile test policy `stdin`: reads its stdin to the end on every decision (it must be
//! empty, not the gate's NDJSON input), says what it read, then decides like the default.

use policy_guest::{Decision, Fleet, Guest, Trigger};
use std::io::Read;

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-stdin".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let mut input = Vec::new();
        let read = std::io::stdin().read_to_end(&mut input);
        eprintln!("hostile-stdin: read {} bytes ({read:?})", input.len());
        policy_guest::plain(trigger, fleet, policy_guest::policy_core::decide)
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
