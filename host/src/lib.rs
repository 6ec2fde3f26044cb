//! rendergate: a render gate for HAProxy fleets.
//!
//! A controller renders HAProxy configurations and dispatches them at once;
//! the gate runs `haproxy -c` over each render afterwards and decides what
//! the fleet does next (docs/behaviour.md).
//!
//! This crate owns the running gate: the tokio adapter ([`runtime`],
//! [`Gate`]) that drives the sans-IO [`core`], the check worker and the
//! policy worker; the NDJSON protocol ([`lines`], [`protocol`], [`serve`]);
//! metrics and health; `--record`; the CLI and the binary. What it drives
//! lives in crates of their own, re-exported here: [`core`]
//! (`rendergate-core`), [`check`] (`rendergate-check`), [`policy`]
//! (`rendergate-policy`) and [`timeline`] (`rendergate-timeline`). None of
//! them depends on this crate; nothing here is needed to judge one render or
//! run one policy. Start reading at [`runtime`] (its driver: events in,
//! effects out), then [`serve`].
//!
//! Embedding it in a Rust controller:
//!
//! ```no_run
//! # async fn demo() {
//! use rendergate::{Event, Gate, GateConfig, HaproxyChecker, HaproxyOptions, PolicySeat, Render};
//! use std::sync::Arc;
//!
//! let checker = Arc::new(HaproxyChecker::new(HaproxyOptions::default()));
//! let (gate, mut outputs) = Gate::start(GateConfig::default(), checker, PolicySeat::default());
//! // Read outputs concurrently: the gate waits when its output channel is full.
//! let reader = tokio::spawn(async move {
//!     while let Some(output) = outputs.recv().await {
//!         println!("{output:?}");
//!     }
//! });
//! gate.send(Event::Rendered(Render::new("plan-1", "r-1", "global\n", vec![]))).await.unwrap();
//! gate.finish().await; // judges what is queued, then closes the outputs
//! reader.await.unwrap();
//! # }
//! ```
//!
//! `examples/embed.rs` is a complete controller loop.

/// Judging one render with HAProxy: the `rendergate-check` crate.
pub use rendergate_check as check;
/// The gate as a sans-IO state machine: the `rendergate-core` crate.
pub use rendergate_core as core;
pub mod duration;
pub mod health;
pub(crate) use rendergate_core::hex;
pub mod http;
pub mod lines;
pub mod log_lines;
pub mod metrics;
/// Promotions and reverts, and the WebAssembly components that decide them:
/// the `rendergate-policy` crate.
pub use rendergate_policy as policy;
pub mod protocol;
pub mod record;
pub use rendergate_core::render;
pub mod runtime;
pub mod serve;
pub mod shadow;
pub mod stdio;
pub use rendergate_check::size;
/// The picture of a replay: the `rendergate-timeline` crate.
pub use rendergate_timeline as timeline;

pub use check::{Checker, HaproxyChecker, HaproxyOptions};
pub use core::{CheckOutcome, Event, LatchState, PodList, PodReport, Reason, Verdict};
pub use metrics::Metrics;
pub use policy::{Name, Policy, PolicySeat};
pub use render::{FileKind, Render, RenderFile};
pub use runtime::{Gate, GateConfig, Output};
