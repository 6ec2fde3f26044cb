//! rendergate-check: judging one render with HAProxy. It owns the
//! [`Checker`] seat and the real `haproxy -c` checker behind it: the check
//! directory, the run of HAProxy in its sandbox, and the reading of its
//! words into a verdict; also a render read from a directory ([`dir`], for
//! `rendergate check DIR`), the sizes its limits are written in
//! ([`size`]) and the gate's answers to a check's DNS queries ([`dns`]).
//!
//! It depends on the core for what a render and an outcome are, and must
//! never depend on the gate's runtime, its NDJSON protocol or its policies
//! (nor on the `rendergate` crate, which drives it): the gate only knows the
//! trait, and a sandbox wraps a checker without the gate noticing.
//!
//! Start reading at [`HaproxyChecker`]: its `run` is one check, step by
//! step. The checker finds the binary and names it ([`identity`]); a
//! [`standby`] makes a fresh check directory under a private base directory
//! ([`base`]) and the check's child in its [`sandbox`] (Landlock, seccomp,
//! namespaces, limits) before the render arrives; [`prepare`] checks the
//! render's [`limits`] and writes its files, byte for byte, where [`layout`]
//! arranges them; [`haproxy`] then gives the child the word to become
//! `haproxy -c`, one process group ([`process`]), and [`verdict`] reads what
//! it said. What the check leaves, its directory among it, is taken
//! care of after the verdict ([`aftercare`]). [`at`] opens a directory's
//! entries without following symlinks.

pub mod aftercare;
pub mod at;
pub mod base;
pub mod config_dir;
pub mod dir;
pub mod dns;
pub mod haproxy;
pub mod identity;
pub mod layout;
pub mod limits;
pub mod prepare;
pub mod process;
pub mod remove;
pub mod resident;
pub mod sandbox;
pub mod size;
pub mod standby;
pub mod trial;
pub mod verdict;
pub mod version;

/// What a unit test needs that a host may lack (every suite's one rule).
#[cfg(test)]
#[path = "../../../tests/needs.rs"]
mod needs;

use rendergate_core::CheckOutcome;
use rendergate_core::render::Render;
use std::pin::Pin;
use std::sync::Arc;

pub use haproxy::{HaproxyChecker, HaproxyOptions};
pub use limits::RenderLimits;

/// How long past its deadline `rendergate check` lets a check stop and clean
/// up (stop HAProxy's process group and wait for it) before giving up on it,
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
