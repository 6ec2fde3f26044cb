//! rendergate-timeline: the timeline of a replay, one picture an operator reads at a glance
//! (`rendergate replay EVENTS --timeline FILE.svg|FILE.html`).
//!
//! Fed the input lines and the output lines of a run, each with the time it
//! happened, it draws on one time axis:
//!
//! - the latch as a band: optimistic, or pessimistic and why;
//! - one row per render: when it arrived, each check as a bar from its start
//!   (the verdict's time less its `duration_ms`) to its verdict, coloured
//!   pass / refused / could not run, a remembered verdict as a diamond (no
//!   check ran), its release as a flag;
//! - one row per pod: its reports (`applied`), promotions and reverts;
//! - bad input lines, and leadership losses across every row;
//! - a legend.
//!
//! The picture is drawn by `plotters` (SVG backend). Each check, mark and
//! latch segment is then wrapped, with `quick-xml`, in a
//! `<g class="check refused">`-style group with a `<title>`: a browser shows
//! the details (HAProxy's message, the times) on hover, and a program can
//! find every check as `g.check`. `.html` puts the SVG in a minimal page.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use quick_xml::events::{BytesEnd, BytesStart, BytesText, Event};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// The timeline could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TimelineError(String);

fn fail(e: impl std::fmt::Display) -> TimelineError {
    TimelineError(e.to_string())
}

/// What the timeline knows of one input line.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct InputLine {
    #[serde(rename = "type")]
    kind: String,
    plan: Option<String>,
    render: Option<String>,
    pod: Option<String>,
    pods: Option<Vec<String>>,
    running_plan: Option<String>,
}

/// What the timeline knows of one output line (docs/protocol.md §2).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct OutputLine {
    #[serde(rename = "type")]
    kind: String,
    plan: String,
    render: String,
    ok: bool,
    refused: bool,
    newest: bool,
    pinned: bool,
    remembered: bool,
    message: String,
    duration_ms: u64,
    state: String,
    reason: Option<String>,
    pod: String,
    to: String,
    line: u64,
}

enum Line {
    In(InputLine),
    Out(OutputLine),
}

/// A run's inputs and outputs in time, to be drawn.
pub struct Timeline {
    title: String,
    lines: Vec<(Duration, Line)>,
}

impl Timeline {
    /// `title` heads the picture (e.g. the replayed file's name).
    pub fn new(title: impl Into<String>) -> Self {
        Timeline { title: title.into(), lines: Vec::new() }
    }

    /// An input line fed at `at`; what is not a protocol event is left out.
    pub fn input(&mut self, at: Duration, line: &str) {
        if let Ok(input) = serde_json::from_str::<InputLine>(line) {
            self.lines.push((at, Line::In(input)));
        }
    }

    /// An output line written at `at`.
    pub fn output(&mut self, at: Duration, line: &str) {
        if let Ok(output) = serde_json::from_str::<OutputLine>(line) {
            self.lines.push((at, Line::Out(output)));
        }
    }

    /// The picture as an SVG document.
    pub fn svg(&self) -> Result<String, TimelineError> {
        let model = Model::build(&self.lines);
        let mut groups = Groups::default();
        let mut drawn = String::new();
        draw(&model, &self.title, &mut groups, &mut drawn)?;
        annotate(&drawn, &self.title, &groups)
    }

    /// The picture in a minimal HTML page.
    pub fn html(&self) -> Result<String, TimelineError> {
        let svg = self.svg()?;
        let title = escape(&self.title);
        Ok(format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>{title}</title>\n\
             <style>body {{ font-family: sans-serif; margin: 16px; color: #222; }} \
             svg g[class]:hover {{ opacity: 0.75; cursor: default; }}</style>\n</head>\n<body>\n\
             <p>Hover a check, a mark or the latch band for details.</p>\n{svg}</body>\n</html>\n"
        ))
    }

    /// Writes the picture to `path`: `.html`/`.htm` a page, anything else SVG.
    pub fn write(&self, path: &Path) -> Result<(), TimelineError> {
        let text = if is_html(path) { self.html()? } else { self.svg()? };
        std::fs::write(path, text).map_err(|e| fail(format!("{}: {e}", path.display())))
    }
}

/// Whether `path` names an HTML page (else an SVG file).
pub fn is_html(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"))
}

fn escape(text: &str) -> String {
    quick_xml::escape::escape(text).into_owned()
}

// ---------------------------------------------------------------------------
// What to draw, in milliseconds and rows.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pass,
    Refused,
    Unavailable,
}

impl Outcome {
    fn of(v: &OutputLine) -> Outcome {
        if v.ok {
            Outcome::Pass
        } else if v.refused {
            Outcome::Refused
        } else {
            Outcome::Unavailable
        }
    }

