//! Recording what `rendergate serve` reads, so that an incident can be
//! replayed (`serve --record FILE`, then `rendergate replay FILE`).
//!
//! A recording is NDJSON. Its first line names the format; then comes one
//! line per input line, in the order received, and a last line at end of
//! input:
//!
//! ```text
//! {"recording":"rendergate","version":2,"started_unix_ms":1735689600000}
//! {"at_ms":0,"outputs":0,"line":"{\"type\":\"pods_discovered\",\"pods\":[\"ns/a\"]}"}
//! {"at_ms":40,"outputs":3,"line":"{not json"}
//! {"at_ms":41,"outputs":4,"bytes":"7b2274797065223aff"}
//! {"at_ms":45,"outputs":4,"overlong":268435457}
//! {"at_ms":90,"outputs":6,"end":true}
//! ```
//!
//! - `at_ms`: milliseconds since the recording started, when the line
//!   arrived;
//! - `outputs`: how many output lines `serve` had written by then, its
//!   `hello` included (version 1, made before `hello`, counts one fewer;
//!   replay adds it back) and `shadow` lines left out (they come on the
//!   shadow policy's own timing, so a run with or without one paces the
//!   same). Replay
//!   feeds each line once its own run has written as many, so the checks
//!   finish on the same side of each input line as they did live, and the
//!   outputs are the same without waiting out the recorded gaps;
//! - `line`: the input line as received, without its newline; `bytes`
//!   instead for a line that is not UTF-8 (hex); `overlong` (its length)
//!   instead for a line longer than `serve` accepts, which only ever gives an
//!   `error` output; `end`: the input ended (absent if `serve` was killed).
//!
//! The file is created owner-only (0600: renders carry secrets), never
//! through a symlink (`O_NOFOLLOW`), and never over an existing file unless
//! [`Existing::Overwrite`] says so (`--record-overwrite`); then it is
//! truncated and made 0600 (docs/protocol.md, §1). With [`Existing::Append`]
//! (`--record-append`, for a `serve` that a supervisor restarts) an existing
//! recording is continued: the new process writes a header line of its own
//! where it starts, which marks the restart; its records count time and
//! outputs from there, and replay replays the restart as a new term.
//!
//! Bad lines are recorded like good ones, so a replay gives the same `error`
//! outputs. A render's files are recorded as the line spelled them (a
//! base64 `content` stays base64), so replay decodes them as `serve` did
//! and reaches the same checksum. Every record is flushed as it is written: a recording is
//! complete up to the moment `serve` died, but for the record it was
//! writing, which may be cut short (replay replays up to it and says so; a
//! `serve` that continues the recording ends that line first). A recording
//! that cannot be written any more is abandoned with one warning; the gate
//! goes on. One process records into a file at a time (`flock`): a second
//! is refused while the first holds it.

use crate::lines::{Line, LineReader};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The `recording` value of a recording's first line.
pub const FORMAT: &str = "rendergate";
/// The version of the format this build writes. Version 2's `outputs`
/// counts include `serve`'s `hello`; version 1 (before `hello`) is read too,
/// its counts one lower ([`Header::outputs_before_hello`]).
pub const VERSION: u32 = 2;

/// What is wrong with a recording's header or record.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}")]
    Json(serde_json::Error),
    #[error("expected exactly one of `line`, `bytes`, `overlong`, `end: true`")]
    NotOneItem,
    #[error("`bytes`: not hex at {at}")]
    NotHex { at: usize },
    #[error("`bytes`: odd number of hex digits")]
    OddHex,
    #[error("bad recording header: {0}")]
    Header(serde_json::Error),
    #[error(
        "a recording of format {format:?} version {version}; this build reads {FORMAT:?} version {VERSION}"
    )]
    Version { format: String, version: u32 },
}

impl RecordError {
    /// The record ends before its JSON does: what a write cut short leaves
    /// (serve killed mid-record, a full disk), not a record written wrong.
    pub fn cut_short(&self) -> bool {
        matches!(self, RecordError::Json(e) if e.is_eof())
    }
}

/// The longest record of an input line within `max_line`: each byte is
/// written as at most six (`\u001f`; hex takes two), plus the record's
/// fields. A longer record holds a line longer than `max_line`.
pub fn record_limit(max_line: usize) -> usize {
    max_line.saturating_mul(6).saturating_add(RECORD_FIELDS)
}

