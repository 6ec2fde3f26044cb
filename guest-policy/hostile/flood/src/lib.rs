//! Hostile test policy `flood`: writes 1 MiB to stderr on every call, then decides like the default.

use policy_guest::{Decision, Fleet, Guest, Trigger};
use std::io::Write;

struct Hostile;

impl Guest for Hostile {
    fn name() -> String {
        "hostile-flood".into()
    }

    fn decide(trigger: Trigger, fleet: Fleet) -> Decision {
        let line = format!("hostile-flood: {} pods {}\n", fleet.pods.len(), "x".repeat(1000));
        let mut stderr = std::io::stderr().lock();
        let mut written = 0;
        while written < 1 << 20 {
            let _ = stderr.write_all(line.as_bytes());
            written += line.len();
        }
        drop(stderr);
        policy_guest::plain(trigger, fleet, policy_guest::policy_core::decide)
    }
}

policy_guest::export_policy!(Hostile with_types_in policy_guest::bindings);
