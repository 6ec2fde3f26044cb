//! Reading HAProxy's words: how `haproxy -c` ended and every line it
//! printed, turned into a verdict kind and a message a person can act on
//! (docs/checking.md, "Verdicts").
//!
//! The output is read as a stream ([`Transcript::feed`]): each line is
//! classified as it arrives and then dropped, so the kind comes from every
//! line however long the output is, and memory holds only the bounded
//! excerpt the message needs (the alerts with their context, the first
//! warnings, the head of unexplained output). Everything kept is sanitised
//! first: the check directory's host path never leaks out.
//!
//! The exit status is HAProxy's verdict; the lines explain it. 0 passes, 2
//! is HAProxy's "valid, but will not start (no listener)" and passes with a
//! remark, unless a failure line (`[EMERG]`, `[ALERT]`, `[CRIT]`, `[ERR]`
//! at its start, or HAProxy's own head of one, `[ALERT]    (pid)`, anywhere
//! in it) came first. Any other status is a refusal when HAProxy printed a failure
//! line or only advisory ones, and "could not run" when it printed nothing
//! or lines that are not HAProxy's: never a pass.
//!
//! HAProxy's words never say that the gate's memory limit was hit: a render
//! writes part of them (quoted names, Lua). That is measured instead, by a
//! second run under a larger bound ([`needs_second_run`], [`settle`]).

use rendergate_core::CheckOutcome;
use std::collections::VecDeque;
use std::path::Path;

/// How the `haproxy` process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl From<std::process::ExitStatus> for Exit {
    fn from(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            // neither: stopped/continued can't be seen by wait(); treat as a failure
            (None, None) => Exit::Code(-1),
        }
    }
}

/// Lines that mean HAProxy judged the config and refused it.
const JUDGING: [&[u8]; 4] = [b"[EMERG]", b"[ALERT]", b"[CRIT]", b"[ERR]"];
/// How HAProxy starts a failure line (its label padded, then the pid:
/// `[ALERT]    (9582) : …`), looked for anywhere in a line: a render's
/// code may print a partial line, and HAProxy's alert then lands after it.
/// Only this form: a warning that quotes the word `[ALERT]` is no alert.
const JUDGING_HEADS: [&[u8]; 4] =
    [b"[EMERG]    (", b"[ALERT]    (", b"[CRIT]     (", b"[ERR]      ("];
/// The length of a failure line's head but one: what of a line's read is
/// kept for a head that the next read finishes.
const SEAM: usize = 11;
/// Lines that only advise.
const ADVISORY: [&[u8]; 4] = [b"[WARNING]", b"[NOTICE]", b"[INFO]", b"[DEBUG]"];
/// Lines HAProxy prints around a valid config (`-V` adds the last one).
const REMARKS: [&[u8]; 3] = [
    b"Configuration file has no error but will not start (no listener)",
    b"Warnings were found.",
    b"Configuration file is valid",
];
/// HAProxy's closing words after the real alerts; they add nothing.
const SUMMARIES: [&str; 2] =
    ["Error(s) found in configuration file", "Fatal errors found in configuration"];
/// Bytes of a tag: enough to recognise the longest (`[WARNING]`) and the remarks.
const HEAD: usize = 72;

/// Output lines shown around each alert, before and after.
const OUTPUT_CONTEXT: usize = 3;
/// Config lines shown before and after the line an alert names.
const CONFIG_BEFORE: usize = 4;
const CONFIG_AFTER: usize = 3;
/// Enough alerts to act on; a config with a thousand errors needs the first few.
const MAX_BLOCKS: usize = 20;
/// How much of unexplained output a "could not run" reason quotes.
const QUOTE_LIMIT: usize = 2000;
/// How much of one output line is kept for the message.
const LINE_LIMIT: usize = 1024;
/// Blanks kept at the start of a line (the rest are read and dropped).
const LEADING_BLANKS: usize = 16;
/// How much of the warnings a pass's message keeps.
const WARNINGS_LIMIT: usize = 16 * 1024;

/// What the classification needs besides HAProxy's output.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The render's own config: alerts naming `[haproxy.cfg:N]` show its lines.
    pub config: &'a [u8],
    /// Removed from everything shown.
    pub check_dir: &'a Path,
    pub haproxy_path: &'a Path,
}

impl Context<'_> {
    /// The line as it may be shown: sanitised, scrubbed, cut (`cut`: more
    /// of it was read than held).
    fn keep(&self, raw: &[u8], cut: bool) -> String {
        let mut kept = sanitise(&String::from_utf8_lossy(raw), self.check_dir, self.haproxy_path);
        if kept.len() > LINE_LIMIT || cut {
            kept.truncate(char_floor(&kept, LINE_LIMIT));
            kept.push_str(" …");
        }
        kept
    }
}

/// An alert's block while its following lines are still arriving.
#[derive(Debug)]
struct Block {
    /// Output lines as kept ([`Context::keep`]).
    lines: Vec<String>,
    /// Index of the alert within `lines`.
    alert: usize,
    /// Lines after the alert still to come.
    after: usize,
}

/// HAProxy's output, read line by line.
#[derive(Debug)]
pub struct Transcript<'a> {
    ctx: Context<'a>,
    /// Bytes of the line being read (at most what is kept of it).
    partial: Vec<u8>,
    /// The line being read is longer than what is kept of it.
    partial_cut: bool,
    /// The last bytes read of the line, for a tag split between two reads.
    seam: Vec<u8>,
    /// A failure line's head somewhere in the line being read.
    tagged: bool,
    /// The last lines as read (cut to what is kept, and whether they were
    /// cut), for the context before an alert.
    recent: VecDeque<(Vec<u8>, bool)>,
    blocks: Vec<Block>,
    /// Blocks of summary lines, shown only when there is no other alert.
    summary_blocks: Vec<Block>,
    alerts: usize,
    summaries: usize,
    /// Lines that are neither judging nor advisory.
    unexplained: usize,
    lines: usize,
    no_listener: bool,
    /// The previous line was advisory (for `   | …` continuation lines).
    previous_advisory: bool,
    in_warning: bool,
    warnings: String,
    warnings_dropped: usize,
    /// The head of the output, for a reason that must quote it.
    head: String,
    bytes: u64,
}

impl<'a> Transcript<'a> {
    pub fn new(ctx: Context<'a>) -> Self {
        Transcript {
            ctx,
            partial: Vec::new(),
            partial_cut: false,
            seam: Vec::with_capacity(2 * SEAM),
            tagged: false,
            recent: VecDeque::with_capacity(OUTPUT_CONTEXT + 1),
            blocks: Vec::new(),
            summary_blocks: Vec::new(),
            alerts: 0,
            summaries: 0,
            unexplained: 0,
            lines: 0,
            no_listener: false,
            previous_advisory: false,
            in_warning: false,
            warnings: String::new(),
            warnings_dropped: 0,
            head: String::new(),
            bytes: 0,
        }
    }

    /// The next bytes of HAProxy's output (stdout and stderr, in order).
    pub fn feed(&mut self, mut bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        while let Some(end) = memchr::memchr(b'\n', bytes) {
            self.scan(&bytes[..end]);
            self.take(&bytes[..end]);
            self.line();
            bytes = &bytes[end + 1..];
        }
        self.scan(bytes);
        self.take(bytes);
    }

