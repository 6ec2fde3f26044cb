//! A policy's stdout and stderr: captured per decision into one bounded
//! buffer and logged once the decision is over, tagged with the policy's name
//! and the trigger (docs/policies.md, "What a policy may print").
//!
//! A write never fails and never waits: bytes past the budget are counted and
//! dropped, so a guest that prints a megabyte per call decides exactly as one
//! that prints nothing. Nothing here touches the process's own stdio, which
//! carries the NDJSON output.

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use std::sync::{Arc, Mutex};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Every byte dropped by any decision of this process, for
/// `rendergate_policy_output_dropped_bytes_total`.
static DROPPED_BYTES: std::sync::LazyLock<Counter> = std::sync::LazyLock::new(Counter::default);

/// The process-wide count of dropped guest output (a handle on one counter).
pub fn dropped_bytes_counter() -> Counter {
    DROPPED_BYTES.clone()
}

/// Guest output kept per decision, stdout and stderr together.
pub const GUEST_OUTPUT_CAP: usize = 64 * 1024;

/// What a guest may write in one `write` call (the WASI permit). Larger than
/// any `blocking-write-and-flush` chunk (4 KiB), so a guest never waits.
const WRITE_PERMIT: usize = 1 << 20;

#[derive(Default)]
struct Captured {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    dropped: u64,
}

/// The capture of one decision; hand out [`GuestOutput::stdout`] and
/// [`GuestOutput::stderr`] to the WASI context.
#[derive(Clone, Default)]
pub struct GuestOutput(Arc<Mutex<Captured>>);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Which {
    Stdout,
    Stderr,
}

/// One of the two streams of a [`GuestOutput`].
#[derive(Clone)]
pub struct GuestStream {
    output: GuestOutput,
    which: Which,
}

impl GuestOutput {
    pub fn stdout(&self) -> GuestStream {
        GuestStream { output: self.clone(), which: Which::Stdout }
    }

    pub fn stderr(&self) -> GuestStream {
        GuestStream { output: self.clone(), which: Which::Stderr }
    }

    /// What the guest wrote to stderr (a panic message), lossily decoded.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.lock().stderr).into_owned()
    }

    /// Bytes written past the budget.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Logs what was captured: one line per non-blank line written, then the
    /// count of dropped bytes if any.
    pub fn log(&self, policy: &str, trigger: &str) {
        let captured = self.lock();
        for (stream, bytes) in [("stdout", &captured.stdout), ("stderr", &captured.stderr)] {
            for line in String::from_utf8_lossy(bytes).lines().filter(|l| !l.trim().is_empty()) {
                tracing::info!(policy, trigger, stream, "guest: {line}");
            }
        }
        if captured.dropped > 0 {
            let dropped_bytes = captured.dropped;
            DROPPED_BYTES.inc_by(dropped_bytes);
            tracing::warn!(
                policy,
                trigger,
                dropped_bytes,
                "guest output past {GUEST_OUTPUT_CAP} bytes per decision dropped"
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Captured> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self, which: Which, bytes: &[u8]) {
        let mut captured = self.lock();
        let room = GUEST_OUTPUT_CAP.saturating_sub(captured.stdout.len() + captured.stderr.len());
        let kept = bytes.len().min(room);
        captured.dropped += (bytes.len() - kept) as u64;
        let buffer = match which {
            Which::Stdout => &mut captured.stdout,
            Which::Stderr => &mut captured.stderr,
        };
        buffer.extend_from_slice(&bytes[..kept]);
    }
}

impl IsTerminal for GuestStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for GuestStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.output.write(self.which, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestStream {
    async fn ready(&mut self) {}
}

/// For WASIp3 guests, which write through `AsyncWrite`.
impl tokio::io::AsyncWrite for GuestStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.output.write(self.which, buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_budget_is_counted_not_kept_and_never_an_error() {
        let output = GuestOutput::default();
        let (mut out, mut err) = (output.stdout(), output.stderr());
        out.write(Bytes::from_static(b"hello\n")).unwrap();
        for _ in 0..256 {
            err.write(Bytes::from(vec![b'x'; 4096])).unwrap();
        }
        let captured = output.lock();
        assert_eq!(captured.stdout, b"hello\n");
        assert_eq!(captured.stdout.len() + captured.stderr.len(), GUEST_OUTPUT_CAP);
        assert_eq!(captured.dropped, (6 + 256 * 4096 - GUEST_OUTPUT_CAP) as u64);
    }
}
