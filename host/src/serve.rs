//! `rendergate serve`: NDJSON events from a reader into the gate, NDJSON
//! outputs from the gate to a writer. A bad line becomes an `error` output
//! and never reaches the gate. Every output goes through one ordered path to
//! the writer, a write at a time: a verdict's group of lines (the gate hands
//! those over whole, [`Gate::start_grouped`]) is one write, so nothing comes
//! between its lines. At end of input the gate drains, then this returns.

use crate::protocol::{self, LineError};
use crate::runtime::{Gate, Output};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Longest input line accepted (a render of tens of thousands of backends
/// fits many times over); a longer one is an `error`, not an allocation.
pub const MAX_LINE: usize = 256 * 1024 * 1024;

/// Writes waiting for the writer. Bounded: a flood of bad lines waits for
/// the controller to read its errors instead of piling up in memory.
const WRITES_QUEUED: usize = 256;

/// Runs the gate over `input` until end of input, writing to `output`.
pub async fn serve<R, W>(
    mut input: R,
    output: W,
    gate: Gate,
    mut outputs: mpsc::Receiver<Vec<Output>>,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (writes, mut to_write) = mpsc::channel::<Vec<u8>>(WRITES_QUEUED);
    let writer = tokio::spawn(async move {
        // Buffered: tokio's stdout does each write on a blocking thread.
        let mut output = tokio::io::BufWriter::new(output);
        while let Some(bytes) = to_write.recv().await {
            output.write_all(&bytes).await?;
            // Flush when nothing else is ready: one write per burst, not per line.
            if to_write.is_empty() {
                output.flush().await?;
            }
        }
        output.flush().await?;
        Ok::<_, std::io::Error>(())
    });
    let gate_writes = writes.clone();
    let forwarder = tokio::spawn(async move {
        while let Some(group) = outputs.recv().await {
            let mut bytes = Vec::new();
            for output in &group {
                bytes.extend_from_slice(protocol::output_line(output).as_bytes());
                bytes.push(b'\n');
            }
            if gate_writes.send(bytes).await.is_err() {
                return; // the writer failed; its error is reported below
            }
        }
    });
    let write_error = |e: &LineError| {
        let mut bytes = protocol::error_line(e).into_bytes();
        bytes.push(b'\n');
        bytes
    };

    let mut number = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut input).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf).await?;
        if n == 0 {
            break;
        }
        number += 1;
        if buf.len() > MAX_LINE && buf.last() != Some(&b'\n') {
            skip_rest_of_line(&mut input).await?;
            let e = LineError { line: number, message: format!("line longer than {MAX_LINE} bytes") };
            if writes.send(write_error(&e)).await.is_err() {
                break;
            }
            continue;
        }
        let parsed = match std::str::from_utf8(&buf) {
            Ok(text) => protocol::parse_line(number, text),
            Err(e) => Err(LineError { line: number, message: format!("not UTF-8: {e}") }),
        };
        match parsed {
            Ok(Some(event)) => {
                if gate.send(event).await.is_err() {
                    break;
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("{e}");
                if writes.send(write_error(&e)).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(writes);
    gate.finish().await;
    forwarder.await.map_err(std::io::Error::other)?;
    writer.await.map_err(std::io::Error::other)?
}

async fn skip_rest_of_line<R: AsyncBufRead + Unpin>(input: &mut R) -> std::io::Result<()> {
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(());
        }
        let (used, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (chunk.len(), false),
        };
        input.consume(used);
        if done {
            return Ok(());
        }
    }
}
