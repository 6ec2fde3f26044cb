//! rendergate-check: judging one render with HAProxy. The [`Checker`] seat,
//! and the real `haproxy -c` checker behind it. It depends on the core for
//! what a render and an outcome are, and on nothing of the gate's runtime,
//! its protocol or its policies; the `rendergate` crate drives it. Start
//! reading at [`HaproxyChecker`], then `prepare.rs` and `verdict.rs`.
//!
//! The gate only knows the trait. The checker here finds the binary and
//! names it ([`identity`]), lays the render out in a
//! fresh check directory ([`layout`]) under a private base directory
//! ([`base`]), runs `haproxy -c` in it ([`haproxy`])
//! and reads HAProxy's words into a verdict ([`verdict`]). A sandbox wraps a
//! checker without the gate noticing: [`sandbox`] restricts what each
//! `haproxy -c` may do (Landlock, seccomp, namespaces, limits).

pub mod at;
pub mod base;
pub mod checked_copy;
pub mod dir;
pub mod haproxy;
pub mod identity;
pub mod layout;
pub mod limits;
pub mod prepare;
pub mod sandbox;
pub mod size;
pub mod tokenize;
pub mod verdict;

use rendergate_core::CheckOutcome;
use rendergate_core::render::Render;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use haproxy::{HaproxyChecker, HaproxyOptions};
pub use limits::RenderLimits;

/// How long past its deadline `rendergate check` lets a check stop and clean
/// up (kill HAProxy's process group and wait for it) before giving up on it,
/// so the command never exits while HAProxy is still dying. (`serve` holds
/// its checks to the deadline exactly: the timeout covers the slot too.)
pub const DEADLINE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A boxed future, so checkers can be chosen at run time (`dyn Checker`).
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = Checked> + Send + 'a>>;

/// One check's outcome, and who gave it: the identity the check really ran
/// with, which verdict memory keeps the answer under. It can differ from
/// what [`Checker::identity`] said before the check, when the binary was
/// replaced in between.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    pub outcome: CheckOutcome,
    pub judge: Arc<str>,
}

/// Runs HAProxy's own judgement over one render.
pub trait Checker: Send + Sync + 'static {
    /// What judges now: for `haproxy -c`, the binary's path and content
    /// hash. Part of the verdict memory's key, so a changed binary never
    /// reuses an old answer. Asked before every turn of the gate that may
    /// consult memory: it must be cheap (the real checker `stat`s the binary
    /// and hashes it again only when it changed).
    fn identity(&self) -> Arc<str>;

    /// Judges `render`, giving up at `deadline` with [`CheckOutcome::Unavailable`],
    /// and says which judge answered. Dropping the future must stop the
    /// check and clean up after it.
    fn check<'a>(&'a self, render: &'a Render, deadline: tokio::time::Instant) -> CheckFuture<'a>;
}
