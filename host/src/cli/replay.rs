//! `rendergate replay EVENTS.ndjson [--timeline FILE.svg|FILE.html] [--realtime]
//! [--fixtures OUT.json]`: runs the gate over a recorded input stream exactly
//! as `serve` does (the same flags, real checks, the same NDJSON loop), writes
//! the outputs to stdout, with `--timeline` draws the run, and with
//! `--fixtures` writes its policy decisions as fixture cases (`replay_fixtures.rs`).
//!
//! EVENTS is a `serve --record` recording ([`rendergate::record`]) or a plain
//! NDJSON event stream. How lines are fed:
//!
//! - a recording, by default: each line once this run has written as many
//!   outputs as the live run had when the line arrived, so every check ends
//!   on the same side of every input line as it did live: the outputs are
//!   the live run's, without its waiting. Should this run fall behind for
//!   good (another haproxy, another policy), a line waits no longer than its
//!   recorded gap or the time a check may take, whichever is longer, and the
//!   lines after it are fed relative to where this run stands; from then on
//!   "the time a check may take" is what checks took in this run (the
//!   longest, twice, with the check interval and a second), not the
//!   timeout's bound, so a policy whose decisions differ at every verdict
//!   costs a replay seconds per verdict, not a minute;
//! - a recording with `--realtime`: each line at its recorded time;
//! - a plain stream: line after line, as fast as the gate takes them, except
//!   that after a `rendered` line the next waits for that render's verdict.
//!   A run does not depend on how fast haproxy is; it is what a controller
//!   that waits for each verdict would see.

use super::replay_fixtures::FixtureLog;
use super::serve;
use anyhow::Context as _;
use rendergate::Event;
use rendergate::lines::{Line, LineReader};
use rendergate::policy::observe::DecisionObserver;
use rendergate::protocol;
use rendergate::record::{self, Entry, Item};
use rendergate::timeline::{self, Timeline};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::watch;
use tokio::time::Instant;

#[derive(clap::Args)]
#[group(skip)]
pub struct Args {
    /// A `serve --record` recording, or a plain NDJSON event stream.
    #[arg(value_name = "EVENTS.ndjson")]
    events: PathBuf,
    /// Also draw the run on a time axis: FILE.svg, or FILE.html for a page around it.
    #[arg(long, value_name = "FILE.svg|FILE.html", value_parser = timeline_path)]
    timeline: Option<PathBuf>,
    /// Feed a recording's lines at their recorded times (default: each once
    /// this run has written the outputs the live run had by then).
    #[arg(long)]
    realtime: bool,
    /// Also write each policy trigger, its fleet and the policy's decision
    /// as fixture cases for `rendergate policy test` (docs/protocol.md §4).
    #[arg(long, value_name = "OUT.json")]
    fixtures: Option<PathBuf>,
    #[command(flatten)]
    serve: serve::Args,
}

fn timeline_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "svg" | "html" | "htm" => Ok(path),
        _ => Err("expected FILE.svg or FILE.html".into()),
    }
}

/// How far this run's output has got.
#[derive(Default)]
struct Progress {
    /// Output lines written, `shadow` lines left out as the recording does.
    lines: u64,
    /// Verdicts written, per render id.
    verdicts: HashMap<String, u64>,
    /// The longest check of this run (a verdict's `duration_ms`).
    longest_check: Duration,
}

/// The context of an error reading EVENTS.
const CANNOT_READ: &str = "cannot read";

/// Capacity of the pipes to and from the serve loop.
const PIPE: usize = 64 * 1024;