/// Room for a record's fields around its line: two numbers of up to 20
/// digits and the names, with margin.
const RECORD_FIELDS: usize = 128;

/// A recording's first line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub recording: String,
    pub version: u32,
    pub started_unix_ms: u64,
}

impl Header {
    /// What to add to each record's `outputs` to count as this build does:
    /// 1 for a version-1 recording, made before `serve` wrote `hello`.
    pub fn outputs_before_hello(&self) -> u64 {
        u64::from(self.version == 1)
    }
}

/// What one record holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// One input line, without its newline.
    Line(Vec<u8>),
    /// A line longer than `serve` accepts, by its length in bytes.
    Overlong(u64),
    /// The input ended.
    End,
}

/// One record after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// When it arrived, since the recording started.
    pub at: Duration,
    /// Output lines written before it arrived (unknown in a hand-written file).
    pub outputs: Option<u64>,
    pub item: Item,
}

/// A record as it is spelled on disk.
#[derive(Serialize, Deserialize)]
struct Raw<'a> {
    at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outputs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    line: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    overlong: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<bool>,
}

impl Entry {
    /// Parses one record (a line after the header).
    pub fn parse(text: &str) -> Result<Entry, RecordError> {
        let raw: Raw = serde_json::from_str(text).map_err(RecordError::Json)?;
        let at = Duration::from_millis(raw.at_ms);
        let item = match (raw.line, raw.bytes, raw.overlong, raw.end) {
            (Some(line), None, None, None) => Item::Line(line.into_owned().into_bytes()),
            (None, Some(hex), None, None) => Item::Line(from_hex(&hex)?),
            (None, None, Some(n), None) => Item::Overlong(n),
            (None, None, None, Some(true)) => Item::End,
            _ => return Err(RecordError::NotOneItem),
        };
        Ok(Entry { at, outputs: raw.outputs, item })
    }

    /// The record's line on disk, without the newline.
    pub fn to_line(&self) -> String {
        let held = match &self.item {
            Item::Line(bytes) => Held::Line(bytes),
            Item::Overlong(n) => Held::Overlong(*n),
            Item::End => Held::End,
        };
        serde_json::to_string(&Raw::new(self.at, self.outputs, held))
            .expect("records always serialize")
    }
}

/// What a record holds, borrowed: the recorder writes a line without
/// copying it into an [`Item`] first.
enum Held<'a> {
    Line(&'a [u8]),
    Overlong(u64),
    End,
}

impl<'a> From<Line<'a>> for Held<'a> {
    fn from(line: Line<'a>) -> Held<'a> {
        match line {
            Line::Read { bytes, .. } => Held::Line(bytes),
            Line::Overlong { length, .. } => Held::Overlong(length),
        }
    }
}

impl<'a> Raw<'a> {
    fn new(at: Duration, outputs: Option<u64>, held: Held<'a>) -> Raw<'a> {
        let mut raw = Raw {
            at_ms: at.as_millis() as u64,
            outputs,
            line: None,
            bytes: None,
            overlong: None,
            end: None,
        };
        match held {
            Held::Line(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => raw.line = Some(text.into()),
                Err(_) => raw.bytes = Some(crate::hex::hex(bytes)),
            },
            Held::Overlong(n) => raw.overlong = Some(n),
            Held::End => raw.end = Some(true),
        }
        raw
    }
}

/// Whether `text` (a file's first non-blank line) is a recording's header;
/// an error for a header of a version this build cannot read.
pub fn header(text: &str) -> Result<Option<Header>, RecordError> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(None);
    };
    if value.get("recording").is_none() {
        return Ok(None);
    }
    let header: Header = serde_json::from_value(value).map_err(RecordError::Header)?;
    if header.recording != FORMAT || !(1..=VERSION).contains(&header.version) {
        return Err(RecordError::Version { format: header.recording, version: header.version });
    }
    Ok(Some(header))
}

fn from_hex(text: &str) -> Result<Vec<u8>, RecordError> {
    let digit = |b: u8| char::from(b).to_digit(16);
    (text.as_bytes().chunks(2).enumerate())
        .map(|(i, pair)| match pair {
            [hi, lo] => match (digit(*hi), digit(*lo)) {
                (Some(hi), Some(lo)) => Ok((hi * 16 + lo) as u8),
                _ => Err(RecordError::NotHex { at: 2 * i }),
            },
            _ => Err(RecordError::OddHex),
        })
        .collect()
}

