//! Judging one render with HAProxy: the [`Checker`] seat, and the real
//! `haproxy -c` checker behind it.
//!
//! The gate only knows the trait. The checker here lays the render out in a
//! fresh check directory ([`layout`]) under a private base directory
//! ([`base`]), runs `haproxy -c` in it ([`haproxy`])
//! and reads HAProxy's words into a verdict ([`verdict`]). A sandbox wraps a
//! checker without the gate noticing: [`sandbox`] restricts what each
//! `haproxy -c` may do (Landlock, seccomp, namespaces, limits).

pub mod base;
pub mod dir;
pub mod haproxy;
pub mod identity;
pub mod layout;
pub mod sandbox;
pub mod verdict;

use crate::core::CheckOutcome;
use crate::render::Render;
use std::future::Future;
use std::pin::Pin;

pub use haproxy::{HaproxyChecker, HaproxyOptions};

/// A boxed future, so checkers can be chosen at run time (`dyn Checker`).
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = CheckOutcome> + Send + 'a>>;

/// Runs HAProxy's own judgement over one render.
pub trait Checker: Send + Sync + 'static {
    /// What judges: for `haproxy -c`, the binary's path and content hash.
    /// Read once; part of the verdict memory's key, so a changed binary never
    /// reuses an old answer.
    fn identity(&self) -> &str;

    /// Judges `render`, giving up at `deadline` with [`CheckOutcome::Unavailable`].
    /// Dropping the future must stop the check and clean up after it.
    fn check<'a>(&'a self, render: &'a Render, deadline: tokio::time::Instant) -> CheckFuture<'a>;
}
