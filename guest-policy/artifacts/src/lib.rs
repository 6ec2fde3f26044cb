//! Paths of the policy components built from guest-policy/ (by build.rs),
//! for tests, benchmarks and examples.

include!(concat!(env!("OUT_DIR"), "/components.rs"));

/// The shipped strategies, by the name each reports.
pub const SHIPPED: [(&str, &str); 4] = [
    ("scoped-revert", SCOPED_REVERT),
    ("fleet-revert", FLEET_REVERT),
    ("quorum-promote", QUORUM_PROMOTE),
    ("observe-only", OBSERVE_ONLY),
];
