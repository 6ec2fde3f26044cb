//! Writing a rendergate policy component in Rust.
//!
//! The `rendergate:policy` world's bindings, generated once here, and the
//! conversions between them and `policy-core`'s plain types, so a policy is a
//! plain function over plain data:
//!
//! ```ignore
//! struct MyPolicy;
//! impl policy_guest::Guest for MyPolicy {
//!     fn name() -> String { "my-policy".into() }
//!     fn decide(trigger: policy_guest::Trigger, fleet: policy_guest::Fleet) -> policy_guest::Decision {
//!         policy_guest::plain(trigger, fleet, |t, f| policy_core::decide(t, f))
//!     }
//! }
//! policy_guest::export_policy!(MyPolicy with_types_in policy_guest::bindings);
//! ```

#[cfg(all(feature = "bump-allocator", target_arch = "wasm32", not(target_feature = "atomics")))]
pub mod bump;

#[cfg(all(feature = "bump-allocator", target_arch = "wasm32", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: bump::Bump = bump::Bump::new();

/// The generated bindings (a module of their own: the exported macros live
/// at the crate root, and must not collide with re-exports there).
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "policy",
        pub_export_macro: true,
        export_macro_name: "export_policy",
        default_bindings_module: "policy_guest::bindings",
    });
}

pub use bindings::rendergate::policy::types::{
    Decision, Fleet, Outcome, PodState, Promote, Revert, RevertTarget, Trigger, Verdict,
};
/// The world's types, under short names.
pub use bindings::{Guest, export_policy};
pub use policy_core;

use policy_core as plain;

/// Runs a plain-Rust policy over the world's types.
pub fn plain(
    trigger: Trigger,
    fleet: Fleet,
    decide: impl FnOnce(&plain::Trigger, &plain::Fleet) -> plain::Decision,
) -> Decision {
    let decision = decide(&trigger_in(trigger), &fleet_in(fleet));
    decision_out(decision)
}

// `Name` is `String` inside a guest, where these conversions are moves, and
// `Arc<str>` in a native build of this crate: `.into()` serves both.
#[allow(clippy::useless_conversion)]
fn pod_in(p: PodState) -> plain::PodState {
    plain::PodState {
        pod: p.pod.into(),
        applied_plan: p.applied_plan.map(Into::into),
        running_plan: p.running_plan.map(Into::into),
        baseline_plan: p.baseline_plan.map(Into::into),
    }
}

fn trigger_in(t: Trigger) -> plain::Trigger {
    match t {
        Trigger::Verdict(v) => plain::Trigger::Verdict(plain::Verdict {
            plan: v.plan,
            render: v.render,
            outcome: match v.outcome {
                Outcome::Passed => plain::Outcome::Passed,
                Outcome::Refused => plain::Outcome::Refused,
                Outcome::Unavailable => plain::Outcome::Unavailable,
            },
            newest: v.newest,
            pinned: v.pinned,
            remembered: v.remembered,
            message: v.message,
        }),
        Trigger::Applied(p) => plain::Trigger::Applied(pod_in(p)),
    }
}

#[allow(clippy::useless_conversion)] // as in `pod_in`
fn fleet_in(f: Fleet) -> plain::Fleet {
    plain::Fleet {
        held: Default::default(),
        pods: std::sync::Arc::new(f.pods.into_iter().map(pod_in).collect()),
        passed_plans: f.passed_plans.into_iter().map(Into::into).collect(),
        refused_plans: f.refused_plans.into_iter().map(Into::into).collect(),
    }
}

fn decision_out(d: plain::Decision) -> Decision {
    Decision {
        promote: d
            .promote
            .into_iter()
            .map(|p| Promote { pod: text(p.pod), plan: text(p.plan) })
            .collect(),
        revert: d
            .revert
            .into_iter()
            .map(|r| Revert {
                pod: text(r.pod),
                plan: text(r.plan),
                target: match r.target {
                    plain::RevertTarget::Baseline => RevertTarget::Baseline,
                    plain::RevertTarget::Plan(p) => RevertTarget::Plan(text(p)),
                },
            })
            .collect(),
        notes: d.notes,
    }
}

/// A name as the world's `string`: a move inside a guest, where `Name` is
/// `String`; a copy where it is `Arc<str>` (native builds of this crate).
#[cfg(target_arch = "wasm32")]
fn text(name: plain::Name) -> String {
    name
}

#[cfg(not(target_arch = "wasm32"))]
fn text(name: plain::Name) -> String {
    name.to_string()
}