pub async fn run(args: Args) -> ExitCode {
    let file = match tokio::fs::File::open(&args.events)
        .await
        .with_context(|| args.events.display().to_string())
    {
        Ok(file) => file,
        Err(e) => return super::fail(&e, 2),
    };
    let name = args
        .events
        .file_name()
        .map_or_else(|| args.events.display().to_string(), |n| n.to_string_lossy().into_owned());
    let timeline = args.timeline.as_ref().map(|_| {
        let title = if args.realtime {
            format!("replay of {name} (real time)")
        } else {
            format!("replay of {name}")
        };
        Arc::new(Mutex::new(Timeline::new(title)))
    });
    let fixtures = match &args.fixtures {
        None => None,
        Some(path) => match FixtureLog::create(path) {
            Ok(log) => Some(Arc::new(log)),
            Err(e) => {
                let e = anyhow::Error::from(e).context(format!("--fixtures {}", path.display()));
                return super::fail(&e, 2);
            }
        },
    };
    // A verdict comes within the interval and two checks (one in flight, then
    // this one); past that the feeder stops waiting for an output.
    let settle =
        args.serve.check_interval() + 2 * args.serve.check_timeout() + Duration::from_secs(5);
    let feeder = Feeder {
        path: args.events.clone(),
        realtime: args.realtime,
        settle,
        interval: args.serve.check_interval(),
        max_line: args.serve.max_line(),
        start: Instant::now(),
        timeline: timeline.clone(),
        fixtures: fixtures.clone(),
    };
    let (feed_end, serve_in) = tokio::io::duplex(PIPE);
    let (serve_out, collect_end) = tokio::io::duplex(PIPE);
    let (progress_tx, progress_rx) = watch::channel(Progress::default());
    let start = feeder.start;
    let collector = tokio::spawn(collect(collect_end, progress_tx, start, timeline.clone()));
    let feeding = tokio::spawn(feeder.feed(BufReader::new(file), feed_end, progress_rx));

    let observer = fixtures.clone().map(|log| log as Arc<dyn DecisionObserver>);
    let code = serve::run_on(args.serve, serve_in, serve_out, observer).await;
    if super::signals::received() {
        // stopped by SIGTERM or SIGINT: the rest of the recording is not fed
        feeding.abort();
        collector.abort();
        return code;
    }

    let fed = feeding.await.context("the feeder failed").and_then(|fed| fed);
    let _ = collector.await;
    if let Err(e) = fed.with_context(|| args.events.display().to_string()) {
        return super::fail(&e, 2);
    }
    if let (Some(path), Some(timeline)) = (&args.timeline, timeline) {
        let timeline = timeline.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) =
            timeline.write(path).with_context(|| format!("--timeline {}", path.display()))
        {
            return super::fail(&e, 1);
        }
        let kind = if timeline::is_html(path) { "page" } else { "picture" };
        tracing::info!("timeline {kind} written to {}", path.display());
    }
    if let (Some(path), Some(fixtures)) = (&args.fixtures, fixtures) {
        match fixtures.write().with_context(|| format!("--fixtures {}", path.display())) {
            Ok(cases) => tracing::info!("{cases} fixture cases written to {}", path.display()),
            Err(e) => return super::fail(&e, 1),
        }
    }
    code
}

/// Copies the serve loop's output lines to stdout, noting each one's time
/// and counting them for the feeder.
async fn collect(
    output: DuplexStream,
    progress: watch::Sender<Progress>,
    start: Instant,
    timeline: Option<Arc<Mutex<Timeline>>>,
) {
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        render: String,
        #[serde(default)]
        duration_ms: u64,
    }
    let mut lines = BufReader::new(output).lines();
    let mut stdout = tokio::io::stdout();
    let mut stdout_open = true;
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::error!("replay: reading the outputs: {e}");
                break;
            }
        };
        let at = start.elapsed();
        if stdout_open {
            let written = async {
                stdout.write_all(line.as_bytes()).await?;
                stdout.write_all(b"\n").await?;
                stdout.flush().await
            };
            if let Err(e) = written.await {
                // Keep draining, or the gate would stall on a full pipe.
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    super::stdout::mark_closed();
                } else {
                    tracing::warn!("replay: stdout: {e}; outputs are no longer printed");
                }
                stdout_open = false;
            }
        }
        if let Some(timeline) = &timeline {
            timeline.lock().unwrap_or_else(|e| e.into_inner()).output(at, &line);
        }
        let verdict = serde_json::from_str::<Kind>(&line).ok().filter(|k| k.kind == "verdict");
        let paced = rendergate::record::is_paced(line.as_bytes());
        progress.send_modify(|p| {
            p.lines += u64::from(paced);
            if let Some(verdict) = verdict {
                *p.verdicts.entry(verdict.render).or_default() += 1;
                let took = Duration::from_millis(verdict.duration_ms);
                p.longest_check = p.longest_check.max(took);
            }
        });
    }
}