/// Writes a recording: give [`RecordedInput`] and [`CountedOutput`] a clone
/// each. Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    start: Instant,
    /// Output lines written so far.
    outputs: AtomicU64,
    /// `None` once writing failed.
    file: Mutex<Option<BufWriter<File>>>,
}

/// What to do when the recording's path already names a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Refuse: it is not ours to truncate.
    Refuse,
    /// Truncate it (a regular file only) and make it owner-only.
    Overwrite,
    /// Continue it (a regular file that is a recording, or empty), the new
    /// header marking the restart.
    Append,
}

/// Opens the recording's file as [`Existing`] says, owner-only and never
/// through a symlink; the errors say which rule refused.
fn open_recording(path: &Path, existing: Existing) -> io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    match existing {
        Existing::Refuse => options.create_new(true),
        Existing::Overwrite => options.create(true),
        Existing::Append => options.create(true).append(true).read(true),
    };
    let file = options.open(path).map_err(|e| {
        // O_EXCL refuses a symlink as existing, without following it: say which
        let symlink = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        match e.raw_os_error() {
            Some(libc::ELOOP | libc::EEXIST) if symlink => {
                io::Error::new(e.kind(), "is a symlink; a recording is never written through one")
            }
            Some(libc::EEXIST) => io::Error::new(
                e.kind(),
                "already exists; --record-overwrite replaces it, or name a new file",
            ),
            _ => e,
        }
    })?;
    // O_NONBLOCK only kept a FIFO from blocking the open: refused here.
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "is not a regular file"));
    }
    // One writer at a time: two serves appending at once (a restart that
    // overlaps the old process) would interleave their records. The lock
    // goes with the file, when the process ends however it ends.
    use rustix::fs::{FlockOperation, flock};
    if let Err(e) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
        return Err(match e {
            rustix::io::Errno::WOULDBLOCK => io::Error::new(
                io::ErrorKind::WouldBlock,
                "is being recorded by another process (it holds the file's lock)",
            ),
            e => e.into(),
        });
    }
    if existing == Existing::Overwrite {
        file.set_len(0)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    let length = file.metadata()?.len(); // under the lock: a last writer may just have ended
    if existing == Existing::Append && length > 0 {
        use std::io::{BufRead, BufReader, Read};
        use std::os::unix::fs::FileExt;
        let mut first = String::new();
        BufReader::new(Read::take(&file, 4096)).read_line(&mut first)?;
        if !matches!(header(first.trim()), Ok(Some(_))) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "is not a rendergate recording; --record-append continues only a recording",
            ));
        }
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        // A process killed mid-record (or a full disk) left a record cut
        // short: it is ended, so the new header starts a line of its own.
        let mut last = [0u8];
        file.read_exact_at(&mut last, length - 1)?;
        if last != *b"\n" {
            (&file).write_all(b"\n")?;
        }
    }
    Ok(file)
}

impl Recorder {
    /// Creates `path` (or, as `existing` says, truncates it) and writes the header.
    pub fn create(path: &Path, existing: Existing) -> io::Result<Recorder> {
        let mut file = BufWriter::new(open_recording(path, existing)?);
        let started_unix_ms =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let header = Header { recording: FORMAT.into(), version: VERSION, started_unix_ms };
        serde_json::to_writer(&mut file, &header)?;
        file.write_all(b"\n")?;
        file.flush()?;
        Ok(Recorder {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                start: Instant::now(),
                outputs: AtomicU64::new(0),
                file: Mutex::new(Some(file)),
            }),
        })
    }

    /// [`Recorder::create`] when a path is given.
    pub fn open(path: Option<&Path>, existing: Existing) -> io::Result<Option<Recorder>> {
        path.map(|path| Recorder::create(path, existing)).transpose()
    }

    fn record(&self, held: Held<'_>) {
        let outputs = Some(self.inner.outputs.load(Ordering::SeqCst));
        let raw = Raw::new(self.inner.start.elapsed(), outputs, held);
        let mut file = self.inner.file.lock().unwrap_or_else(|e| e.into_inner());
        let Some(writer) = file.as_mut() else { return };
        let written = serde_json::to_writer(&mut *writer, &raw)
            .map_err(io::Error::from)
            .and_then(|()| writer.write_all(b"\n"))
            .and_then(|()| writer.flush());
        if let Err(e) = written {
            tracing::warn!(
                "--record {}: cannot write, recording stopped: {e}",
                self.inner.path.display()
            );
            *file = None;
        }
    }

    fn count_outputs(&self, lines: u64) {
        self.inner.outputs.fetch_add(lines, Ordering::SeqCst);
    }

    fn uncount_outputs(&self, lines: u64) {
        self.inner.outputs.fetch_sub(lines, Ordering::SeqCst);
    }
}