    fn class(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Refused => "refused",
            Outcome::Unavailable => "could-not-run",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Outcome::Pass => "passed",
            Outcome::Refused => "refused",
            Outcome::Unavailable => "could not run",
        }
    }

    fn colour(self) -> RGBColor {
        match self {
            Outcome::Pass => PASS,
            Outcome::Refused => REFUSED,
            Outcome::Unavailable => UNAVAILABLE,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Latch {
    Optimistic,
    Refused,
    Unavailable,
}

impl Latch {
    fn words(self) -> &'static str {
        match self {
            Latch::Optimistic => "optimistic",
            Latch::Refused => "pessimistic (refused)",
            Latch::Unavailable => "pessimistic (unavailable)",
        }
    }

    fn colour(self) -> RGBColor {
        match self {
            Latch::Optimistic => LATCH_OPTIMISTIC,
            Latch::Refused => LATCH_REFUSED,
            Latch::Unavailable => LATCH_UNAVAILABLE,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MarkKind {
    Arrived,
    Remembered(Outcome),
    Release,
    Applied,
    Terminated,
    Promote,
    Revert,
    Error,
    LostLeadership,
}

impl MarkKind {
    fn class(self) -> &'static str {
        match self {
            MarkKind::Arrived => "mark rendered",
            MarkKind::Remembered(_) => "mark remembered",
            MarkKind::Release => "mark release",
            MarkKind::Applied => "mark applied",
            MarkKind::Terminated => "mark terminated",
            MarkKind::Promote => "mark promote",
            MarkKind::Revert => "mark revert",
            MarkKind::Error => "mark error",
            MarkKind::LostLeadership => "mark lost-leadership",
        }
    }
}

struct Check {
    row: usize,
    start_ms: f64,
    end_ms: f64,
    outcome: Outcome,
    label: String,
    title: String,
}

struct Mark {
    row: usize,
    at_ms: f64,
    kind: MarkKind,
    label: Option<String>,
    title: String,
}

struct Segment {
    from_ms: f64,
    to_ms: f64,
    state: Latch,
}

#[derive(Default)]
struct Stats {
    checks: [usize; 3],
    remembered: usize,
    releases: usize,
    promotions: usize,
    reverts: usize,
    errors: usize,
}

struct Model {
    end_ms: f64,
    /// Row labels, top to bottom: the latch, renders, pods, errors.
    rows: Vec<String>,
    /// Rows after which a new group starts.
    group_breaks: Vec<usize>,
    band: Vec<Segment>,
    checks: Vec<Check>,
    marks: Vec<Mark>,
    stats: Stats,
}

fn ms(at: Duration) -> f64 {
    at.as_secs_f64() * 1000.0
}

/// `1.234 s`, `87 ms`: a time for a tooltip.
fn when(at_ms: f64) -> String {
    if at_ms < 1000.0 { format!("{at_ms:.0} ms") } else { format!("{:.3} s", at_ms / 1000.0) }
}

/// At most `max` characters, cut in the middle: the ends of pod names
/// (`…-0`, `…-1`) are what tells them apart.
fn shorten(text: &str, max: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max {
        return text.to_owned();
    }
    let head = max * 2 / 5;
    let tail = max - head - 1;
    chars[..head].iter().chain(['…'].iter()).chain(chars[chars.len() - tail..].iter()).collect()
}

fn at_most(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

impl Model {
    fn build(lines: &[(Duration, Line)]) -> Model {
        let mut order: Vec<&(Duration, Line)> = lines.iter().collect();
        order.sort_by_key(|(at, _)| *at);

        // Rows first: renders and pods in order of appearance.
        let mut renders: Vec<(String, String)> = Vec::new();
        let mut pods: Vec<String> = Vec::new();
        let mut any_error = false;
        let add_render = |render: &str, plan: &str, renders: &mut Vec<(String, String)>| {
            if !renders.iter().any(|(r, _)| r == render) {
                renders.push((render.to_owned(), plan.to_owned()));
            }
        };
        let add_pod = |pod: &str, pods: &mut Vec<String>| {
            if !pods.iter().any(|p| p == pod) {
                pods.push(pod.to_owned());
            }
        };
        for (_, line) in &order {
            match line {
                Line::In(i) => match i.kind.as_str() {
                    "rendered" => {
                        if let (Some(r), Some(p)) = (&i.render, &i.plan) {
                            add_render(r, p, &mut renders);
                        }
                    }
                    "applied" | "pod_terminated" => {
                        if let Some(pod) = &i.pod {
                            add_pod(pod, &mut pods);
                        }
                    }
                    "pods_discovered" => i.pods.iter().flatten().for_each(|p| add_pod(p, &mut pods)),
                    _ => {}
                },
                Line::Out(o) => match o.kind.as_str() {
                    "verdict" | "release" => add_render(&o.render, &o.plan, &mut renders),
                    "promote" | "revert" => add_pod(&o.pod, &mut pods),
                    "error" => any_error = true,
                    _ => {}
                },
            }
        }
        let render_row: HashMap<&str, usize> =
            renders.iter().enumerate().map(|(i, (r, _))| (r.as_str(), 1 + i)).collect();
        let pod_row: HashMap<&str, usize> =
            pods.iter().enumerate().map(|(i, p)| (p.as_str(), 1 + renders.len() + i)).collect();
        let error_row = 1 + renders.len() + pods.len();

        let mut rows = vec!["latch".to_owned()];
        rows.extend(renders.iter().map(|(r, p)| format!("render {r} ({p})")));
        rows.extend(pods.iter().map(|p| format!("pod {p}")));
        if any_error {
            rows.push("input errors".to_owned());
        }
        let mut group_breaks = vec![0];
        if !renders.is_empty() {
            group_breaks.push(renders.len());
        }
        if !pods.is_empty() && any_error {
            group_breaks.push(renders.len() + pods.len());
        }

        let mut model = Model {
            end_ms: 0.0,
            rows,
            group_breaks,
            band: Vec::new(),
            checks: Vec::new(),
            marks: Vec::new(),
            stats: Stats::default(),
        };
        let mut latch = (0.0, Latch::Optimistic);
        let mut end: f64 = 0.0;
        let mark = |row, at_ms, kind, label: Option<String>, title: String| Mark { row, at_ms, kind, label, title };
        for (at, line) in &order {
            let t = ms(*at);
            end = end.max(t);
            match line {
                Line::In(i) => match i.kind.as_str() {
                    "rendered" => {
                        let (Some(r), Some(p)) = (&i.render, &i.plan) else { continue };
                        let title = format!("render {r} of {p} arrived at {}", when(t));
                        model.marks.push(mark(render_row[r.as_str()], t, MarkKind::Arrived, None, title));
                    }
                    "applied" => {
                        let (Some(pod), Some(plan)) = (&i.pod, &i.plan) else { continue };
                        let running = i.running_plan.as_deref().map(|r| format!(", running {r}")).unwrap_or_default();
                        let title = format!("{pod} applied {plan}{running} (at {})", when(t));
                        model.marks.push(mark(pod_row[pod.as_str()], t, MarkKind::Applied, None, title));
                    }
                    "pod_terminated" => {
                        let Some(pod) = &i.pod else { continue };
                        let title = format!("{pod} terminated at {}", when(t));
                        model.marks.push(mark(
                            pod_row[pod.as_str()],
                            t,
                            MarkKind::Terminated,
                            Some("terminated".into()),
                            title,
                        ));
                    }
                    "lost_leadership" => {
                        let title = format!("leadership lost at {}: a new term starts", when(t));
                        model.marks.push(mark(0, t, MarkKind::LostLeadership, Some("lost leadership".into()), title));
                    }
                    _ => {}
                },
                Line::Out(o) => match o.kind.as_str() {
                    "verdict" => {
                        let row = render_row[o.render.as_str()];
                        let outcome = Outcome::of(o);
                        let mut notes = vec![];
                        if o.pinned {
                            notes.push("the latch is pinned");
                        }
                        if !o.newest {
                            notes.push("not the newest render");
                        }
                        let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
                        let message = if o.message.is_empty() {
                            String::new()
                        } else {
                            format!("\n{}", at_most(&o.message, 1200))
                        };
                        if o.remembered {
                            model.stats.remembered += 1;
                            let title = format!(
                                "render {} of {}: {} from memory, no check ran, at {}{notes}{message}",
                                o.render,
                                o.plan,
                                outcome.words(),
                                when(t)
                            );
                            let label =
                                format!("remembered {}{}", outcome.words(), if o.pinned { ", pinned" } else { "" });
                            model.marks.push(mark(row, t, MarkKind::Remembered(outcome), Some(label), title));
                        } else {
                            model.stats.checks[outcome as usize] += 1;
                            let start = (t - o.duration_ms as f64).max(0.0);
                            let title = format!(
                                "check of render {} ({}): {} after {} ms, {} → {}{notes}{message}",
                                o.render,
                                o.plan,
                                outcome.words(),
                                o.duration_ms,
                                when(start),
                                when(t)
                            );
                            let label = match outcome {
                                Outcome::Unavailable => "could not run".to_owned(),
                                _ => format!(
                                    "{} {} ms{}",
                                    outcome.words(),
                                    o.duration_ms,
                                    if o.pinned { ", pinned" } else { "" }
                                ),
                            };
                            model.checks.push(Check { row, start_ms: start, end_ms: t, outcome, label, title });
                        }
                    }
                    "latch" => {
                        let state = match (o.state.as_str(), o.reason.as_deref()) {
                            ("optimistic", _) => Latch::Optimistic,
                            (_, Some("unavailable")) => Latch::Unavailable,
                            _ => Latch::Refused,
                        };
                        if state != latch.1 {
                            model.band.push(Segment { from_ms: latch.0, to_ms: t, state: latch.1 });
                            latch = (t, state);
                        }
                    }
                    "release" => {
                        model.stats.releases += 1;
                        let title =
                            format!("render {} of {} released at {}: it may be dispatched", o.render, o.plan, when(t));
                        model.marks.push(mark(
                            render_row[o.render.as_str()],
                            t,
                            MarkKind::Release,
                            Some("released".into()),
                            title,
                        ));
                    }
                    "promote" => {
                        model.stats.promotions += 1;
                        let title = format!("{} may promote its baseline to {} (at {})", o.pod, o.plan, when(t));
                        model.marks.push(mark(
                            pod_row[o.pod.as_str()],
                            t,
                            MarkKind::Promote,
                            Some(format!("promote {}", o.plan)),
                            title,
                        ));
                    }
                    "revert" => {
                        model.stats.reverts += 1;
                        let title = format!("{} reverts {} to {} (at {})", o.pod, o.plan, o.to, when(t));
                        let label = format!("revert {} → {}", o.plan, o.to);
                        model.marks.push(mark(pod_row[o.pod.as_str()], t, MarkKind::Revert, Some(label), title));
                    }
                    "error" => {
                        model.stats.errors += 1;
                        let title = format!("input line {}: {}", o.line, at_most(&o.message, 400));
                        model.marks.push(mark(error_row, t, MarkKind::Error, Some(format!("line {}", o.line)), title));
                    }
                    _ => {}
                },
            }
        }
        // Room after the last event for its label; never a zero-width axis.
        model.end_ms = (end / 0.88).max(end + 20.0).max(100.0);
        model.band.push(Segment { from_ms: latch.0, to_ms: model.end_ms, state: latch.1 });
        model
    }

    fn subtitle(&self) -> String {
        let s = &self.stats;
        let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let checks: usize = s.checks.iter().sum();
        let mut parts = vec![
            plural(self.rows.iter().filter(|r| r.starts_with("render ")).count(), "render", "renders"),
            format!(
                "{} ({} passed, {} refused, {} could not run)",
                plural(checks, "check", "checks"),
                s.checks[0],
                s.checks[1],
                s.checks[2]
            ),
            plural(s.remembered, "remembered verdict", "remembered verdicts"),
            plural(s.releases, "release", "releases"),
            plural(s.promotions, "promotion", "promotions"),
            plural(s.reverts, "revert", "reverts"),
        ];
        if s.errors > 0 {
            parts.push(plural(s.errors, "bad input line", "bad input lines"));
        }
        parts.join(" · ")
    }
}

// ---------------------------------------------------------------------------
// Drawing.

const PASS: RGBColor = RGBColor(0x2e, 0x9e, 0x4f);
const REFUSED: RGBColor = RGBColor(0xd6, 0x45, 0x45);
const UNAVAILABLE: RGBColor = RGBColor(0xe6, 0x9b, 0x17);
const LATCH_OPTIMISTIC: RGBColor = RGBColor(0xd8, 0xf0, 0xdd);
const LATCH_REFUSED: RGBColor = RGBColor(0xf8, 0xd3, 0xd3);
const LATCH_UNAVAILABLE: RGBColor = RGBColor(0xfc, 0xe9, 0xc2);
const RELEASE: RGBColor = RGBColor(0x2f, 0x6f, 0xd6);
const PROMOTE: RGBColor = RGBColor(0x1b, 0x7a, 0x3a);
const REVERT: RGBColor = RGBColor(0xb3, 0x26, 0x26);
const NEUTRAL: RGBColor = RGBColor(0x80, 0x80, 0x80);
const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
const SOFT_INK: RGBColor = RGBColor(0x55, 0x55, 0x55);
const STRIPE: RGBColor = RGBColor(0xf4, 0xf5, 0xf7);
const RULE: RGBColor = RGBColor(0x9a, 0x9a, 0x9a);

const WIDTH: u32 = 1280;
const ROW: i32 = 30;
const HEAD: i32 = 64;
const FONT: &str = "sans-serif";
/// Plotters' size for 13 px text (it writes `font-size` as size / 1.24).
const LABEL_SIZE: f64 = 16.0;
const LABEL_PX: f64 = LABEL_SIZE / 1.24;
const SMALL_SIZE: f64 = 14.5;
const SMALL_PX: f64 = SMALL_SIZE / 1.24;

/// A generous estimate of a text's width: better a label left out than two
/// labels on top of each other.
fn text_width(text: &str, px: f64) -> i32 {
    (text.chars().count() as f64 * px * 0.62).ceil() as i32
}

fn font(size: f64, colour: &RGBColor) -> TextStyle<'static> {
    TextStyle { color: colour.to_backend_color(), ..TextStyle::from((FONT, size).into_font()) }
}

/// The groups to wrap: the n-th holds what was drawn between its two
/// sentinels.
#[derive(Default)]
struct Groups {
    list: Vec<(String, String)>,
}

const SENTINEL: char = '\u{E000}';

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

impl Groups {
    /// Draws what `draw` draws as one group with this class and tooltip.
    fn group<'a>(
        &mut self,
        area: &Area<'a>,
        class: &str,
        title: String,
        draw: impl FnOnce(&Area<'a>) -> Result<(), TimelineError>,
    ) -> Result<(), TimelineError> {
        let n = self.list.len();
        self.list.push((class.to_owned(), title));
        let sentinel = |text: String| Text::new(text, (0, 0), font(10.0, &BLACK));
        area.draw(&sentinel(format!("{SENTINEL}begin {n}"))).map_err(fail)?;
        draw(area)?;
        area.draw(&sentinel(format!("{SENTINEL}end {n}"))).map_err(fail)
    }
}

/// The legend's entries, in order.
#[derive(Clone, Copy)]
enum Key {
    Check(Outcome),
    Remembered,
    Arrived,
    Release,
    Applied,
    Promote,
    Revert,
    Terminated,
    Error,
    LostLeadership,
    Latch(Latch),
}

impl Key {
    fn words(self) -> &'static str {
        match self {
            Key::Check(Outcome::Pass) => "check passed",
            Key::Check(Outcome::Refused) => "check refused",
            Key::Check(Outcome::Unavailable) => "check could not run",
            Key::Remembered => "remembered verdict (no check)",
            Key::Arrived => "render arrived",
            Key::Release => "release",
            Key::Applied => "pod applied a plan",
            Key::Promote => "promote",
            Key::Revert => "revert",
            Key::Terminated => "pod terminated",
            Key::Error => "bad input line",
            Key::LostLeadership => "lost leadership",
            Key::Latch(Latch::Optimistic) => "latch optimistic",
            Key::Latch(Latch::Refused) => "latch pessimistic: refused",
            Key::Latch(Latch::Unavailable) => "latch pessimistic: unavailable",
        }
    }
}

const SWATCH: i32 = 26;
const LEGEND_LINE: i32 = 24;

/// The legend's entries placed in lines: (key, x offset, line).
fn legend_layout(model: &Model, width: i32) -> Vec<(Key, i32, i32)> {
    let mut keys = vec![
        Key::Check(Outcome::Pass),
        Key::Check(Outcome::Refused),
        Key::Check(Outcome::Unavailable),
        Key::Remembered,
        Key::Arrived,
        Key::Release,
        Key::Applied,
        Key::Promote,
        Key::Revert,
    ];
    let present = |kind: MarkKind| model.marks.iter().any(|m| m.kind == kind);
    for (kind, key) in [
        (MarkKind::Terminated, Key::Terminated),
        (MarkKind::Error, Key::Error),
        (MarkKind::LostLeadership, Key::LostLeadership),
    ] {
        if present(kind) {
            keys.push(key);
        }
    }
    keys.extend([Key::Latch(Latch::Optimistic), Key::Latch(Latch::Refused), Key::Latch(Latch::Unavailable)]);
    // A grid: every column as wide as the widest entry.
    let column = keys.iter().map(|k| SWATCH + 8 + text_width(k.words(), LABEL_PX) + 20).max().unwrap_or(200);
    let columns = (width / column).max(1) as usize;
    keys.into_iter().enumerate().map(|(i, key)| (key, (i % columns) as i32 * column, (i / columns) as i32)).collect()
}

fn draw(model: &Model, title: &str, groups: &mut Groups, out: &mut String) -> Result<(), TimelineError> {
    let label_w = model.rows.iter().map(|r| text_width(r, LABEL_PX)).max().unwrap_or(60).clamp(60, 330) + 16;
    let legend = legend_layout(model, WIDTH as i32 - 40);
    let legend_lines = legend.iter().map(|(_, _, l)| l + 1).max().unwrap_or(1);
    let legend_h = 28 + legend_lines * LEGEND_LINE + 12;
    let plot_h = model.rows.len() as i32 * ROW;
    let axis_h = 52;
    let height = (HEAD + plot_h + axis_h + 16 + legend_h) as u32;

    let root = SVGBackend::with_string(out, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(fail)?;
    let (upper, lower) = root.split_vertically(height as i32 - legend_h);
    let (head, body) = upper.split_vertically(HEAD);

    head.draw(&Text::new(
        format!("rendergate timeline: {title}"),
        (16, 10),
        font(24.0, &INK).pos(Pos::new(HPos::Left, VPos::Top)),
    ))
    .map_err(fail)?;
    head.draw(&Text::new(model.subtitle(), (16, 40), font(LABEL_SIZE, &SOFT_INK).pos(Pos::new(HPos::Left, VPos::Top))))
        .map_err(fail)?;

    let rows = model.rows.len() as f64;
    let mut chart = ChartBuilder::on(&body)
        .margin_left(12)
        .margin_right(28)
        .margin_top(4)
        .x_label_area_size(axis_h)
        .y_label_area_size(label_w)
        .build_cartesian_2d(0f64..model.end_ms, 0f64..rows)
        .map_err(fail)?;
    let plot = chart.plotting_area().clone();
    let (xs, ys) = plot.get_pixel_range();
    let row_y = |row: usize| plot.map_coordinate(&(0.0, rows - row as f64 - 0.5)).1;
    let x_of = |at_ms: f64| plot.map_coordinate(&(at_ms, 0.0)).0;

    // Row stripes, then the time grid over them.
    for row in 0..model.rows.len() {
        if row % 2 == 1 {
            let y = row_y(row);
            root.draw(&Rectangle::new([(xs.start, y - ROW / 2), (xs.end, y + ROW / 2)], STRIPE.filled()))
                .map_err(fail)?;
        }
    }
    let unit = TimeUnit::for_span(model.end_ms);
    let format_tick = |v: &f64| unit.format(*v);
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(12)
        .x_label_formatter(&format_tick)
        .x_desc(format!("time since the start of the run ({})", unit.name()))
        .label_style(font(LABEL_SIZE, &INK))
        .axis_desc_style(font(LABEL_SIZE, &SOFT_INK))
        .x_max_light_lines(1)
        .light_line_style(RGBColor(0xf0, 0xf0, 0xf0))
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .axis_style(RULE)
        .draw()
        .map_err(fail)?;

    // Row labels, and rules between the groups of rows.
    for (row, label) in model.rows.iter().enumerate() {
        let text = shorten(label, 40);
        let style = font(LABEL_SIZE, &INK).pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(text, (xs.start - 10, row_y(row)), style)).map_err(fail)?;
    }
    for &after in &model.group_breaks {
        let y = row_y(after) + ROW / 2;
        root.draw(&PathElement::new(vec![(xs.start - label_w + 8, y), (xs.end, y)], RULE.stroke_width(1)))
            .map_err(fail)?;
    }

    // What each row already holds, in pixels: labels go where nothing is.
    let mut taken: Vec<Vec<(i32, i32)>> = vec![Vec::new(); model.rows.len()];
    for m in &model.marks {
        let x = x_of(m.at_ms);
        taken[m.row].push((x - 7, x + 7));
    }

    // The latch band, its state written in where it fits beside the marks.
    let band_y = row_y(0);
    for segment in &model.band {
        let (x0, x1) = (x_of(segment.from_ms), x_of(segment.to_ms).max(x_of(segment.from_ms) + 1));
        let title =
            format!("latch {} from {} to {}", segment.state.words(), when(segment.from_ms), when(segment.to_ms));
        let class = match segment.state {
            Latch::Optimistic => "latch optimistic",
            _ => "latch pessimistic",
        };
        groups.group(&root, class, title, |area| {
            area.draw(&Rectangle::new(
                [(x0, band_y - ROW / 2 + 3), (x1, band_y + ROW / 2 - 3)],
                segment.state.colour().filled(),
            ))
            .map_err(fail)?;
            let words = segment.state.words();
            let w = text_width(words, SMALL_PX);
            let mut a = x0 + 6;
            while let Some(&(_, end)) = taken[0].iter().find(|&&(t0, t1)| a < t1 + 3 && a + w + 3 > t0) {
                a = end + 4;
            }
            if a + w + 6 <= x1 {
                taken[0].push((a, a + w));
                let style = font(SMALL_SIZE, &INK).pos(Pos::new(HPos::Left, VPos::Center));
                area.draw(&Text::new(words, (a, band_y), style)).map_err(fail)?;
            }
            Ok(())
        })?;
    }

    // Leadership losses cut across every row.
    for m in model.marks.iter().filter(|m| m.kind == MarkKind::LostLeadership) {
        let x = x_of(m.at_ms);
        let mut y = ys.start;
        while y < ys.end {
            root.draw(&PathElement::new(vec![(x, y), (x, (y + 6).min(ys.end))], INK.stroke_width(2))).map_err(fail)?;
            y += 10;
        }
    }

    // Checks: bars from start to verdict, at least 4 px wide.
    for check in &model.checks {
        let y = row_y(check.row);
        let x0 = x_of(check.start_ms);
        let x1 = x_of(check.end_ms).max(x0 + 4);
        taken[check.row].push((x0, x1));
        let class = format!("check {}", check.outcome.class());
        groups.group(&root, &class, check.title.clone(), |area| {
            area.draw(&Rectangle::new([(x0, y - 9), (x1, y + 9)], check.outcome.colour().filled())).map_err(fail)
        })?;
    }
    for m in &model.marks {
        let (x, y) = (x_of(m.at_ms), row_y(m.row));
        groups.group(&root, m.kind.class(), m.title.clone(), |area| draw_mark(area, m.kind, (x, y)))?;
    }

    // Labels, in time order, where they fit.
    let mut labels: Vec<(usize, f64, i32, i32, &str)> = Vec::new();
    for check in &model.checks {
        let x0 = x_of(check.start_ms);
        labels.push((check.row, check.start_ms, x0, x_of(check.end_ms).max(x0 + 4), &check.label));
    }
    for m in &model.marks {
        if let Some(label) = &m.label {
            let x = x_of(m.at_ms);
            labels.push((m.row, m.at_ms, x - 7, x + 7, label));
        }
    }
    labels.sort_by(|a, b| a.1.total_cmp(&b.1));
    for (row, _, x0, x1, text) in labels {
        let w = text_width(text, SMALL_PX);
        let free = |a: i32, b: i32, taken: &[(i32, i32)]| {
            a >= xs.start
                && b <= xs.end
                && taken.iter().all(|&(t0, t1)| (t0, t1) == (x0, x1) || b + 3 <= t0 || a >= t1 + 3)
        };
        let (a, right) = if free(x1 + 4, x1 + 4 + w, &taken[row]) {
            (x1 + 4, true)
        } else if free(x0 - 4 - w, x0 - 4, &taken[row]) {
            (x0 - 4 - w, false)
        } else {
            continue;
        };
        taken[row].push((a, a + w));
        let (at, anchor) = if right { (a, HPos::Left) } else { (a + w, HPos::Right) };
        let style = font(SMALL_SIZE, &INK).pos(Pos::new(anchor, VPos::Center));
        root.draw(&Text::new(text.to_owned(), (at, row_y(row)), style)).map_err(fail)?;
    }

    // The legend.
    let (lx, ly) = (20, 12);
    lower
        .draw(&Text::new("Legend", (lx, ly), font(LABEL_SIZE, &INK).pos(Pos::new(HPos::Left, VPos::Top))))
        .map_err(fail)?;
    for (key, x, line) in legend {
        let y = ly + 28 + line * LEGEND_LINE + LEGEND_LINE / 2 - 4;
        let centre = (lx + x + SWATCH / 2, y);
        match key {
            Key::Check(outcome) => lower
                .draw(&Rectangle::new([(lx + x, y - 7), (lx + x + SWATCH, y + 7)], outcome.colour().filled()))
                .map_err(fail)?,
            Key::Latch(state) => lower
                .draw(&Rectangle::new([(lx + x, y - 9), (lx + x + SWATCH, y + 9)], state.colour().filled()))
                .map_err(fail)?,
            Key::Remembered => draw_mark(&lower, MarkKind::Remembered(Outcome::Refused), centre)?,
            Key::Arrived => draw_mark(&lower, MarkKind::Arrived, centre)?,
            Key::Release => draw_mark(&lower, MarkKind::Release, centre)?,
            Key::Applied => draw_mark(&lower, MarkKind::Applied, centre)?,
            Key::Promote => draw_mark(&lower, MarkKind::Promote, centre)?,
            Key::Revert => draw_mark(&lower, MarkKind::Revert, centre)?,
            Key::Terminated => draw_mark(&lower, MarkKind::Terminated, centre)?,
            Key::Error => draw_mark(&lower, MarkKind::Error, centre)?,
            Key::LostLeadership => {
                for dy in [-10, 0] {
                    lower
                        .draw(&PathElement::new(vec![(centre.0, y + dy), (centre.0, y + dy + 6)], INK.stroke_width(2)))
                        .map_err(fail)?;
                }
            }
        }
        let style = font(LABEL_SIZE, &INK).pos(Pos::new(HPos::Left, VPos::Center));
        lower.draw(&Text::new(key.words(), (lx + x + SWATCH + 8, y), style)).map_err(fail)?;
    }
    root.present().map_err(fail)?;
    Ok(())
}

/// One mark, centred on `(x, y)`.
fn draw_mark(area: &Area<'_>, kind: MarkKind, (x, y): (i32, i32)) -> Result<(), TimelineError> {
    let result = match kind {
        MarkKind::Arrived => area.draw(&Rectangle::new([(x - 1, y - 11), (x + 1, y + 11)], NEUTRAL.filled())),
        MarkKind::Remembered(outcome) => {
            area.draw(&Polygon::new(vec![(x, y - 8), (x + 8, y), (x, y + 8), (x - 8, y)], outcome.colour().filled()))
        }
        MarkKind::Release => {
            area.draw(&Rectangle::new([(x - 1, y - 11), (x + 1, y + 11)], RELEASE.filled())).map_err(fail)?;
            area.draw(&Polygon::new(vec![(x + 1, y - 11), (x + 11, y - 6), (x + 1, y - 1)], RELEASE.filled()))
        }
        MarkKind::Applied => area.draw(&Circle::new((x, y), 4, NEUTRAL.stroke_width(2))),
        MarkKind::Terminated => {
            area.draw(&PathElement::new(vec![(x - 5, y - 5), (x + 5, y + 5)], NEUTRAL.stroke_width(2)))
                .map_err(fail)?;
            area.draw(&PathElement::new(vec![(x - 5, y + 5), (x + 5, y - 5)], NEUTRAL.stroke_width(2)))
        }
        MarkKind::Promote => {
            area.draw(&Polygon::new(vec![(x, y - 8), (x + 8, y + 6), (x - 8, y + 6)], PROMOTE.filled()))
        }
        MarkKind::Revert => area.draw(&Polygon::new(vec![(x - 8, y - 6), (x + 8, y - 6), (x, y + 8)], REVERT.filled())),
        MarkKind::Error => {
            area.draw(&PathElement::new(vec![(x - 6, y - 6), (x + 6, y + 6)], REFUSED.stroke_width(3)))
                .map_err(fail)?;
            area.draw(&PathElement::new(vec![(x - 6, y + 6), (x + 6, y - 6)], REFUSED.stroke_width(3)))
        }
        MarkKind::LostLeadership => {
            area.draw(&Polygon::new(vec![(x - 6, y - 8), (x + 6, y - 8), (x, y)], INK.filled()))
        }
    };
    result.map_err(fail)
}

/// Tick labels on the time axis.
#[derive(Clone, Copy)]
enum TimeUnit {
    Millis,
    Seconds,
    Minutes,
}

impl TimeUnit {
    fn for_span(span_ms: f64) -> TimeUnit {
        if span_ms <= 3_000.0 {
            TimeUnit::Millis
        } else if span_ms <= 300_000.0 {
            TimeUnit::Seconds
        } else {
            TimeUnit::Minutes
        }
    }

    fn name(self) -> &'static str {
        match self {
            TimeUnit::Millis => "ms",
            TimeUnit::Seconds => "s",
            TimeUnit::Minutes => "m:ss",
        }
    }

    fn format(self, at_ms: f64) -> String {
        match self {
            TimeUnit::Millis => format!("{at_ms:.0}"),
            TimeUnit::Seconds => {
                let text = format!("{:.2}", at_ms / 1000.0);
                text.trim_end_matches('0').trim_end_matches('.').to_owned()
            }
            TimeUnit::Minutes => {
                let secs = (at_ms / 1000.0).round() as u64;
                format!("{}:{:02}", secs / 60, secs % 60)
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Groups and tooltips.

/// Copies the drawn SVG, giving it a `<title>` and turning each sentinel pair
/// into a `<g class=…>` with a `<title>` around what was drawn between them.
fn annotate(svg: &str, title: &str, groups: &Groups) -> Result<String, TimelineError> {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut writer = quick_xml::Writer::new(Vec::new());
    let mut depth = 0usize;
    loop {
        let event = reader.read_event().map_err(fail)?;
        match event {
            Event::Eof => break,
            Event::Start(start) if start.name().as_ref() == "text" => {
                // Read the whole text element: a sentinel is dropped.
                let mut inner = Vec::new();
                let mut content = String::new();
                loop {
                    match reader.read_event().map_err(fail)? {
                        Event::End(end) if end.name().as_ref() == "text" => {
                            inner.push(Event::End(end));
                            break;
                        }
                        Event::Eof => return Err(fail("unterminated <text> in the drawn SVG")),
                        Event::Text(t) => {
                            content.push_str(&t);
                            inner.push(Event::Text(t));
                        }
                        other => inner.push(other),
                    }
                }
                match sentinel(&content) {
                    Some(("begin", n)) => {
                        let (class, tooltip) = groups.list.get(n).ok_or_else(|| fail("unknown group"))?;
                        let g = BytesStart::new("g").with_attributes([("class", class.as_str())]);
                        writer.write_event(Event::Start(g)).map_err(fail)?;
                        write_title(&mut writer, tooltip)?;
                    }
                    Some(("end", _)) => writer.write_event(Event::End(BytesEnd::new("g"))).map_err(fail)?,
                    _ => {
                        writer.write_event(Event::Start(start)).map_err(fail)?;
                        for e in inner {
                            writer.write_event(e).map_err(fail)?;
                        }
                    }
                }
            }
            Event::Start(start) => {
                depth += 1;
                let root = depth == 1 && start.name().as_ref() == "svg";
                writer.write_event(Event::Start(start)).map_err(fail)?;
                if root {
                    write_title(&mut writer, &format!("rendergate timeline: {title}"))?;
                }
            }
            Event::End(end) => {
                depth = depth.saturating_sub(1);
                writer.write_event(Event::End(end)).map_err(fail)?;
            }
            other => writer.write_event(other).map_err(fail)?,
        }
    }
    String::from_utf8(writer.into_inner()).map_err(fail)
}

fn sentinel(content: &str) -> Option<(&str, usize)> {
    let rest = content.trim().strip_prefix(SENTINEL)?;
    let (what, n) = rest.split_once(' ')?;
    Some((what, n.parse().ok()?))
}

fn write_title(writer: &mut quick_xml::Writer<Vec<u8>>, text: &str) -> Result<(), TimelineError> {
    writer.write_event(Event::Start(BytesStart::new("title"))).map_err(fail)?;
    writer.write_event(Event::Text(BytesText::new(text))).map_err(fail)?;
    writer.write_event(Event::End(BytesEnd::new("title"))).map_err(fail)?;
    writer.write_event(Event::Text(BytesText::new("\n"))).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Timeline {
        let mut t = Timeline::new("sample");
        let at = Duration::from_millis;
        t.input(at(0), r#"{"type":"pods_discovered","pods":["ns/a","ns/b"]}"#);
        t.input(at(1), r#"{"type":"rendered","plan":"plan-1","render":"r-1","config":""}"#);
        t.output(at(40), r#"{"type":"verdict","plan":"plan-1","render":"r-1","checksum":"x","ok":true,"refused":false,"newest":true,"pinned":false,"remembered":false,"message":"","duration_ms":38}"#);
        t.input(at(50), r#"{"type":"applied","pod":"ns/a","plan":"plan-1","running_plan":"plan-1"}"#);
        t.output(at(51), r#"{"type":"promote","pod":"ns/a","plan":"plan-1"}"#);
        t.input(at(60), r#"{"type":"rendered","plan":"plan-2","render":"r-2","config":""}"#);
        t.output(at(100), r#"{"type":"verdict","plan":"plan-2","render":"r-2","checksum":"y","ok":false,"refused":true,"newest":true,"pinned":false,"remembered":false,"message":"[ALERT] <bad> & worse","duration_ms":39}"#);
        t.output(at(100), r#"{"type":"latch","state":"pessimistic","reason":"refused"}"#);
        t.output(at(101), r#"{"type":"revert","pod":"ns/b","plan":"plan-2","to":"baseline"}"#);
        t.output(at(110), r#"{"type":"error","line":7,"message":"not valid JSON"}"#);
        t.input(at(120), r#"{"type":"rendered","plan":"plan-2","render":"r-3","config":""}"#);
        t.output(at(120), r#"{"type":"verdict","plan":"plan-2","render":"r-3","checksum":"y","ok":false,"refused":true,"newest":true,"pinned":true,"remembered":true,"message":"","duration_ms":0}"#);
        t.input(at(130), r#"{"type":"rendered","plan":"plan-3","render":"r-4","config":""}"#);
        t.output(at(170), r#"{"type":"verdict","plan":"plan-3","render":"r-4","checksum":"z","ok":true,"refused":false,"newest":true,"pinned":false,"remembered":false,"message":"","duration_ms":35}"#);
        t.output(at(170), r#"{"type":"latch","state":"optimistic"}"#);
        t.output(at(170), r#"{"type":"release","plan":"plan-3","render":"r-4"}"#);
        t
    }

    #[test]
    fn one_group_per_check_and_the_svg_parses() {
        let svg = sample().svg().unwrap();
        assert!(!svg.contains(SENTINEL), "no sentinel left");
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let class_of = |n: &roxmltree::Node| n.attribute("class").unwrap_or("").to_owned();
        let checks: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("g") && class_of(n).starts_with("check "))
            .map(|n| class_of(&n))
            .collect();
        assert_eq!(checks, ["check pass", "check refused", "check pass"]);
        let titles: Vec<&str> =
            doc.descendants().filter(|n| n.has_tag_name("title")).filter_map(|n| n.text()).collect();
        assert!(titles.iter().any(|t| t.contains("[ALERT] <bad> & worse")), "{titles:?}");
        for class in
            ["mark remembered", "mark release", "mark promote", "mark revert", "mark error", "latch pessimistic"]
        {
            assert!(doc.descendants().any(|n| n.has_tag_name("g") && class_of(&n) == class), "{class}");
        }
    }

    #[test]
    fn html_wraps_the_svg() {
        let html = sample().html().unwrap();
        let doc = roxmltree::Document::parse_with_options(
            &html,
            roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() },
        )
        .unwrap();
        assert!(doc.descendants().any(|n| n.has_tag_name("svg")));
    }

    #[test]
    fn long_labels_keep_both_ends() {
        assert_eq!(shorten("pod haptic/haproxy-0", 40), "pod haptic/haproxy-0");
        let cut = shorten("pod ingress-controller-namespace/haproxy-ingress-deployment-3", 40);
        assert_eq!(cut.chars().count(), 40);
        assert!(cut.starts_with("pod ingress-") && cut.ends_with("deployment-3") && cut.contains('…'), "{cut}");
    }

    #[test]
    fn time_ticks_read_naturally() {
        assert_eq!(TimeUnit::for_span(900.0).format(250.0), "250");
        assert_eq!(TimeUnit::for_span(9000.0).format(1500.0), "1.5");
        assert_eq!(TimeUnit::for_span(9000.0).format(2000.0), "2");
        assert_eq!(TimeUnit::for_span(900_000.0).format(150_000.0), "2:30");
    }
}
