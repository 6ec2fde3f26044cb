//! SIGTERM and SIGINT end `check`, `serve` and `replay` cleanly: the command stops its
//! work so that the check in flight is dropped (haproxy's process group
//! stopped, its check directory removed) and the checker's own directory goes
//! with it, then exits with the shell's status for the signal: 143
//! (SIGTERM) or 130 (SIGINT) (docs/protocol.md, §1).

use anyhow::Context as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Set once a command ended on a signal: `main` then does not wait for the
/// runtime's blocking threads (stdin's read cannot be cancelled).
static RECEIVED: AtomicBool = AtomicBool::new(false);

/// The two signals, caught from the moment this is made.
pub struct Signals {
    term: Signal,
    int: Signal,
}

/// Which signal arrived.
#[derive(Clone, Copy, Debug)]
pub enum Received {
    Term,
    Int,
}

impl Received {
    pub fn name(self) -> &'static str {
        match self {
            Received::Term => "SIGTERM",
            Received::Int => "SIGINT",
        }
    }

    /// 128 + the signal's number, as a shell reports a process it killed.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(match self {
            Received::Term => 128 + libc::SIGTERM as u8,
            Received::Int => 128 + libc::SIGINT as u8,
        })
    }
}

impl Signals {
    /// Catches SIGTERM and SIGINT (their default action, dying at once,
    /// would leave the check's directory behind). Needs the runtime.
    pub fn catch() -> anyhow::Result<Signals> {
        let term = signal(SignalKind::terminate()).context("cannot catch SIGTERM")?;
        let int = signal(SignalKind::interrupt()).context("cannot catch SIGINT")?;
        Ok(Signals { term, int })
    }

    /// The next of the two to arrive.
    pub async fn recv(&mut self) -> Received {
        let received = tokio::select! {
            _ = self.term.recv() => Received::Term,
            _ = self.int.recv() => Received::Int,
        };
        RECEIVED.store(true, Ordering::SeqCst);
        received
    }
}

/// Whether a command ended on a signal.
pub fn received() -> bool {
    RECEIVED.load(Ordering::SeqCst)
}