/// The input of `serve`, recorded line by line as it is read (as it
/// arrives, not as the gate takes it). Without a recorder it only passes the
/// bytes on.
pub struct RecordedInput<R> {
    inner: R,
    /// The recorder and the lines of the input so far; a line longer than
    /// `serve`'s `--max-line` is recorded by its length only.
    recording: Option<(Recorder, LineReader)>,
    ended: bool,
}

impl<R> RecordedInput<R> {
    pub fn new(inner: R, recorder: Option<Recorder>, max_line: usize) -> Self {
        let recording = recorder.map(|recorder| (recorder, LineReader::new(max_line)));
        RecordedInput { inner, recording, ended: false }
    }

    fn take_bytes(&mut self, mut bytes: &[u8]) {
        let Some((recorder, lines)) = &mut self.recording else { return };
        while !bytes.is_empty() {
            let (used, done) = lines.take(bytes);
            bytes = &bytes[used..];
            if done && let Some(line) = lines.line() {
                recorder.record(Held::from(line));
                lines.forget_line(); // recorded: a big line is not kept
            }
        }
    }

    fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        let Some((recorder, lines)) = &mut self.recording else { return };
        // A last line without its newline is still a line.
        if lines.end()
            && let Some(line) = lines.line()
        {
            recorder.record(Held::from(line));
        }
        recorder.record(Held::End);
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for RecordedInput<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let room = buf.remaining() > 0;
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let new = &buf.filled()[before..];
        if new.is_empty() && room {
            this.end();
        } else {
            this.take_bytes(new);
        }
        Poll::Ready(Ok(()))
    }
}

/// The output of `serve`: counts the lines written, so that each recorded
/// input line says how far the output had got. `shadow` lines are not
/// counted ([`is_paced`]).
pub struct CountedOutput<W> {
    inner: W,
    recorder: Option<Recorder>,
    /// The start of the line being written, up to [`SHADOW_PREFIX`]'s length.
    line_start: Vec<u8>,
}

impl<W> CountedOutput<W> {
    pub fn new(inner: W, recorder: Option<Recorder>) -> Self {
        CountedOutput { inner, recorder, line_start: Vec::new() }
    }
}

/// How every `shadow` output line begins (`type` comes first: docs/protocol.md §2).
const SHADOW_PREFIX: &[u8] = br#"{"type":"shadow""#;

/// Whether an output line counts for replay's pacing: every line but `shadow`
/// lines, which a shadow policy writes on its own thread's timing.
pub fn is_paced(line: &[u8]) -> bool {
    !line.starts_with(SHADOW_PREFIX)
}

/// The paced lines that `bytes` ends, given the start of the line in progress
/// (`line_start`), and that start after them.
fn paced_lines(line_start: &[u8], bytes: &[u8]) -> (u64, Vec<u8>) {
    let mut start = line_start.to_vec();
    let mut paced = 0;
    for &byte in bytes {
        if byte == b'\n' {
            paced += u64::from(is_paced(&start));
            start.clear();
        } else if start.len() < SHADOW_PREFIX.len() {
            start.push(byte);
        }
    }
    (paced, start)
}

