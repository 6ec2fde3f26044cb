//! `rendergate serve`: NDJSON events from a reader into the gate, NDJSON
//! outputs from the gate to a writer. A bad line becomes an `error` output
//! and never reaches the gate. One writer task writes every output, a write
//! at a time: a verdict's group of lines (the gate hands those over whole,
//! [`Gate::start_grouped`]) is one write, so nothing comes between its lines.
//! (The gate's groups reach the writer straight from the gate's channel: a
//! task in between would cost a wake-up per group.) At end of input the gate
//! drains, then this returns.
//!
//! Reading is bounded (docs/behaviour.md, "Bounded work"): a line longer than
//! `max_line` is never held, only counted and skipped ([`LineReader`]).

use crate::lines::{Line, LineReader};
use crate::protocol::{self, LineError};
use crate::runtime::{Gate, Output};
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// `--max-line`'s default: a render of tens of thousands of backends with
/// maps of several MB fits many times over.
pub const DEFAULT_MAX_LINE: usize = 64 * 1024 * 1024;
/// [`DEFAULT_MAX_LINE`] as the flag spells it.
pub const DEFAULT_MAX_LINE_FLAG: &str = "64MiB";

/// Error lines waiting for the writer. Bounded: a flood of bad lines waits
/// for the controller to read its errors instead of piling up in memory.
const ERRORS_QUEUED: usize = 256;

/// Runs the gate over `input` until end of input, writing to `output`:
/// first `hello`, before a line is read (docs/protocol.md), then the gate's
/// outputs. Lines longer than `max_line` bytes (newline excluded) get an
/// `error`.
pub async fn serve<R, W>(
    mut input: R,
    mut output: W,
    hello: &protocol::Hello,
    gate: Gate,
    mut outputs: mpsc::Receiver<Vec<Output>>,
    max_line: usize,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut greeting = protocol::hello_line(hello);
    greeting.push('\n');
    output.write_all(greeting.as_bytes()).await?;
    output.flush().await?;
    let (errors, mut error_lines) = mpsc::channel::<LineError>(ERRORS_QUEUED);
    // The one writer: the gate's groups and the reader's errors, each written
    // whole with one write, in the order the writer takes them.
    let writer = tokio::spawn(async move {
        // Buffered: tokio's stdout does each write on a blocking thread.
        let mut output = tokio::io::BufWriter::new(output);
        let mut bytes = Vec::new();
        let (mut outputs_open, mut errors_open) = (true, true);
        while outputs_open || errors_open {
            bytes.clear();
            tokio::select! {
                group = outputs.recv(), if outputs_open => match group {
                    Some(group) => {
                        for output in &group {
                            bytes.extend_from_slice(protocol::output_line(output).as_bytes());
                            bytes.push(b'\n');
                        }
                    }
                    None => outputs_open = false,
                },
                error = error_lines.recv(), if errors_open => match error {
                    Some(error) => {
                        bytes.extend_from_slice(protocol::error_line(&error).as_bytes());
                        bytes.push(b'\n');
                    }
                    None => errors_open = false,
                },
            }
            output.write_all(&bytes).await?;
            tracing::trace!(target: "rendergate::timing", "output written");
            // Flush when nothing else is ready: one write per burst, not per line.
            if outputs.is_empty() && error_lines.is_empty() {
                output.flush().await?;
            }
        }
        output.flush().await?;
        Ok::<_, std::io::Error>(())
    });

    let mut lines = LineReader::new(max_line);
    while let Some(line) = lines.next(&mut input).await? {
        tracing::trace!(target: "rendergate::timing", "line received");
        let parsed = match line {
            Line::Overlong { number, .. } => Err(LineError {
                line: number,
                message: format!("longer than --max-line {}", crate::size::format(max_line)),
            }),
            Line::Read { number, bytes } => match std::str::from_utf8(bytes) {
                Ok(text) => protocol::parse_line(number, text),
                Err(e) => Err(LineError { line: number, message: format!("not UTF-8: {e}") }),
            },
        };
        match parsed {
            Ok(Some(event)) => {
                tracing::trace!(target: "rendergate::timing", "line parsed");
                if gate.send(event).await.is_err() {
                    break;
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("{e}");
                let queued = match errors.try_send(e) {
                    Ok(()) => Ok(()),
                    Err(mpsc::error::TrySendError::Full(e)) => {
                        // the writer is behind: nobody reads the outputs
                        let health = gate.health().clone();
                        health.error_waiting(tokio::time::Instant::now().into_std());
                        let queued = errors.send(e).await.map_err(drop);
                        health.error_queued();
                        queued
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => Err(()),
                };
                if queued.is_err() {
                    break;
                }
            }
        }
    }
    drop(errors);
    gate.finish().await;
    writer.await.map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limit_is_spelled_as_it_is() {
        assert_eq!(crate::size::parse(DEFAULT_MAX_LINE_FLAG), Ok(DEFAULT_MAX_LINE));
    }
}