struct Feeder {
    path: PathBuf,
    realtime: bool,
    settle: Duration,
    /// serve's `--check-interval`.
    interval: Duration,
    /// serve's `--max-line`: a longer line only gets an `error`, never a verdict.
    max_line: usize,
    start: Instant,
    timeline: Option<Arc<Mutex<Timeline>>>,
    /// `--fixtures`: told each line fed, to name the cases after them.
    fixtures: Option<Arc<FixtureLog>>,
}

/// The serve loop stopped reading: nothing more to feed.
struct Closed;

/// A recording's error, said at its line.
fn at_line(number: u64, e: impl std::error::Error + Send + Sync + 'static) -> anyhow::Error {
    anyhow::Error::from(e).context(format!("line {number}"))
}

impl Feeder {
    async fn feed(
        self,
        mut file: BufReader<tokio::fs::File>,
        mut input: DuplexStream,
        mut progress: watch::Receiver<Progress>,
    ) -> anyhow::Result<()> {
        // The first line tells a recording from a plain stream: read within a
        // record's bound, a header always fits.
        let mut lines = LineReader::new(record::record_limit(self.max_line));
        let header = match lines.next(&mut file).await.context(CANNOT_READ)? {
            Some(Line::Read { bytes, .. }) => {
                record::header(String::from_utf8_lossy(bytes).trim())?
            }
            _ => None,
        };
        let fed = match header {
            Some(header) => {
                let missing = header.outputs_before_hello();
                self.feed_recording(lines, file, missing, &mut input, &mut progress).await?
            }
            None => {
                if self.realtime {
                    tracing::warn!(
                        "--realtime: {} is not a recording (no times); feeding it as without",
                        self.path.display()
                    );
                }
                self.feed_plain(lines, file, &mut input, &mut progress).await?
            }
        };
        if let Ok(()) = fed {
            let _ = input.shutdown().await;
        }
        Ok(())
    }