    /// Looks for a failure line's head ([`JUDGING_HEADS`]) anywhere in the
    /// line, however long and in however many reads it comes.
    fn scan(&mut self, piece: &[u8]) {
        if self.tagged {
            return;
        }
        self.seam.extend_from_slice(&piece[..piece.len().min(SEAM)]);
        self.tagged = has_judging_head(&self.seam) || has_judging_head(piece);
        if piece.len() >= SEAM {
            self.seam.clear();
            self.seam.extend_from_slice(&piece[piece.len() - SEAM..]);
        } else {
            self.seam.drain(..self.seam.len().saturating_sub(SEAM));
        }
    }

    /// Keeps what is kept of a piece of the current line. The sanitiser
    /// needs the host paths whole, so a little more than the kept length is
    /// held. Blanks at the start of a line are held only up to a few, so that
    /// a tag after a megabyte of them is still seen.
    fn take(&mut self, mut piece: &[u8]) {
        // only blanks read of the line so far (anything else is held)
        if leading_blanks(&self.partial) == self.partial.len() {
            let blanks = leading_blanks(piece);
            let held = blanks.min(LEADING_BLANKS.saturating_sub(self.partial.len()));
            self.partial.extend_from_slice(&piece[..held]);
            piece = &piece[blanks..];
        }
        let room = (LINE_LIMIT
            + self.ctx.check_dir.as_os_str().len()
            + self.ctx.haproxy_path.as_os_str().len())
        .saturating_sub(self.partial.len());
        self.partial.extend_from_slice(&piece[..piece.len().min(room)]);
        self.partial_cut |= piece.len() > room;
    }

    /// Classifies the line read so far and starts the next.
    fn line(&mut self) {
        let raw = std::mem::take(&mut self.partial);
        let body = &raw[leading_blanks(&raw)..];
        let blank = body.is_empty() && !self.partial_cut;
        let head = &body[..body.len().min(HEAD)];
        let judging = std::mem::take(&mut self.tagged)
            || !blank && JUDGING.iter().any(|tag| head.starts_with(tag));
        self.seam.clear();
        let continuation = head.starts_with(b"|");
        let advisory = !blank
            && !judging
            && if continuation {
                self.previous_advisory
            } else if REMARKS.iter().any(|r| body.starts_with(r)) {
                self.no_listener |= body.starts_with(REMARKS[0]);
                true
            } else {
                ADVISORY.iter().any(|tag| head.starts_with(tag))
            };
        if !blank {
            self.lines += 1;
            if !judging && !advisory {
                self.unexplained += 1;
            }
        }
        self.previous_advisory = advisory;
        // Most lines of a long output are warnings: a line is sanitised only
        // when something still keeps it.
        let keep = || self.ctx.keep(&raw, self.partial_cut);
        let mut kept: Option<String> = None;
        self.in_warning = head.starts_with(b"[WARNING]") || (continuation && self.in_warning);
        if self.in_warning {
            if self.warnings.len() < WARNINGS_LIMIT {
                let k = kept.get_or_insert_with(keep);
                self.warnings.push('\n');
                self.warnings.push_str(k);
            } else {
                self.warnings_dropped += 1;
            }
        }
        if self.head.len() < QUOTE_LIMIT * 2 && !blank {
            let k = kept.get_or_insert_with(keep);
            if !self.head.is_empty() {
                self.head.push('\n');
            }
            self.head.push_str(k);
        }
        for block in self.blocks.iter_mut().chain(&mut self.summary_blocks).filter(|b| b.after > 0)
        {
            block.lines.push(kept.get_or_insert_with(keep).clone());
            block.after -= 1;
        }
        if judging {
            let k = kept.unwrap_or_else(keep);
            let (blocks, count) = if SUMMARIES.iter().any(|s| k.contains(s)) {
                (&mut self.summary_blocks, &mut self.summaries)
            } else {
                (&mut self.blocks, &mut self.alerts)
            };
            if blocks.len() < MAX_BLOCKS {
                let mut lines: Vec<String> =
                    self.recent.iter().map(|(raw, cut)| self.ctx.keep(raw, *cut)).collect();
                let alert = lines.len();
                lines.push(k);
                blocks.push(Block { lines, alert, after: OUTPUT_CONTEXT });
            }
            *count += 1;
        }
        // the context before a later alert, kept raw (sanitised only if
        // used); the buffer of the line it drops holds the next line
        if self.recent.len() == OUTPUT_CONTEXT {
            self.partial = self.recent.pop_front().unwrap_or_default().0;
            self.partial.clear();
        }
        self.recent.push_back((raw, std::mem::take(&mut self.partial_cut)));
    }

    /// The verdict, once HAProxy has exited and its output has ended.
    pub fn finish(mut self, exit: Exit) -> CheckOutcome {
        if !self.partial.is_empty() {
            self.line();
        }
        match exit {
            Exit::Signal(signal) => CheckOutcome::Unavailable {
                reason: format!(
                    "haproxy was killed by signal {signal}{}{}",
                    signal_name(signal),
                    self.quoted()
                ),
            },
            // HAProxy goes on after some alerts (a setting given twice:
            // "already specified. Continuing."); its exit 0 judges, and
            // the alerts are shown with the pass
            Exit::Code(0) => {
                let alerted = match self.alerts + self.summaries {
                    0 => String::new(),
                    _ => format!("HAProxy alerted, and went on:\n{}", self.refusal_message()),
                };
                CheckOutcome::Passed { message: self.with_warnings(alerted) }
            }
            // A failure line before a failing exit refuses, whatever set the
            // status: before an exit 2 it is a config HAProxy would not start
            // for that failure (a Lua `os.exit(2)` after a fatal alert),
            // never a pass.
            _ if self.alerts + self.summaries > 0 => {
                CheckOutcome::Refused { message: self.refusal_message() }
            }
            Exit::Code(2) => {
                let valid = if self.no_listener {
                    "valid, but HAProxy would not start it: no listener (exit 2)"
                } else {
                    "valid, but HAProxy would not start it (exit 2)"
                };
                CheckOutcome::Passed { message: self.with_warnings(valid.to_owned()) }
            }
            Exit::Code(code) if self.lines == 0 => CheckOutcome::Unavailable {
                reason: format!("haproxy -c exited {code} with no output"),
            },
            // HAProxy ran, spoke, and said "invalid" without an alert (a Lua
            // `os.exit(1)` after a warning does this): its exit status is its
            // judgement, and a pass is never reported against it.
            Exit::Code(code) if self.unexplained == 0 => CheckOutcome::Refused {
                message: format!(
                    "HAProxy exited {code} (the config is invalid) without an alert saying why; it printed:\n{}",
                    self.printed()
                ),
            },
            Exit::Code(code) => CheckOutcome::Unavailable {
                reason: format!(
                    "haproxy -c exited {code} without judging the config{}",
                    self.quoted()
                ),
            },
        }
    }

    /// `message` and, on a line of their own, the `[WARNING]` lines (with
    /// their continuation lines) if there were any: a pass's remarks.
    fn with_warnings(&self, mut message: String) -> String {
        if self.warnings.is_empty() {
            return message;
        }
        if !message.is_empty() {
            message.push('\n');
        }
        message.push_str("HAProxy warned:");
        message.push_str(&self.warnings);
        if self.warnings_dropped > 0 {
            message.push_str(&format!("\n… and {} more warning lines", self.warnings_dropped));
        }
        message
    }

