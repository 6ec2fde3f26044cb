//! What a run did, in rows and milliseconds: the input and output lines read
//! (only the fields the picture shows), then the rows (latch, renders, pods,
//! bad input), the latch band, each check and each mark with its tooltip.
//! Nothing here knows pixels or SVG.

use serde::Deserialize;
use std::collections::HashMap;
use std::time::Duration;

/// What the timeline knows of one input line (docs/protocol.md §2, events in).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct InputLine {
    #[serde(rename = "type")]
    kind: String,
    plan: Option<String>,
    render: Option<String>,
    pod: Option<String>,
    pods: Option<Vec<String>>,
    running_plan: Option<String>,
}

/// What the timeline knows of one output line (docs/protocol.md §2, outputs).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct OutputLine {
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

/// One line of the run, as the picture reads it.
pub(crate) enum Line {
    In(InputLine),
    Out(OutputLine),
}

impl Line {
    /// An input line; `None` for what is not a protocol event.
    pub fn input(text: &str) -> Option<Line> {
        serde_json::from_str(text).ok().map(Line::In)
    }

    /// An output line; `None` for what is not one.
    pub fn output(text: &str) -> Option<Line> {
        serde_json::from_str(text).ok().map(Line::Out)
    }
}

/// What a verdict said.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
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

    fn words(self) -> &'static str {
        match self {
            Outcome::Pass => "passed",
            Outcome::Refused => "refused",
            Outcome::Unavailable => "could not run",
        }
    }
}

/// The latch's state, and why it is pessimistic.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Latch {
    Optimistic,
    Refused,
    Unavailable,
    /// A term held from its start (`--start-held`), before its first verdict.
    TermStart,
}

impl Latch {
    pub fn words(self) -> &'static str {
        match self {
            Latch::Optimistic => "optimistic",
            Latch::Refused => "pessimistic (refused)",
            Latch::Unavailable => "pessimistic (unavailable)",
            Latch::TermStart => "pessimistic (term start)",
        }
    }
}

/// What a mark on a row stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarkKind {
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

/// A check that ran: a bar from its start to its verdict.
pub(crate) struct Check {
    pub row: usize,
    pub start_ms: f64,
    pub end_ms: f64,
    pub outcome: Outcome,
    /// Written beside the bar where it fits.
    pub label: String,
    /// The tooltip: the times, the notes, HAProxy's message.
    pub title: String,
}

/// A moment on a row: an arrival, a remembered verdict, a release, a
/// report, a promotion, a revert, a bad line, a leadership loss.
pub(crate) struct Mark {
    pub row: usize,
    pub at_ms: f64,
    pub kind: MarkKind,
    pub label: Option<String>,
    pub title: String,
}

/// A stretch of the latch band in one state.
pub(crate) struct Segment {
    pub from_ms: f64,
    pub to_ms: f64,
    pub state: Latch,
}

impl Segment {
    /// Its tooltip.
    pub fn title(&self) -> String {
        format!("latch {} from {} to {}", self.state.words(), when(self.from_ms), when(self.to_ms))
    }
}

/// What the subtitle counts.
#[derive(Default)]
struct Stats {
    checks: [usize; 3],
    remembered: usize,
    releases: usize,
    promotions: usize,
    reverts: usize,
    errors: usize,
}

/// A run, ready to draw.
pub(crate) struct Run {
    /// The end of the time axis: past the last event, with room for its label.
    pub end_ms: f64,
    /// Row labels, top to bottom: the latch, renders, pods, bad input.
    pub rows: Vec<String>,
    /// Rows after which a new group starts.
    pub group_breaks: Vec<usize>,
    pub band: Vec<Segment>,
    pub checks: Vec<Check>,
    pub marks: Vec<Mark>,
    stats: Stats,
}

fn ms(at: Duration) -> f64 {
    at.as_secs_f64() * 1000.0
}

/// `1.234 s`, `87 ms`: a time for a tooltip.
fn when(at_ms: f64) -> String {
    if at_ms < 1000.0 { format!("{at_ms:.0} ms") } else { format!("{:.3} s", at_ms / 1000.0) }
}

