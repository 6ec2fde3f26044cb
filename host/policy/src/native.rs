//! The built-in default policy: `policy_core::decide`, run natively.

use super::{Decision, Fleet, Policy, PolicyError, Trigger};

/// docs/behaviour.md's default promotion and revert policy, without WebAssembly.
#[derive(Clone, Copy, Debug, Default)]
pub struct NativeDefault;

impl Policy for NativeDefault {
    fn name(&self) -> &str {
        policy_core::DEFAULT_NAME
    }

    fn decide(&self, trigger: &Trigger, fleet: &Fleet) -> Result<Decision, PolicyError> {
        Ok(policy_core::decide(trigger, fleet))
    }

    fn timed(&self) -> bool {
        false
    }

    fn inline(&self) -> bool {
        true
    }
}
