//! `rendergate serve`: NDJSON events from a reader into the gate, NDJSON
//! outputs from the gate to a writer. A bad line becomes an `error` output
//! and never reaches the gate; it is written as soon as it is read, never
//! inside a verdict's group of lines (the gate hands those over whole,
//! [`Gate::start_grouped`]). At end of input the gate drains, then this
//! returns.

use crate::protocol::{self, LineError};
use crate::runtime::{Gate, Output};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Longest input line accepted (a render of tens of thousands of backends
/// fits many times over); a longer one is an `error`, not an allocation.
pub const MAX_LINE: usize = 256 * 1024 * 1024;

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
    let (errors_tx, mut errors) = mpsc::unbounded_channel::<LineError>();
    let writer = tokio::spawn(async move {
        // Buffered: tokio's stdout does each write on a blocking thread.
        let mut output = tokio::io::BufWriter::new(output);
        let (mut outputs_open, mut errors_open) = (true, true);
        while outputs_open || errors_open {
            let lines = tokio::select! {
                o = outputs.recv(), if outputs_open => match o {
                    Some(group) => group.iter().map(protocol::output_line).collect(),
                    None => { outputs_open = false; continue; }
                },
                e = errors.recv(), if errors_open => match e {
                    Some(e) => vec![protocol::error_line(&e)],
                    None => { errors_open = false; continue; }
                },
            };
            for line in lines {
                output.write_all(line.as_bytes()).await?;
                output.write_all(b"\n").await?;
            }
            // Flush when nothing else is ready: one write per burst, not per line.
            if outputs.is_empty() && errors.is_empty() {
                output.flush().await?;
            }
        }
        output.flush().await?;
        Ok::<_, std::io::Error>(())
    });

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
            let _ = errors_tx.send(LineError { line: number, message: format!("line longer than {MAX_LINE} bytes") });
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
                let _ = errors_tx.send(e);
            }
        }
    }
    drop(errors_tx);
    gate.finish().await;
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