/// Names in order of first appearance, each with what came with it first
/// (a render's plan) and its place in that order.
struct FirstSeen<'a, T> {
    order: Vec<(&'a str, T)>,
    position: HashMap<&'a str, usize>,
}

impl<'a, T> FirstSeen<'a, T> {
    fn new() -> Self {
        FirstSeen { order: Vec::new(), position: HashMap::new() }
    }

    /// Adds `name` with `with`, unless it was seen.
    fn add(&mut self, name: &'a str, with: T) {
        if !self.position.contains_key(name) {
            self.position.insert(name, self.order.len());
            self.order.push((name, with));
        }
    }
}

/// The first `max` characters of `text`, and `…` if there were more.
fn at_most(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

impl Run {
    pub fn build(lines: &[(Duration, Line)]) -> Run {
        let mut order: Vec<&(Duration, Line)> = lines.iter().collect();
        order.sort_by_key(|(at, _)| *at);

        // Rows first: renders and pods in order of appearance.
        let mut renders = FirstSeen::new();
        let mut pods = FirstSeen::new();
        let mut any_error = false;
        for (_, line) in &order {
            match line {
                Line::In(i) => match i.kind.as_str() {
                    "rendered" => {
                        if let (Some(r), Some(p)) = (&i.render, &i.plan) {
                            renders.add(r, p.as_str());
                        }
                    }
                    "applied" | "pod_terminated" => {
                        if let Some(pod) = &i.pod {
                            pods.add(pod, ());
                        }
                    }
                    "pods_discovered" => i.pods.iter().flatten().for_each(|p| pods.add(p, ())),
                    _ => {}
                },
                Line::Out(o) => match o.kind.as_str() {
                    "verdict" | "release" => renders.add(&o.render, o.plan.as_str()),
                    "promote" | "revert" => pods.add(&o.pod, ()),
                    "error" => any_error = true,
                    _ => {}
                },
            }
        }
        let render_row = |render: &str| 1 + renders.position[render];
        let pod_row = |pod: &str| 1 + renders.order.len() + pods.position[pod];
        let error_row = 1 + renders.order.len() + pods.order.len();

        let mut rows = vec!["latch".to_owned()];
        rows.extend(renders.order.iter().map(|(r, p)| format!("render {r} ({p})")));
        rows.extend(pods.order.iter().map(|(p, ())| format!("pod {p}")));
        if any_error {
            rows.push("input errors".to_owned());
        }
        let mut group_breaks = vec![0];
        if !renders.order.is_empty() {
            group_breaks.push(renders.order.len());
        }
        if !pods.order.is_empty() && any_error {
            group_breaks.push(renders.order.len() + pods.order.len());
        }

        let mut run = Run {
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
        let mark = |row, at_ms, kind, label: Option<String>, title: String| Mark {
            row,
            at_ms,
            kind,
            label,
            title,
        };
        for (at, line) in &order {
            let t = ms(*at);
            end = end.max(t);
            match line {
                Line::In(i) => match i.kind.as_str() {
                    "rendered" => {
                        let (Some(r), Some(p)) = (&i.render, &i.plan) else { continue };
                        let title = format!("render {r} of {p} arrived at {}", when(t));
                        run.marks.push(mark(
                            render_row(r.as_str()),
                            t,
                            MarkKind::Arrived,
                            None,
                            title,
                        ));
                    }
                    "applied" => {
                        let (Some(pod), Some(plan)) = (&i.pod, &i.plan) else { continue };
                        let running = i
                            .running_plan
                            .as_deref()
                            .map(|r| format!(", running {r}"))
                            .unwrap_or_default();
                        let title = format!("{pod} applied {plan}{running} (at {})", when(t));
                        run.marks.push(mark(
                            pod_row(pod.as_str()),
                            t,
                            MarkKind::Applied,
                            None,
                            title,
                        ));
                    }
                    "pod_terminated" => {
                        let Some(pod) = &i.pod else { continue };
                        let title = format!("{pod} terminated at {}", when(t));
                        run.marks.push(mark(
                            pod_row(pod.as_str()),
                            t,
                            MarkKind::Terminated,
                            Some("terminated".into()),
                            title,
                        ));
                    }
                    "lost_leadership" => {
                        let title = format!("leadership lost at {}: a new term starts", when(t));
                        run.marks.push(mark(
                            0,
                            t,
                            MarkKind::LostLeadership,
                            Some("lost leadership".into()),
                            title,
                        ));
                    }
                    _ => {}
                },
                Line::Out(o) => match o.kind.as_str() {
                    "verdict" => {
                        let row = render_row(o.render.as_str());
                        let outcome = Outcome::of(o);
                        let mut notes = vec![];
                        if o.pinned {
                            notes.push("the latch is pinned");
                        }
                        if !o.newest {
                            notes.push("not the newest render");
                        }
                        let notes = if notes.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", notes.join("; "))
                        };
                        let message = if o.message.is_empty() {
                            String::new()
                        } else {
                            format!("\n{}", at_most(&o.message, 1200))
                        };
                        if o.remembered {
                            run.stats.remembered += 1;
                            let title = format!(
                                "render {} of {}: {} from memory, no check ran, at {}{notes}{message}",
                                o.render,
                                o.plan,
                                outcome.words(),
                                when(t)
                            );
                            let label = format!(
                                "remembered {}{}",
                                outcome.words(),
                                if o.pinned { ", pinned" } else { "" }
                            );
                            run.marks.push(mark(
                                row,
                                t,
                                MarkKind::Remembered(outcome),
                                Some(label),
                                title,
                            ));
                        } else {
                            run.stats.checks[outcome as usize] += 1;
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
                            run.checks.push(Check {
                                row,
                                start_ms: start,
                                end_ms: t,
                                outcome,
                                label,
                                title,
                            });
                        }
                    }
                    "latch" => {
                        let state = match (o.state.as_str(), o.reason.as_deref()) {
                            ("optimistic", _) => Latch::Optimistic,
                            (_, Some("unavailable")) => Latch::Unavailable,
                            (_, Some("term-start")) => Latch::TermStart,
                            _ => Latch::Refused,
                        };
                        if state != latch.1 {
                            run.band.push(Segment { from_ms: latch.0, to_ms: t, state: latch.1 });
                            latch = (t, state);
                        }
                    }
                    "release" => {
                        run.stats.releases += 1;
                        let title = format!(
                            "render {} of {} released at {}: it may be dispatched",
                            o.render,
                            o.plan,
                            when(t)
                        );
                        run.marks.push(mark(
                            render_row(o.render.as_str()),
                            t,
                            MarkKind::Release,
                            Some("released".into()),
                            title,
                        ));
                    }
                    "promote" => {
                        run.stats.promotions += 1;
                        let title = format!(
                            "{} may promote its baseline to {} (at {})",
                            o.pod,
                            o.plan,
                            when(t)
                        );
                        run.marks.push(mark(
                            pod_row(o.pod.as_str()),
                            t,
                            MarkKind::Promote,
                            Some(format!("promote {}", o.plan)),
                            title,
                        ));
                    }
                    "revert" => {
                        run.stats.reverts += 1;
                        let title =
                            format!("{} reverts {} to {} (at {})", o.pod, o.plan, o.to, when(t));
                        let label = format!("revert {} → {}", o.plan, o.to);
                        run.marks.push(mark(
                            pod_row(o.pod.as_str()),
                            t,
                            MarkKind::Revert,
                            Some(label),
                            title,
                        ));
                    }
                    "error" => {
                        run.stats.errors += 1;
                        let title = format!("input line {}: {}", o.line, at_most(&o.message, 400));
                        run.marks.push(mark(
                            error_row,
                            t,
                            MarkKind::Error,
                            Some(format!("line {}", o.line)),
                            title,
                        ));
                    }
                    _ => {}
                },
            }
        }
        // Room after the last event for its label; never a zero-width axis.
        run.end_ms = (end / 0.88).max(end + 20.0).max(100.0);
        run.band.push(Segment { from_ms: latch.0, to_ms: run.end_ms, state: latch.1 });
        run
    }

    /// One line of counts: renders, checks by outcome, marks.
    pub fn subtitle(&self) -> String {
        let s = &self.stats;
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let checks: usize = s.checks.iter().sum();
        let mut parts = vec![
            plural(
                self.rows.iter().filter(|r| r.starts_with("render ")).count(),
                "render",
                "renders",
            ),
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