    /// One block per alert: the output around it, then the config around
    /// the line it names. Summary lines get no block of their own unless
    /// there is nothing else to show.
    fn refusal_message(&self) -> String {
        let (blocks, count) = if self.blocks.is_empty() {
            (&self.summary_blocks, self.summaries)
        } else {
            (&self.blocks, self.alerts)
        };
        let mut shown: Vec<String> =
            blocks.iter().map(|b| block_text(b, self.ctx.config)).collect();
        if count > blocks.len() {
            shown.push(format!("… and {} more alerts", count - blocks.len()));
        }
        shown.join("\n\n")
    }

    /// What HAProxy printed, cut to a readable size.
    fn printed(&self) -> String {
        let trimmed = self.head.trim();
        let cut = char_floor(trimmed, QUOTE_LIMIT);
        if cut < trimmed.len() || self.bytes > QUOTE_LIMIT as u64 {
            format!("{} … ({} more bytes)", &trimmed[..cut], self.bytes.saturating_sub(cut as u64))
        } else {
            trimmed.to_owned()
        }
    }

    /// A trailing quote of unexplained output, cut to a readable size.
    fn quoted(&self) -> String {
        if self.head.trim().is_empty() { String::new() } else { format!(": {}", self.printed()) }
    }
}

/// Whether a first run's end may be the gate's address-space limit
/// speaking, so that only a second run under a larger bound can tell. A
/// pass never is. Every other end HAProxy came to is, whatever it printed:
/// a failed allocation reads as any alert, often with no word of memory
/// (2.6 says "fail to set sink buffer size" for a ring the limit cannot
/// hold), as lines that are not HAProxy's (3.x prints `(null)` where a
/// message could not be made), as silence, or as a crash (SIGSEGV,
/// SIGABRT). Not the signals of the gate's other limits, which name
/// themselves: CPU time (SIGXCPU), file size (SIGXFSZ), seccomp (SIGSYS).
/// The deadline's kill never gets here: a run it ends has no exit.
pub fn needs_second_run(outcome: &CheckOutcome, exit: Exit) -> bool {
    match exit {
        Exit::Signal(signal) => !matches!(signal, libc::SIGXCPU | libc::SIGXFSZ | libc::SIGSYS),
        Exit::Code(_) => !matches!(outcome, CheckOutcome::Passed { .. }),
    }
}

/// The address-space bounds of a check's two runs, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBounds {
    /// `--check-memory`: every check's first run.
    pub first: u64,
    /// `--check-memory-max`: the second run, when the first may have hit
    /// the first bound ([`needs_second_run`]).
    pub second: u64,
}

/// The verdict of a check run twice: `first` under `--check-memory`, then
/// `second` under `--check-memory-max` (`Err`: why it could not end, e.g.
/// the deadline). The same kind twice: the limit did not decide, and the
/// second run's words are the verdict's (free of what the first bound made
/// HAProxy say). Kinds that differ: the first run hit the limit, and the
/// second run is the verdict, said so; unless the second could not run
/// either, then nothing judged the render within the gate's limits.
pub fn settle(
    first: CheckOutcome,
    second: Result<CheckOutcome, String>,
    bounds: MemoryBounds,
) -> CheckOutcome {
    let (low, high) = (bytes(bounds.first), bytes(bounds.second));
    let second = second.unwrap_or_else(|reason| CheckOutcome::Unavailable { reason });
    match (first, second) {
        (CheckOutcome::Unavailable { reason }, CheckOutcome::Unavailable { reason: again }) => {
            CheckOutcome::Unavailable {
                reason: format!(
                    "{reason}\n(again without the address-space limit of {low} (--check-memory), at the top (--check-memory-max {high}): {again})"
                ),
            }
        }
        (CheckOutcome::Refused { .. }, second @ CheckOutcome::Refused { .. }) => second,
        (_, CheckOutcome::Passed { message }) => CheckOutcome::Passed {
            message: format!(
                "the first run hit the check's address-space limit of {low} (--check-memory); under --check-memory-max {high} it passed{}",
                if message.is_empty() { String::new() } else { format!(":\n{message}") }
            ),
        },
        (_, CheckOutcome::Refused { message }) => CheckOutcome::Refused {
            message: format!(
                "the first run hit the check's address-space limit of {low} (--check-memory); under --check-memory-max {high} HAProxy refused the render:\n{message}"
            ),
        },
        (first, CheckOutcome::Unavailable { reason }) => CheckOutcome::Unavailable {
            reason: format!(
                "haproxy -c {} under the check's address-space limit of {low} (--check-memory), and could not run under --check-memory-max {high}: {reason}\n(the limit may have decided the first run, so the render is not judged; raise --check-memory-max)",
                match first {
                    CheckOutcome::Passed { .. } => "passed",
                    _ => "refused the render",
                }
            ),
        },
    }
}

/// The verdict of a check whose first run wrote a file past the first
/// file-size bound (killed by SIGXFSZ, `first`), run again under the
/// larger one (`second`; `Err`: why it could not end): the second run is
/// the verdict, said so. Past the larger bound too, it could not run. The
/// bounds are named as the runs had them (`bounds`: first, larger), which
/// this process's own `ulimit -f` may have lowered.
pub fn settle_file_size(
    first: CheckOutcome,
    second: Result<CheckOutcome, String>,
    bounds: (u64, u64),
) -> CheckOutcome {
    let (low, high) = (bytes(bounds.0), bytes(bounds.1));
    let hit = format!("the first run wrote a file past the check's file-size limit of {low}");
    match second.unwrap_or_else(|reason| CheckOutcome::Unavailable { reason }) {
        CheckOutcome::Passed { message } => CheckOutcome::Passed {
            message: format!(
                "{hit}; under {high} it passed{}",
                if message.is_empty() { String::new() } else { format!(":\n{message}") }
            ),
        },
        CheckOutcome::Refused { message } => CheckOutcome::Refused {
            message: format!("{hit}; under {high} HAProxy refused the render:\n{message}"),
        },
        CheckOutcome::Unavailable { reason } => CheckOutcome::Unavailable {
            reason: format!("{}\n(again under {high}: {reason})", first.message()),
        },
    }
}

