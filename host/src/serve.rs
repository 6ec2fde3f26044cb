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
//! `max_line` is never held, only counted and skipped, and the line buffer
//! gives back what one big line made it grow to.

use crate::protocol::{self, LineError};
use crate::runtime::{Gate, Output};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// `--max-line`'s default: a render of tens of thousands of backends with
/// maps of several MB fits many times over.
pub const DEFAULT_MAX_LINE: usize = 64 * 1024 * 1024;
/// [`DEFAULT_MAX_LINE`] as the flag spells it.
pub const DEFAULT_MAX_LINE_FLAG: &str = "64MiB";

/// What the line buffer may keep between lines; past it, the buffer is
/// given back, so one big line does not pin its size for the weeks `serve`
/// runs.
const KEPT_CAPACITY: usize = 1024 * 1024;

/// Error lines waiting for the writer. Bounded: a flood of bad lines waits
/// for the controller to read its errors instead of piling up in memory.
const ERRORS_QUEUED: usize = 256;

/// Runs the gate over `input` until end of input, writing to `output`.
/// Lines longer than `max_line` bytes (newline excluded) get an `error`.
pub async fn serve<R, W>(
    mut input: R,
    output: W,
    gate: Gate,
    mut outputs: mpsc::Receiver<Vec<Output>>,
    max_line: usize,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
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
            // Flush when nothing else is ready: one write per burst, not per line.
            if outputs.is_empty() && error_lines.is_empty() {
                output.flush().await?;
            }
        }
        output.flush().await?;
        Ok::<_, std::io::Error>(())
    });

    let mut number = 0u64;
    let mut buf = Vec::new();
    loop {
        if buf.capacity() > KEPT_CAPACITY {
            buf = Vec::new();
        }
        buf.clear();
        let read = read_line(&mut input, &mut buf, max_line).await?;
        if read == LineRead::End {
            break;
        }
        number += 1;
        if read == LineRead::Overlong {
            let message = format!("longer than --max-line {}", crate::size::format(max_line));
            let e = LineError { line: number, message };
            tracing::warn!("{e}");
            if errors.send(e).await.is_err() {
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
                if errors.send(e).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(errors);
    gate.finish().await;
    writer.await.map_err(std::io::Error::other)?
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
enum LineRead {
    /// A line, in the buffer without its newline (the last line may lack one).
    Line,
    /// A line longer than the limit, read past; the buffer holds nothing of it.
    Overlong,
    /// End of input.
    End,
}

/// Reads one line into `buf` (empty on entry), holding at most `max` bytes
/// of it: the buffer's capacity is grown by doubling but never past `max`,
/// and a line that turns out longer is dropped and skipped to its newline.
async fn read_line<R: AsyncBufRead + Unpin>(input: &mut R, buf: &mut Vec<u8>, max: usize) -> std::io::Result<LineRead> {
    let mut overlong = false;
    let mut any = false;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match (any, overlong) {
                (false, _) => LineRead::End,
                (true, true) => LineRead::Overlong,
                (true, false) => LineRead::Line,
            });
        }
        any = true;
        let (part, done) = match memchr::memchr(b'\n', chunk) {
            Some(at) => (&chunk[..at], true),
            None => (chunk, false),
        };
        let used = part.len() + usize::from(done);
        if !overlong {
            if buf.len() + part.len() > max {
                overlong = true;
                *buf = Vec::new();
            } else {
                let wanted = buf.len() + part.len();
                if wanted > buf.capacity() {
                    let grown = wanted.max(buf.capacity() * 2).min(max);
                    buf.reserve_exact(grown - buf.len());
                }
                buf.extend_from_slice(part);
            }
        }
        input.consume(used);
        if done {
            return Ok(if overlong { LineRead::Overlong } else { LineRead::Line });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<(LineRead, Vec<u8>, usize)> {
        // A tiny BufReader: lines arrive in many chunks, as from a pipe.
        let mut input = tokio::io::BufReader::with_capacity(3, input);
        let mut out = vec![];
        loop {
            let mut buf = Vec::new();
            let read = read_line(&mut input, &mut buf, max).await.unwrap();
            if read == LineRead::End {
                return out;
            }
            let capacity = buf.capacity();
            out.push((read, buf, capacity));
        }
    }

    #[test]
    fn the_default_limit_is_spelled_as_it_is() {
        assert_eq!(crate::size::parse(DEFAULT_MAX_LINE_FLAG), Ok(DEFAULT_MAX_LINE));
    }

    #[tokio::test]
    async fn lines_past_the_limit_are_skipped_without_being_held() {
        let got = lines(b"abc\n\n0123456789\nabcdefgh\n0123456789x", 8).await;
        let reads: Vec<(&LineRead, &[u8])> = got.iter().map(|(r, b, _)| (r, b.as_slice())).collect();
        assert_eq!(
            reads,
            [
                (&LineRead::Line, &b"abc"[..]),
                (&LineRead::Line, &b""[..]),
                (&LineRead::Overlong, &b""[..]),
                (&LineRead::Line, &b"abcdefgh"[..]),
                (&LineRead::Overlong, &b""[..]),
            ]
        );
        assert!(got.iter().all(|(_, _, capacity)| *capacity <= 8), "never more room than the limit: {got:?}");
    }
}