impl<W: AsyncWrite + Unpin> AsyncWrite for CountedOutput<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let Some(recorder) = &this.recorder else {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        };
        // Counted before the bytes go out: stdout may pass them on from
        // another thread before poll_write returns, and a controller that
        // answers a line must never be recorded as having answered too early.
        let (all, _) = paced_lines(&this.line_start, buf);
        recorder.count_outputs(all);
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        let accepted = match &written {
            Poll::Ready(Ok(n)) => &buf[..*n],
            _ => &[],
        };
        let (counted, line_start) = paced_lines(&this.line_start, accepted);
        recorder.uncount_outputs(all - counted);
        this.line_start = line_start;
        written
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn records_round_trip() {
        let entries = [
            Entry {
                at: Duration::from_millis(12),
                outputs: Some(3),
                item: Item::Line(br#"{"type":"x","s":"a\"b"}"#.to_vec()),
            },
            Entry {
                at: Duration::ZERO,
                outputs: Some(0),
                item: Item::Line(vec![b'{', 0xff, b'\r']),
            },
            Entry { at: Duration::from_millis(5), outputs: None, item: Item::Overlong(300) },
            Entry { at: Duration::from_millis(9), outputs: Some(7), item: Item::End },
        ];
        for entry in entries {
            let line = entry.to_line();
            assert_eq!(Entry::parse(&line).unwrap(), entry, "{line}");
        }
        assert!(Entry::parse(r#"{"at_ms":1,"line":"a","end":true}"#).is_err());
        assert!(Entry::parse(r#"{"at_ms":1,"bytes":"0g"}"#).is_err());
        assert!(Entry::parse(r#"{"at_ms":1,"bytes":"abc"}"#).is_err());
        assert!(Entry::parse(r#"{"at_ms":1,"bytes":"é0"}"#).is_err());
        assert!(Entry::parse(r#"{"type":"rendered"}"#).is_err());
    }

    #[test]
    fn a_record_of_a_line_within_the_limit_fits_the_record_limit() {
        let most = Duration::from_millis(u64::MAX);
        for line in [vec![0x1f; 100], vec![0xff; 100], vec![b'"'; 100]] {
            let entry = Entry { at: most, outputs: Some(u64::MAX), item: Item::Line(line) };
            assert!(entry.to_line().len() <= record_limit(100), "{}", entry.to_line());
        }
    }

    #[test]
    fn headers_are_told_from_events() {
        assert!(matches!(header(r#"{"type":"lost_leadership"}"#), Ok(None)));
        assert!(matches!(header("{not json"), Ok(None)));
        assert!(
            header(r#"{"recording":"rendergate","version":1,"started_unix_ms":5}"#)
                .unwrap()
                .is_some()
        );
        assert!(header(r#"{"recording":"rendergate","version":99,"started_unix_ms":5}"#).is_err());
        let v1 = header(r#"{"recording":"rendergate","version":1,"started_unix_ms":5}"#).unwrap();
        assert_eq!(v1.map(|h| h.outputs_before_hello()), Some(1), "version 1 lacks hello");
        let v2 = header(r#"{"recording":"rendergate","version":2,"started_unix_ms":5}"#).unwrap();
        assert_eq!(v2.map(|h| h.outputs_before_hello()), Some(0));
    }

    #[tokio::test]
    async fn input_lines_and_output_counts_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.ndjson");
        let recorder = Recorder::create(&path, Existing::Refuse).unwrap();
        let mut output = CountedOutput::new(Vec::new(), Some(recorder.clone()));
        // A shadow line, split mid-prefix across writes, is not counted.
        output.write_all(b"{\"type\":\"latch\"}\n{\"type\":\"sha").await.unwrap();
        output.write_all(b"dow\",\"trigger\":\"verdict\"}\n{\"type\":").await.unwrap();
        let input: &[u8] = b"first\n\n{bad\xff\nlast";
        let mut reader = RecordedInput::new(input, Some(recorder), crate::serve::DEFAULT_MAX_LINE);
        let mut all = Vec::new();
        reader.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, input, "the bytes pass through unchanged");

        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert!(header(lines.next().unwrap()).unwrap().is_some());
        let items: Vec<(Option<u64>, Item)> =
            lines.map(|l| Entry::parse(l).unwrap()).map(|e| (e.outputs, e.item)).collect();
        assert_eq!(
            items,
            [
                (Some(1), Item::Line(b"first".to_vec())),
                (Some(1), Item::Line(vec![])),
                (Some(1), Item::Line(b"{bad\xff".to_vec())),
                (Some(1), Item::Line(b"last".to_vec())),
                (Some(1), Item::End),
            ]
        );
    }
}
