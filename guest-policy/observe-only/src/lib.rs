//! `observe-only`: never promotes, never reverts; notes what the default
//! policy would have done. For trying the gate on a fleet without acting.

use policy_core::{Decision, Fleet, Trigger};
use policy_guest::Guest;

struct ObserveOnly;

impl Guest for ObserveOnly {
    fn name() -> String {
        "observe-only".into()
    }

    fn decide(
        trigger: policy_guest::Trigger,
        fleet: policy_guest::Fleet,
    ) -> policy_guest::Decision {
        policy_guest::plain(trigger, fleet, decide)
    }
}

fn decide(trigger: &Trigger, fleet: &Fleet) -> Decision {
    let would = policy_core::decide(trigger, fleet);
    let mut notes: Vec<String> =
        would.promote.iter().map(|p| format!("would promote {} to {}", p.pod, p.plan)).collect();
    notes.extend(would.revert.iter().map(|r| format!("would revert {} from {}", r.pod, r.plan)));
    Decision { notes, ..Decision::default() }
}

policy_guest::export_policy!(ObserveOnly with_types_in policy_guest::bindings);