/// The longest head of `text` of at most `at` bytes that ends on a
/// character's boundary (`str::floor_char_boundary`, past Rust 1.85).
pub(crate) fn char_floor(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// A bound as the flags write it (`1GiB`).
pub(crate) fn bytes(bound: u64) -> String {
    usize::try_from(bound).map_or_else(|_| format!("{bound}"), crate::size::format)
}

/// One alert's block: the output around it, then the config around the
/// line it names. Built in memory bounded by what is shown: only those
/// config lines are held, each cut to [`LINE_LIMIT`], however large the
/// config or however short its lines.
fn block_text(block: &Block, config: &[u8]) -> String {
    let mut out = Vec::with_capacity(block.lines.len() + CONFIG_BEFORE + CONFIG_AFTER + 2);
    for (i, line) in block.lines.iter().enumerate() {
        let marker = if i == block.alert { "→ " } else { "  " };
        out.push(format!("{marker}{line}"));
    }
    if let Some(number) = config_line_named(&block.lines[block.alert]).filter(|n| *n >= 1) {
        let first = number.saturating_sub(CONFIG_BEFORE).max(1);
        let shown: Vec<&[u8]> = config_lines(config)
            .skip(first - 1)
            .take(number.saturating_add(CONFIG_AFTER) - first + 1)
            .collect();
        // the named line exists
        if shown.len() > number - first {
            out.push("  Config context:".to_owned());
            for (n, line) in (first..).zip(shown) {
                let marker = if n == number { "→ " } else { "  " };
                // Only the lines shown are scrubbed, not the whole render.
                out.push(format!("  {marker}{n:4}  {}", scrub(&shown_line(line, LINE_LIMIT))));
            }
        }
    }
    out.join("\n")
}

/// The config's lines as `str::lines` reads text: split at `\n`, a `\r`
/// before it dropped, no empty line after the last `\n`.
fn config_lines(config: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = config.strip_suffix(b"\n").unwrap_or(config);
    body.split(|b| *b == b'\n')
        .filter(move |_| !config.is_empty())
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
}

/// A config line as shown: decoded (what is not UTF-8 replaced), cut to at
/// most `limit` bytes on a character boundary, with ` …` when something
/// was cut. Only the bytes shown are decoded, however long the line.
fn shown_line(line: &[u8], limit: usize) -> String {
    // a few bytes past the limit finish the character the cut falls in
    let text = String::from_utf8_lossy(&line[..line.len().min(limit + 4)]);
    if line.len() <= limit && text.len() <= limit {
        return text.into_owned();
    }
    format!("{} …", &text[..char_floor(&text, limit)])
}

/// Removes host paths from `text`: the check directory becomes relative
/// (`/tmp/rendergate-check-x/maps/a.map` → `maps/a.map`, the bare directory
/// → `.`), the binary becomes `haproxy`. Control characters other than
/// newline and tab are replaced, so the message cannot drive a terminal.
pub fn sanitise(text: &str, check_dir: &Path, haproxy_path: &Path) -> String {
    let mut text = scrub(text);
    let dir = check_dir.to_string_lossy();
    let dir = dir.trim_end_matches('/');
    // "/" (or nothing) would erase every slash; such a check directory is a bug
    if !dir.is_empty() {
        text = text.replace(&format!("{dir}/"), "").replace(dir, ".");
    }
    let binary = haproxy_path.to_string_lossy();
    if binary.contains('/') {
        text = text.replace(binary.as_ref(), "haproxy");
    }
    text
}

fn scrub(text: &str) -> String {
    text.chars()
        .filter(|&c| c != '\r')
        .map(|c| if c.is_control() && c != '\n' && c != '\t' { '\u{FFFD}' } else { c })
        .collect()
}

/// Whether a failure line's head lies anywhere in `bytes`.
fn has_judging_head(bytes: &[u8]) -> bool {
    // one pass for the bracket every head starts with, not one per head
    memchr::memchr_iter(b'[', bytes)
        .any(|at| JUDGING_HEADS.iter().any(|head| bytes[at..].starts_with(head)))
}

/// How many blanks `bytes` starts with.
fn leading_blanks(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)).count()
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGXCPU => " (SIGXCPU: the check's CPU time limit)",
        libc::SIGXFSZ => " (SIGXFSZ: the check's file size limit)",
        libc::SIGSYS => " (SIGSYS: a system call the sandbox forbids)",
        _ => "",
    }
}

