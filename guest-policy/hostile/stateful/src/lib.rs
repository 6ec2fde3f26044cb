//! Test policy `stateful`: counts its calls in a global and reports the count
//! in its notes. With a fresh store per decision every count is 1.

use policy_guest::{Decision, Fleet, Guest, Trigger};
use std::sync::atomic::{AtomicU64, Ordering};

static CALLS: AtomicU64 = AtomicU64::new(0);

struct Stateful;

impl Guest for Stateful {
    fn name() -> String {
        "hostile-stateful".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let _ = (trigger, fleet);
        let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        Decision { promote: vec![], revert: vec![], notes: vec![format!("call {calls}")] }
    }
}

policy_guest::export_policy!(Stateful with_types_in policy_guest::bindings);