    async fn feed_recording(
        &self,
        mut lines: LineReader,
        mut file: BufReader<tokio::fs::File>,
        mut missing_hello: u64,
        input: &mut DuplexStream,
        progress: &mut watch::Receiver<Progress>,
    ) -> anyhow::Result<Result<(), Closed>> {
        let mut previous = Duration::ZERO;
        // After a restart marker: this run's outputs before it (the new
        // process's own count starts at its hello), and when it started.
        let mut segment_outputs = 0u64;
        let mut segment_start = Duration::ZERO;
        // Renders fed since the segment began, with their verdicts by then;
        // and whether the segment's input ended (then it drained live).
        let mut in_segment: Vec<(String, u64)> = Vec::new();
        let mut ended = false;
        // How many outputs this run lags behind the live run, once it did.
        let mut lag = 0u64;
        // Input lines fed, as serve numbers them (the header is none).
        let mut fed = 0u64;
        // A record that did not read, and why: one cut short (serve killed
        // mid-write, a full disk) if the recording ends or serve restarts
        // right after it, else the recording is broken there.
        let mut torn: Option<(u64, anyhow::Error)> = None;
        while let Some(line) = lines.next(&mut file).await.context(CANNOT_READ)? {
            let (number, bytes) = match line {
                Line::Read { number, bytes } => (number, bytes),
                Line::Overlong { number, .. } => {
                    // Only a line longer than --max-line makes a record this
                    // long: serve gets one as long, and its error.
                    tracing::warn!(
                        "replay: recording line {number}: longer than the record of any line within --max-line {}; fed as a line past it",
                        rendergate::size::format(self.max_line)
                    );
                    fed += 1;
                    if write_filler(input, self.max_line as u64 + 1).await.is_err() {
                        return Ok(Err(Closed));
                    }
                    continue;
                }
            };
            let text = match std::str::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => {
                    let e_at = at_line(number, e);
                    // only a character cut at the end is a record cut short
                    match torn {
                        None if e.error_len().is_none() => torn = Some((number, e_at)),
                        Some((_, first)) => return Err(first),
                        None => return Err(e_at),
                    }
                    continue;
                }
            };
            if text.trim().is_empty() {
                continue;
            }
            let restart = record::header(text.trim())?;
            if let Some((at, e)) = torn.take() {
                if restart.is_none() {
                    return Err(e);
                }
                tracing::warn!(
                    "replay: recording line {at}: a record cut short before serve restarted ({e:#}); left out"
                );
            }
            // A header after the first: serve restarted here (--record-append).
            // One gate replays the whole recording, so the restart becomes
            // what it was for the fleet: a new term that knows nothing.
            if let Some(header) = restart {
                tracing::info!(
                    "replay: recording line {number}: serve restarted here; replayed as a new term (lost_leadership)"
                );
                // The dead process's outputs after its last input are not
                // recorded: its checks in flight are let finish first (the
                // live one may have died before some of them; then this waits
                // as long as a check can take).
                let awaited = std::mem::take(&mut in_segment);
                let finished = |p: &Progress| {
                    awaited.iter().all(|(render, before)| {
                        p.verdicts.get(render).copied().unwrap_or(0) > *before
                    })
                };
                if !ended
                    && tokio::time::timeout(self.settle, progress.wait_for(finished)).await.is_err()
                {
                    tracing::warn!(
                        "replay: recording line {number}: a render of the run before the restart got no verdict; replaying the restart anyway"
                    );
                }
                ended = false;
                fed += 1;
                let line = br#"{"type":"lost_leadership"}"#;
                self.note_input(fed, line);
                if write_line(input, line).await.is_err() {
                    return Ok(Err(Closed));
                }
                // the new process counts outputs from its own hello, and time from its start
                missing_hello = header.outputs_before_hello();
                segment_outputs = progress.borrow().lines.saturating_sub(1);
                segment_start += previous;
                previous = Duration::ZERO;
                lag = 0;
                continue;
            }
            let entry = match Entry::parse(text) {
                Ok(entry) => entry,
                Err(e) if e.cut_short() => {
                    torn = Some((number, at_line(number, e)));
                    continue;
                }
                Err(e) => return Err(at_line(number, e)),
            };
            if ended {
                continue; // after the end, only a restart is read on
            }
            if self.realtime {
                tokio::time::sleep_until(self.start + segment_start + entry.at).await;
            } else if let Some(outputs) = entry.outputs.map(|n| n + missing_hello + segment_outputs)
            {
                let target = outputs.saturating_sub(lag);
                // behind for good already: bounded by what checks take here
                let bound = match lag {
                    0 => self.settle,
                    _ => {
                        let longest = progress.borrow().longest_check;
                        self.settle.min(self.interval + 2 * longest + Duration::from_secs(1))
                    }
                };
                let gap = entry.at.saturating_sub(previous).max(bound);
                let reached = tokio::time::timeout(gap, progress.wait_for(|p| p.lines >= target))
                    .await
                    .is_ok();
                if !reached {
                    let now = progress.borrow().lines;
                    tracing::warn!(
                        "replay: recording line {number}: the live run had written {outputs} outputs by then, this run {} after waiting {}ms; feeding it anyway",
                        now + lag,
                        gap.as_millis()
                    );
                    lag = outputs.saturating_sub(now);
                }
            }
            previous = entry.at;
            let sent = match entry.item {
                Item::Line(line) => {
                    if let Some(render) = rendered_id(&line) {
                        let before = progress.borrow().verdicts.get(&render).copied().unwrap_or(0);
                        in_segment.push((render, before));
                    }
                    fed += 1;
                    self.note_input(fed, &line);
                    write_line(input, &line).await
                }
                Item::Overlong(length) => {
                    fed += 1;
                    write_filler(input, length).await
                }
                // serve's input ended; a restarted serve may follow (--record-append)
                Item::End => {
                    ended = true;
                    Ok(())
                }
            };
            if sent.is_err() {
                return Ok(Err(Closed));
            }
        }
        if let Some((at, e)) = torn {
            tracing::warn!(
                "replay: recording line {at}: the recording ends in a record cut short (serve killed, or its disk full, while writing it: {e:#}); replayed up to it"
            );
        }
        Ok(Ok(()))
    }

    /// Feeds a plain stream, whose first line `lines` has read already.
    async fn feed_plain(
        &self,
        mut lines: LineReader,
        mut file: BufReader<tokio::fs::File>,
        input: &mut DuplexStream,
        progress: &mut watch::Receiver<Progress>,
    ) -> anyhow::Result<Result<(), Closed>> {
        // serve's bound from the next line on; the first was read within a record's.
        lines.set_limit(self.max_line);
        let mut line = lines.line();
        while let Some(read) = line {
            // A line past --max-line only gets serve's error: it is fed as long, not held.
            let sent = match read {
                Line::Read { number, bytes } if bytes.len() <= self.max_line => {
                    self.feed_plain_line(number, bytes, input, progress).await
                }
                Line::Read { bytes, .. } => write_filler(input, bytes.len() as u64).await,
                Line::Overlong { length, .. } => write_filler(input, length).await,
            };
            if sent.is_err() {
                return Ok(Err(Closed));
            }
            line = lines.next(&mut file).await.context(CANNOT_READ)?;
        }
        Ok(Ok(()))
    }

    /// Feeds one line of a plain stream; after a `rendered` line, waits for its verdict.
    async fn feed_plain_line(
        &self,
        number: u64,
        bytes: &[u8],
        input: &mut DuplexStream,
        progress: &mut watch::Receiver<Progress>,
    ) -> std::io::Result<()> {
        // The same parse serve does: only a good `rendered` line gets a verdict.
        let rendered =
            match std::str::from_utf8(bytes).map(|text| protocol::parse_line(number, text)) {
                Ok(Ok(Some(Event::Rendered(render)))) => Some(render.id().to_owned()),
                _ => None,
            };
        let before =
            rendered.as_ref().map(|id| progress.borrow().verdicts.get(id).copied().unwrap_or(0));
        self.note_input(number, bytes);
        write_line(input, bytes).await?;
        if let (Some(id), Some(before)) = (&rendered, before) {
            let verdict_seen =
                progress.wait_for(|p| p.verdicts.get(id).copied().unwrap_or(0) > before);
            if tokio::time::timeout(self.settle, verdict_seen).await.is_err() {
                tracing::warn!(
                    "replay: line {number}: no verdict on render {id} within {}s; going on",
                    self.settle.as_secs()
                );
            }
        }
        Ok(())
    }

    /// Line `number` (as serve counts) is about to be fed.
    fn note_input(&self, number: u64, line: &[u8]) {
        if let (Some(timeline), Ok(text)) = (&self.timeline, std::str::from_utf8(line)) {
            timeline.lock().unwrap_or_else(|e| e.into_inner()).input(self.start.elapsed(), text);
        }
        if let Some(fixtures) = &self.fixtures {
            fixtures.fed(number, line);
        }
    }
}

/// The render id of a `rendered` line.
fn rendered_id(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Rendered {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        render: String,
    }
    let r: Rendered = serde_json::from_slice(line).ok()?;
    (r.kind == "rendered").then_some(r.render)
}

async fn write_line(input: &mut DuplexStream, line: &[u8]) -> std::io::Result<()> {
    input.write_all(line).await?;
    input.write_all(b"\n").await
}

/// A stand-in for a line too long for serve: as long, so it gets the same error.
async fn write_filler(input: &mut DuplexStream, mut length: u64) -> std::io::Result<()> {
    let chunk = vec![b'x'; PIPE];
    while length > 0 {
        let n = length.min(PIPE as u64) as usize;
        input.write_all(&chunk[..n]).await?;
        length -= n as u64;
    }
    input.write_all(b"\n").await
}