/// The LINE of the first `[FILE:LINE]` in `line` whose FILE is the config.
fn config_line_named(line: &str) -> Option<usize> {
    let named = line.split('[').skip(1).find_map(|part| {
        let (file, number) = part.split_once(']')?.0.rsplit_once(':')?;
        let digits = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
        let config = file.trim_start_matches("./") == super::layout::CONFIG_NAME;
        (config && digits).then(|| number.parse().ok())
    });
    // the first such mark answers, even when its number does not fit
    named.flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "/tmp/rendergate-check-Ab12Cd";
    const BIN: &str = "/usr/sbin/haproxy";

    fn ctx(config: &[u8]) -> Context<'_> {
        Context { config, check_dir: Path::new(DIR), haproxy_path: Path::new(BIN) }
    }

    /// Classifies one finished run of `haproxy -c` whose output is at hand.
    fn run(exit: Exit, output: &str, config: impl AsRef<[u8]>) -> CheckOutcome {
        let mut transcript = Transcript::new(ctx(config.as_ref()));
        transcript.feed(output.as_bytes());
        transcript.finish(exit)
    }

    /// [`run`] against [`CONFIG`], its output read in `pieces`.
    fn fed<T: AsRef<[u8]>>(exit: Exit, pieces: impl IntoIterator<Item = T>) -> CheckOutcome {
        let mut transcript = Transcript::new(ctx(CONFIG.as_bytes()));
        pieces.into_iter().for_each(|piece| transcript.feed(piece.as_ref()));
        transcript.finish(exit)
    }

    /// The message of `out`, which must be a `label` ("pass", "refused" or "unavailable").
    fn message_of(label: &str, out: CheckOutcome) -> String {
        assert_eq!(out.label(), label, "{out:?}");
        out.message().to_owned()
    }

    /// The message of a run that must be refused.
    fn refusal(exit: Exit, output: &str, config: impl AsRef<[u8]>) -> String {
        match run(exit, output, config) {
            CheckOutcome::Refused { message } => message,
            out => panic!("{output:?}: {out:?}"),
        }
    }

    const CONFIG: &str = "global\n  log stdout local0\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind :8080\n  bogus\n  default_backend b\nbackend b\n  server s1 127.0.0.1:80\n";

    const UNKNOWN_KEYWORD: &str = "\
[NOTICE]   (1913) : haproxy version is 2.6.12-1+deb12u3
[NOTICE]   (1913) : path to executable is /usr/sbin/haproxy
[ALERT]    (1913) : config : parsing [haproxy.cfg:10] : unknown keyword 'bogus' in 'frontend' section
[ALERT]    (1913) : config : Error(s) found in configuration file : haproxy.cfg
[ALERT]    (1913) : config : Fatal errors found in configuration.
";

    #[test]
    fn exit_zero_passes_quietly() {
        assert_eq!(run(Exit::Code(0), "Configuration file is valid\n", CONFIG), passed(""));
    }

    #[test]
    fn exit_zero_with_warnings_passes_and_says_so() {
        let output = "\
[NOTICE]   (3521) : haproxy version is 2.6.12-1+deb12u3
[NOTICE]   (3521) : path to executable is /usr/sbin/haproxy
[WARNING]  (3521) : config : missing timeouts for frontend 'f'.
   | While not properly invalid, you will certainly encounter various problems
   | with such a configuration. To fix this, please ensure that all following
   | timeouts are set to a non-zero value: 'client', 'connect', 'server'.
Warnings were found.
Configuration file is valid
";
        let CheckOutcome::Passed { message } = run(Exit::Code(0), output, CONFIG) else { panic!() };
        assert!(
            message.starts_with("HAProxy warned:\n[WARNING]  (3521) : config : missing timeouts"),
            "{message}"
        );
        assert!(message.contains("   | timeouts are set to a non-zero value"), "{message}");
        assert!(!message.contains("NOTICE"), "{message}");
        assert!(!message.contains("Configuration file is valid"), "{message}");
    }

    #[test]
    fn an_alert_refuses_with_output_and_config_context() {
        let message = refusal(Exit::Code(1), UNKNOWN_KEYWORD, CONFIG);
        let expected = [
            "  [NOTICE]   (1913) : haproxy version is 2.6.12-1+deb12u3",
            "  [NOTICE]   (1913) : path to executable is haproxy",
            "→ [ALERT]    (1913) : config : parsing [haproxy.cfg:10] : unknown keyword 'bogus' in 'frontend' section",
            "  [ALERT]    (1913) : config : Error(s) found in configuration file : haproxy.cfg",
            "  [ALERT]    (1913) : config : Fatal errors found in configuration.",
            "  Config context:",
            "       6    timeout server 1s",
            "       7    timeout connect 1s",
            "       8  frontend f",
            "       9    bind :8080",
            "  →   10    bogus",
            "      11    default_backend b",
            "      12  backend b",
            "      13    server s1 127.0.0.1:80",
        ]
        .join("\n");
        assert_eq!(message, expected);
    }

    #[test]
    fn config_context_holds_only_the_lines_shown_each_cut() {
        // a million empty lines, then a line of 1 MiB that an alert names
        let long = "x".repeat(1 << 20);
        let config = format!("{}{long}\nlast\n", "\n".repeat(1_000_000));
        let output = "[ALERT] (1) : config : parsing [haproxy.cfg:1000001] : unknown keyword\n";
        let message = refusal(Exit::Code(1), output, &config);
        let context = message.split_once("  Config context:\n").unwrap().1;
        let lines: Vec<&str> = context.lines().collect();
        assert_eq!(lines.len(), 6, "{context}");
        assert_eq!(lines[0], "    999997  ");
        assert!(
            lines[4].starts_with("  → 1000001  xxx") && lines[4].ends_with("x …"),
            "{}",
            &lines[4][..40]
        );
        assert_eq!(lines[4].len(), "  → 1000001  ".len() + LINE_LIMIT + " …".len());
        assert_eq!(lines[5], "    1000002  last");
        // a line past the end names nothing to show
        let output = "[ALERT] (1) : config : parsing [haproxy.cfg:1000003] : unknown keyword\n";
        let message = refusal(Exit::Code(1), output, &config);
        assert!(!message.contains("Config context"), "{message}");
    }

    #[test]
    fn every_judging_tag_refuses_even_indented() {
        for tag in ["[EMERG]", "[ALERT]", "[CRIT]", "[ERR]"] {
            let output = format!("[NOTICE] x\n   {tag}    (1) : something broke\n");
            let message = refusal(Exit::Code(1), &output, CONFIG);
            assert!(message.contains(&format!("→    {tag}    (1) : something broke")), "{message}");
            assert!(!message.contains("Config context"), "{message}");
        }
    }

    #[test]
    fn tags_in_the_middle_of_a_line_do_not_judge() {
        // not an alert: the refusal comes from the exit status, with no alert block
        let output = "[WARNING] (1) : the word [ALERT] appears here\n";
        let message = refusal(Exit::Code(1), output, CONFIG);
        assert!(
            message.contains("without an alert saying why") && !message.contains('→'),
            "{message}"
        );
    }

    #[test]
    fn each_alert_gets_its_own_block_and_summaries_none() {
        let output = "\
[NOTICE]   (7) : haproxy version is 2.6.12-1+deb12u3
[NOTICE]   (7) : path to executable is /usr/sbin/haproxy
[ALERT]    (7) : config : parsing [haproxy.cfg:2] : unknown keyword 'one' in 'global' section
[ALERT]    (7) : config : parsing [haproxy.cfg:12] : unknown keyword 'two' in 'backend' section
[ALERT]    (7) : config : Error(s) found in configuration file : haproxy.cfg
[ALERT]    (7) : config : Fatal errors found in configuration.
";
        let message = refusal(Exit::Code(1), output, CONFIG);
        let blocks: Vec<&str> = message.split("\n\n").collect();
        assert_eq!(blocks.len(), 2, "{message}");
        assert!(blocks[0].contains("→ [ALERT]    (7) : config : parsing [haproxy.cfg:2]"));
        assert!(blocks[0].contains("  [ALERT]    (7) : config : parsing [haproxy.cfg:12]"));
        assert!(blocks[0].contains("  →    2    log stdout local0"), "{}", blocks[0]);
        assert!(blocks[0].contains("       1  global"), "{}", blocks[0]);
        assert!(blocks[0].contains("       5    timeout client 1s"), "{}", blocks[0]);
        assert!(!blocks[0].contains("       6"), "{}", blocks[0]);
        assert!(blocks[1].starts_with("  [NOTICE]   (7) : haproxy version is"), "{}", blocks[1]);
        assert!(blocks[1].contains("→ [ALERT]    (7) : config : parsing [haproxy.cfg:12]"));
        assert!(blocks[1].contains("  →   12  backend b"), "{}", blocks[1]);
        assert!(blocks[1].ends_with("      13    server s1 127.0.0.1:80"), "{}", blocks[1]);
        assert!(!message.contains("→ [ALERT]    (7) : config : Error(s)"));
        assert!(!message.contains("→ [ALERT]    (7) : config : Fatal"));
    }

    #[test]
    fn only_summary_lines_still_refuse_with_something_to_read() {
        let output = "[ALERT]    (7) : config : Fatal errors found in configuration.\n";
        let message = refusal(Exit::Code(1), output, CONFIG);
        assert_eq!(message, "→ [ALERT]    (7) : config : Fatal errors found in configuration.");
    }

    #[test]
    fn absolute_config_paths_are_made_relative_and_get_context() {
        let output = format!(
            "[ALERT]    (9) : config : parsing [{DIR}/haproxy.cfg:1] : unknown keyword 'x'\n\
             [ALERT]    (9) : config : failed to open pattern file <{DIR}/maps/hosts.map> in {DIR}\n"
        );
        let message = refusal(Exit::Code(1), &output, CONFIG);
        assert!(!message.contains(DIR), "{message}");
        assert!(!message.contains("/tmp"), "{message}");
        assert!(message.contains("parsing [haproxy.cfg:1]"), "{message}");
        assert!(message.contains("<maps/hosts.map> in ."), "{message}");
        assert!(message.contains("  →    1  global"), "{message}");
    }

    #[test]
    fn other_files_line_numbers_get_no_config_context() {
        let output = "[ALERT]    (9) : config : parsing [general/list.txt:3] : bad crt-list line\n";
        let message = refusal(Exit::Code(1), output, CONFIG);
        assert!(!message.contains("Config context"), "{message}");
    }

    #[test]
    fn line_numbers_beyond_the_config_get_no_context() {
        for n in ["0", "14", "999999999999999999999999"] {
            let output = format!("[ALERT]    (9) : config : parsing [haproxy.cfg:{n}] : oops\n");
            let message = refusal(Exit::Code(1), &output, CONFIG);
            assert!(!message.contains("Config context"), "{n}: {message}");
        }
        let output = "[ALERT]    (9) : config : parsing [haproxy.cfg:13] : last line\n";
        let message = refusal(Exit::Code(1), output, CONFIG);
        assert!(message.ends_with("  →   13    server s1 127.0.0.1:80"), "{message}");
        assert!(message.contains("       9    bind :8080"), "{message}");
        assert!(!message.contains("       8  "), "{message}");
    }

    #[test]
    fn no_listener_exit_two_passes_with_a_warning() {
        let output =
            "Configuration file has no error but will not start (no listener) => exit(2).\n";
        let out = run(Exit::Code(2), output, "global\n");
        assert_eq!(out, passed("valid, but HAProxy would not start it: no listener (exit 2)"));
    }

    #[test]
    fn exit_one_with_only_advisory_lines_is_a_refusal_never_a_pass() {
        // HAProxy's exit status says "invalid", and HAProxy's judgement is the
        // verdict, even when no alert says why (Lua's os.exit(1) does this).
        let output = "\
[NOTICE]   (3576) : haproxy version is 2.6.12-1+deb12u3
[WARNING]  (3576) : config : missing timeouts for frontend 'f'.
   | While not properly invalid, you will certainly encounter various problems

[INFO]     (3576) : something
[DEBUG]    (3576) : something else
";
        let message = refusal(Exit::Code(1), output, CONFIG);
        assert!(
            message.starts_with(
                "HAProxy exited 1 (the config is invalid) without an alert saying why; it printed:\n[NOTICE]"
            ),
            "{message}"
        );
        assert!(message.contains("[WARNING]  (3576) : config : missing timeouts"), "{message}");
    }

    #[test]
    fn no_listener_after_warnings_passes_on_every_version() {
        // 2.6 to 3.2 print "Warnings were found." before the no-listener line
        let output = "\
[WARNING]  (1) : config : proxy 'l' has no 'bind' directive.
Warnings were found.
Configuration file has no error but will not start (no listener) => exit(2).
";
        let CheckOutcome::Passed { message } = run(Exit::Code(2), output, CONFIG) else { panic!() };
        assert!(
            message
                .starts_with("valid, but HAProxy would not start it: no listener (exit 2)\nHAProxy warned:\n[WARNING]"),
            "{message}"
        );
    }

    #[test]
    fn the_kind_comes_from_every_line_however_long_the_output() {
        // a flood of warnings, then the one alert at the very end
        let warning = "[WARNING]  (1) : config : missing timeouts for backend 'b'.\n   | While not properly invalid, you will certainly encounter various problems\n";
        let flood = std::iter::repeat_n(warning, (8_usize << 20).div_ceil(warning.len()));
        let alerts = [
            "[ALERT]    (1) : config : Proxy 'f': unable to find required use_backend: 'nope'.\n",
            "[ALERT]    (1) : config : Fatal errors found in configuration.\n",
        ];
        let message = message_of("refused", fed(Exit::Code(1), flood.chain(alerts)));
        assert!(
            message.contains(
                "→ [ALERT]    (1) : config : Proxy 'f': unable to find required use_backend"
            ),
            "{message}"
        );
        assert!(message.len() < 8 * 1024, "{}", message.len());
        // the same flood on a pass keeps a bounded note
        let message = message_of("pass", fed(Exit::Code(0), std::iter::repeat_n(warning, 100_000)));
        assert!(message.len() < WARNINGS_LIMIT + 2 * LINE_LIMIT, "{}", message.len());
        assert!(message.ends_with("more warning lines"), "{}", &message[message.len() - 100..]);
    }

    #[test]
    fn lines_are_read_whole_across_reads_and_a_long_line_is_cut_for_display_only() {
        let pieces =
            ["[NOT", "ICE] x\n   ", "  [AL", "ERT] (1) : parsing [haproxy.", "cfg:10] : bad\n"];
        let message = message_of("refused", fed(Exit::Code(1), pieces));
        assert!(
            message.contains("→      [ALERT] (1) : parsing [haproxy.cfg:10] : bad"),
            "{message}"
        );
        assert!(message.contains("  →   10    bogus"), "{message}");
        // a megabyte of blanks before the tag still judges
        message_of("refused", fed(Exit::Code(1), [&" ".repeat(1 << 20), "[ALERT] late tag\n"]));
        // a megabyte-long alert is shown cut
        let message = message_of("refused", fed(Exit::Code(1), ["[ALERT] ", &"x".repeat(1 << 20)]));
        assert!(message.len() < 2 * LINE_LIMIT && message.ends_with(" …"), "{}", message.len());
    }

    #[test]
    fn words_about_memory_are_read_like_any_others() {
        // 3.2.0 prints `(null)` where an alert's message could not be made;
        // 2.6 an unresolvable server's `(null)`: HAProxy refused, and the
        // refusal stands as such (a second run tells whether memory decided)
        for output in [
            "[ALERT]    (1) : config : (null)\n[ALERT]    (1) : config : Fatal errors found in configuration.\n",
            "[ALERT]    (1) : config : parsing [haproxy.cfg:3] : out of memory.\n",
            // 3.2: an `acme` section's missing key file
            "[ALERT]    (1) : config : acme: out of memory.\n",
            // only advisory lines: HAProxy's exit status judges
            "[NOTICE]   (1) : (null)[NOTICE]   (1) : (null)\n",
        ] {
            refusal(Exit::Code(1), output, CONFIG);
        }
        // 3.0 and 3.2 at a small bound glue `(null)`s before the tags: still
        // HAProxy's alert (its head, anywhere in the line), refused as bare
        let output = "(null)(null)(null)[ALERT]    (1) : (null)Error(s) found in configuration file : haproxy.cfg\n";
        let message = message_of("refused", run(Exit::Code(1), output, CONFIG));
        assert!(message.starts_with("→ (null)(null)(null)[ALERT]    (1) :"), "{message}");
        // 2.6: an untagged line
        message_of("unavailable", run(Exit::Code(1), "[NOTICE] (1) : x\nout of memory.\n", CONFIG));
        // and each of them may have been the limit speaking: measured, not read
        for output in [
            "[ALERT] (1) : config : (null)\n",
            "(null)(null)[ALERT] (1) : x\n",
            "[NOTICE] (1) : x\nout of memory.\n",
        ] {
            let out = run(Exit::Code(1), output, CONFIG);
            assert!(needs_second_run(&out, Exit::Code(1)), "{output}");
        }
    }

    #[test]
    fn the_render_cannot_dress_a_refusal_as_out_of_memory() {
        for output in [
            // a real error beside an out-of-memory line: refused
            "[ALERT] (1) : config : parsing [haproxy.cfg:10] : unknown keyword 'bogus'\n[ALERT] (1) : out of memory\n",
            // the render's own words, quoted by HAProxy, a `'` in them or not
            "[ALERT] (1) : config : parsing [haproxy.cfg:3]: 'out of memory'.\n",
            "[ALERT] (1) : config : parsing [haproxy.cfg:4]: '(null)'.\n",
            "[ALERT]    (9442) : config : Proxy 'f': unable to find required use_backend: 'b'x out of memory'.\n[ALERT]    (9442) : config : Fatal errors found in configuration.\n",
            "[ALERT]    (9445) : config : [haproxy.cfg:10] : character ' ' is not permitted in server name 'out of memory'.\n",
        ] {
            refusal(Exit::Code(1), output, CONFIG);
        }
    }

    #[test]
    fn exit_two_after_a_failure_line_is_a_refusal_never_a_pass() {
        // haproxy 2.6: a fatal alert, then a `lua-load`ed `os.exit(2)`
        let output = "\
[NOTICE]   (9582) : haproxy version is 2.6.12-1+deb12u4
[NOTICE]   (9582) : path to executable is /usr/sbin/haproxy
[ALERT]    (9582) : config : parsing [haproxy.cfg:2] : unknown keyword 'bogus-keyword' in 'global' section
";
        let message = refusal(Exit::Code(2), output, CONFIG);
        assert!(
            message.contains("→ [ALERT]    (9582) : config : parsing [haproxy.cfg:2]"),
            "{message}"
        );
        assert!(message.contains("  →    2    log stdout local0"), "{message}");
        // every failure tag, indented or not, and a closing summary alone
        for line in [
            "[EMERG] x",
            "  [CRIT] x",
            "[ERR] x",
            "[ALERT] (1) : config : Fatal errors found in configuration.",
        ] {
            let output = format!(
                "{line}\nConfiguration file has no error but will not start (no listener) => exit(2).\n"
            );
            refusal(Exit::Code(2), &output, CONFIG);
        }
        // Lua's `core.Alert` prints `[alert]`, which is no failure line
        let output = "[alert] 337/173659 (9585) : boom\n";
        assert!(matches!(run(Exit::Code(2), output, CONFIG), CheckOutcome::Passed { .. }));
        // nor is a tag in the middle of a line
        let output = "[WARNING] (1) : the word [ALERT] appears here\nConfiguration file has no error but will not start (no listener) => exit(2).\n";
        assert!(matches!(run(Exit::Code(2), output, CONFIG), CheckOutcome::Passed { .. }));
    }

    #[test]
    fn a_pass_shows_the_alerts_haproxy_went_on_after() {
        // haproxy 2.6 on `maxconn` given twice in `global`
        let output = "\
[NOTICE]   (25478) : haproxy version is 2.6.12-1+deb12u4
[ALERT]    (25478) : config : parsing [haproxy.cfg:2] : 'maxconn' already specified. Continuing.
Configuration file is valid
";
        let message = message_of("pass", run(Exit::Code(0), output, CONFIG));
        assert!(message.starts_with("HAProxy alerted, and went on:\n"), "{message}");
        assert!(
            message.contains("→ [ALERT]    (25478) : config : parsing [haproxy.cfg:2] : 'maxconn'"),
            "{message}"
        );
        assert!(message.contains("  →    2    log stdout local0"), "{message}");
    }

    #[test]
    fn an_alert_after_a_partial_line_is_still_a_failure_line() {
        // Lua's `io.stderr:write("note: ")`, then HAProxy's alert on that
        // line, then its `os.exit(2)`: a forged "no listener" pass before
        let alert = "[ALERT]    (9582) : config : parsing [haproxy.cfg:2] : unknown keyword 'bogus-keyword' in 'global' section\n";
        let message = refusal(Exit::Code(2), &format!("note: {alert}"), CONFIG);
        assert!(message.contains("→ note: [ALERT]    (9582) : config : parsing"), "{message}");
        // after more of a line than is kept, its head split across reads
        for head in JUDGING_HEADS {
            let partial = "x".repeat(5000).into_bytes();
            let head_and_rest = [head, &alert.as_bytes()[12..]].concat();
            let bytes = [partial, head_and_rest].concat();
            for piece in [1, 5, 11, 12, 4096] {
                let out = fed(Exit::Code(2), bytes.chunks(piece));
                assert!(
                    matches!(out, CheckOutcome::Refused { .. }),
                    "{head:?} in pieces of {piece}: {out:?}"
                );
            }
        }
        // the head alone counts, not the word
        for output in ["x [ALERT] (1) : y\n", "x [ALERT]   (1) : y\n", "x [ALERT]    y\n"] {
            assert!(
                matches!(run(Exit::Code(2), output, CONFIG), CheckOutcome::Passed { .. }),
                "{output}"
            );
        }
    }

    #[test]
    fn what_needs_a_second_run() {
        assert!(!needs_second_run(&passed(""), Exit::Code(0)));
        assert!(!needs_second_run(&passed(""), Exit::Code(2)));
        assert!(needs_second_run(&refused("x"), Exit::Code(1)));
        assert!(needs_second_run(&refused("x"), Exit::Code(2)));
        assert!(needs_second_run(&unavailable("x"), Exit::Code(1)));
        assert!(needs_second_run(&unavailable("x"), Exit::Code(127)));
        for signal in [libc::SIGSEGV, libc::SIGABRT, libc::SIGBUS, libc::SIGKILL] {
            assert!(needs_second_run(&unavailable("x"), Exit::Signal(signal)), "{signal}");
        }
        // the gate's other limits name themselves
        for signal in [libc::SIGXCPU, libc::SIGXFSZ, libc::SIGSYS] {
            assert!(!needs_second_run(&unavailable("x"), Exit::Signal(signal)), "{signal}");
        }
    }

    const BOUNDS: MemoryBounds = MemoryBounds { first: 1 << 30, second: 16 << 30 };

    #[test]
    fn a_file_past_the_first_bound_is_judged_under_the_second() {
        let killed =
            || unavailable("haproxy -c wrote a file past the check's limit of 16 MiB (SIGXFSZ)");
        let message = message_of("pass", settle_file_size(killed(), Ok(passed("")), FILE_BOUNDS));
        assert_eq!(
            message,
            "the first run wrote a file past the check's file-size limit of 16MiB; under 256MiB it passed"
        );
        let out = settle_file_size(killed(), Ok(refused("→ [ALERT] bogus")), FILE_BOUNDS);
        let message = message_of("refused", out);
        assert!(message.ends_with("HAProxy refused the render:\n→ [ALERT] bogus"), "{message}");
        let again =
            unavailable("haproxy -c wrote a file past the check's limit of 256 MiB (SIGXFSZ)");
        let reason = message_of("unavailable", settle_file_size(killed(), Ok(again), FILE_BOUNDS));
        assert!(reason.contains("16 MiB") && reason.contains("(again under 256MiB: "), "{reason}");
        // bounds lowered by the gate's own `ulimit -f` are named as they were
        let message =
            message_of("pass", settle_file_size(killed(), Ok(passed("")), (1 << 20, 8 << 20)));
        assert!(message.contains("limit of 1MiB; under 8MiB it passed"), "{message}");
    }

    const FILE_BOUNDS: (u64, u64) = (16 << 20, 256 << 20);

    fn passed(message: &str) -> CheckOutcome {
        CheckOutcome::Passed { message: message.into() }
    }

    fn refused(message: &str) -> CheckOutcome {
        CheckOutcome::Refused { message: message.into() }
    }

    fn unavailable(reason: &str) -> CheckOutcome {
        CheckOutcome::Unavailable { reason: reason.into() }
    }

    #[test]
    fn refused_twice_is_refused_in_the_second_runs_words() {
        let first = refused("→ [ALERT] Unable to allocate SSL session cache.\n→ [ALERT] bogus");
        let out = settle(first, Ok(refused("→ [ALERT] bogus")), BOUNDS);
        assert_eq!(out, refused("→ [ALERT] bogus"));
    }

    #[test]
    fn refused_then_passed_is_a_pass_that_says_why() {
        let out = settle(refused("→ [ALERT] fail to set sink buffer size"), Ok(passed("")), BOUNDS);
        assert_eq!(
            out,
            passed(
                "the first run hit the check's address-space limit of 1GiB (--check-memory); under --check-memory-max 16GiB it passed"
            )
        );
        let second = passed("valid, but HAProxy would not start it: no listener (exit 2)");
        let message = message_of("pass", settle(refused("x"), Ok(second), BOUNDS));
        assert!(
            message.ends_with(
                "it passed:\nvalid, but HAProxy would not start it: no listener (exit 2)"
            ),
            "{message}"
        );
    }

    #[test]
    fn a_crash_then_a_judgement_is_that_judgement() {
        let crash = || unavailable("haproxy was killed by signal 11 (SIGSEGV)");
        let out = settle(crash(), Ok(passed("")), BOUNDS);
        assert!(matches!(out, CheckOutcome::Passed { .. }), "{out:?}");
        let out = settle(crash(), Ok(refused("→ [ALERT] bogus")), BOUNDS);
        assert_eq!(
            out,
            refused(
                "the first run hit the check's address-space limit of 1GiB (--check-memory); under --check-memory-max 16GiB HAProxy refused the render:\n→ [ALERT] bogus"
            )
        );
    }

    #[test]
    fn refused_then_could_not_run_names_the_larger_limit() {
        for second in [
            Ok(unavailable("haproxy was killed by signal 9 (SIGKILL)")),
            Err("haproxy -c timed out after 30.0s".to_owned()),
        ] {
            let reason =
                message_of("unavailable", settle(refused("→ [ALERT] x"), second.clone(), BOUNDS));
            let why = second.map_or_else(|e| e, |o| o.message().to_owned());
            assert_eq!(
                reason,
                format!(
                    "haproxy -c refused the render under the check's address-space limit of 1GiB (--check-memory), and could not run under --check-memory-max 16GiB: {why}\n(the limit may have decided the first run, so the render is not judged; raise --check-memory-max)"
                )
            );
        }
    }

    #[test]
    fn could_not_run_twice_says_the_limit_was_not_why() {
        let crash = || unavailable("haproxy was killed by signal 11 (SIGSEGV)");
        let reason = message_of("unavailable", settle(crash(), Ok(crash()), BOUNDS));
        assert!(reason.starts_with("haproxy was killed by signal 11 (SIGSEGV)\n(again without the address-space limit of 1GiB (--check-memory), at the top (--check-memory-max 16GiB): haproxy was killed by signal 11"), "{reason}");
    }

    #[test]
    fn zero_warning_abort_is_a_refusal() {
        let output = "\
[NOTICE]   (3576) : haproxy version is 2.6.12-1+deb12u3
[WARNING]  (3576) : config : missing timeouts for frontend 'f'.
   | While not properly invalid, you will certainly encounter various problems
[ALERT]    (3576) : config : Some warnings were found and 'zero-warning' is set. Aborting.
";
        let message = refusal(Exit::Code(1), output, CONFIG);
        assert!(
            message.contains("→ [ALERT]    (3576) : config : Some warnings were found"),
            "{message}"
        );
        assert!(message.starts_with("  [NOTICE]"), "{message}");
    }

    #[test]
    fn unexplained_failures_are_unavailable() {
        let out = run(Exit::Code(1), "", CONFIG);
        assert_eq!(out, unavailable("haproxy -c exited 1 with no output"));
        let output = format!("{BIN}: error while loading shared libraries in {DIR}\n");
        assert_eq!(
            run(Exit::Code(127), &output, CONFIG),
            unavailable(
                "haproxy -c exited 127 without judging the config: haproxy: error while loading shared libraries in ."
            )
        );
        for output in [
            "\n  \n",
            // a continuation line with nothing before it is not advice
            "   | orphan\n",
            // advisory lines mixed with something unknown
            "[NOTICE] fine\nSegmentation fault\n",
        ] {
            let out = run(Exit::Code(1), output, CONFIG);
            assert!(matches!(out, CheckOutcome::Unavailable { .. }), "{output:?}: {out:?}");
        }
    }

    #[test]
    fn a_signal_is_unavailable_even_with_alerts() {
        let reason = message_of("unavailable", run(Exit::Signal(9), UNKNOWN_KEYWORD, CONFIG));
        assert!(
            reason.starts_with("haproxy was killed by signal 9 (SIGKILL): [NOTICE]"),
            "{reason}"
        );
        assert!(!reason.contains(BIN), "{reason}");
        let out = run(Exit::Signal(11), "", CONFIG);
        assert_eq!(out, unavailable("haproxy was killed by signal 11 (SIGSEGV)"));
    }

    #[test]
    fn long_unexplained_output_is_cut() {
        let output = "é".repeat(5000);
        let reason = message_of("unavailable", run(Exit::Code(3), &output, CONFIG));
        assert!(reason.len() < QUOTE_LIMIT + 200, "{}", reason.len());
        assert!(reason.ends_with(" more bytes)"), "{reason}");
    }

    #[test]
    fn many_alerts_are_capped() {
        let output: String = (1..=30)
            .map(|n| format!("[ALERT] (1) : config : parsing [haproxy.cfg:{n}] : bad\n"))
            .collect();
        let message = refusal(Exit::Code(1), &output, CONFIG);
        assert_eq!(message.matches("→ [ALERT]").count(), MAX_BLOCKS);
        assert!(message.ends_with("… and 10 more alerts"), "{message}");
    }

    #[test]
    fn sanitise_removes_host_paths_and_control_characters() {
        let text = format!("{DIR}/a {DIR} {DIR}/ {BIN} \x1b[31mred\r\n");
        assert_eq!(
            sanitise(&text, Path::new(DIR), Path::new(BIN)),
            "a .  haproxy \u{FFFD}[31mred\n"
        );
        // a trailing slash on the directory changes nothing
        assert_eq!(
            sanitise(&format!("{DIR}/x"), Path::new(&format!("{DIR}/")), Path::new(BIN)),
            "x"
        );
        // a root or relative name is never used to cut paths apart
        assert_eq!(sanitise("/usr/sbin/x", Path::new("/"), Path::new("haproxy")), "/usr/sbin/x");
    }

    #[test]
    fn config_lines_are_read_as_bytes() {
        let lines = |c: &[u8]| config_lines(c).map(<[u8]>::to_vec).collect::<Vec<_>>();
        for text in ["", "\n", "a", "a\n", "a\r\nb\n\nc", "a\n\n"] {
            let expected: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
            assert_eq!(lines(text.as_bytes()), expected, "{text:?}");
        }
        // a line that is not UTF-8 is shown with its bad bytes replaced
        let config = b"global\n  bogus \xff\xfe here\n";
        let output = "[ALERT] (1) : config : parsing [haproxy.cfg:2] : unknown keyword 'bogus'\n";
        let message = refusal(Exit::Code(1), output, config);
        assert!(message.contains("  →    2    bogus \u{FFFD}\u{FFFD} here"), "{message}");
        assert_eq!(shown_line("é".repeat(600).as_bytes(), 1023), format!("{} …", "é".repeat(511)));
    }

    #[test]
    fn config_context_is_scrubbed_too() {
        let config = "global\n  bogus \x1b[2J\n";
        let output = "[ALERT] (1) : config : parsing [haproxy.cfg:2] : unknown keyword 'bogus'\n";
        let message = refusal(Exit::Code(1), output, config);
        assert!(message.contains("  →    2    bogus \u{FFFD}[2J"), "{message}");
        assert!(!message.contains('\x1b'));
    }
}
