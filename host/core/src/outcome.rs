//! What one check of a render came to: HAProxy's judgement, or why there was none.

/// The result of one `haproxy -c` (or of any checker the driver runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// HAProxy would load it. `message` carries advisory remarks, if any
    /// (for example "valid but will not start: no listener").
    Passed { message: String },
    /// HAProxy judged the config and refused it; `message` is the readable
    /// account built from HAProxy's output.
    Refused { message: String },
    /// HAProxy judged nothing: binary missing, timeout, bad path in the
    /// render, a sandbox layer that failed... Never a rejection.
    Unavailable { reason: String },
}

impl CheckOutcome {
    /// Only HAProxy's own answers are worth remembering.
    pub fn is_judgement(&self) -> bool {
        !matches!(self, CheckOutcome::Unavailable { .. })
    }

    pub fn message(&self) -> &str {
        match self {
            CheckOutcome::Passed { message } | CheckOutcome::Refused { message } => message,
            CheckOutcome::Unavailable { reason } => reason,
        }
    }

    /// Which of the three it is, as policies see it.
    pub fn kind(&self) -> policy_core::Outcome {
        match self {
            CheckOutcome::Passed { .. } => policy_core::Outcome::Passed,
            CheckOutcome::Refused { .. } => policy_core::Outcome::Refused,
            CheckOutcome::Unavailable { .. } => policy_core::Outcome::Unavailable,
        }
    }

    /// The same outcome with its text rewritten.
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            CheckOutcome::Passed { message } => CheckOutcome::Passed { message: f(message) },
            CheckOutcome::Refused { message } => CheckOutcome::Refused { message: f(message) },
            CheckOutcome::Unavailable { reason } => CheckOutcome::Unavailable { reason: f(reason) },
        }
    }

    /// The label used by metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            CheckOutcome::Passed { .. } => "pass",
            CheckOutcome::Refused { .. } => "refused",
            CheckOutcome::Unavailable { .. } => "unavailable",
        }
    }
}
