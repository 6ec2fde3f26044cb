//! The picture of a run: where each row, bar, mark and label goes and how it
//! looks (sizes, colours, shapes, class names), written as SVG in paint
//! order. Each check, mark and latch segment is one `<g class=…>` with its
//! `<title>`, its shape and its label, so `g.check` finds every check.

use crate::axis::{self, TimeUnit};
use crate::legend;
use crate::run::{Latch, MarkKind, Outcome, Run};
use crate::svg::{Anchor, Baseline, Colour, Font, Svg};

pub(crate) const PASS: Colour = Colour(0x2e, 0x9e, 0x4f);
pub(crate) const REFUSED: Colour = Colour(0xd6, 0x45, 0x45);
const UNAVAILABLE: Colour = Colour(0xe6, 0x9b, 0x17);
const LATCH_OPTIMISTIC: Colour = Colour(0xd8, 0xf0, 0xdd);
const LATCH_REFUSED: Colour = Colour(0xf8, 0xd3, 0xd3);
const LATCH_UNAVAILABLE: Colour = Colour(0xfc, 0xe9, 0xc2);
const LATCH_TERM_START: Colour = Colour(0xdd, 0xdd, 0xee);
const RELEASE: Colour = Colour(0x2f, 0x6f, 0xd6);
const PROMOTE: Colour = Colour(0x1b, 0x7a, 0x3a);
const REVERT: Colour = Colour(0xb3, 0x26, 0x26);
const NEUTRAL: Colour = Colour(0x80, 0x80, 0x80);
pub(crate) const INK: Colour = Colour(0x22, 0x22, 0x22);
const SOFT_INK: Colour = Colour(0x55, 0x55, 0x55);
const WHITE: Colour = Colour(0xff, 0xff, 0xff);
const STRIPE: Colour = Colour(0xf4, 0xf5, 0xf7);
const RULE: Colour = Colour(0x9a, 0x9a, 0x9a);
const GRID: Colour = Colour(0xdd, 0xdd, 0xdd);
const FINE_GRID: Colour = Colour(0xf0, 0xf0, 0xf0);

pub(crate) const WIDTH: i32 = 1280;
/// A row's height.
const ROW: i32 = 30;
/// Above the rows: the title and the counts.
const HEAD: i32 = 64;
/// Below the rows: ticks, their labels and the axis' name.
const AXIS: i32 = 52;
const TITLE_PX: f64 = 19.4;
pub(crate) const LABEL_PX: f64 = 12.9;
const SMALL_PX: f64 = 11.7;
/// A check's bar is at least this wide, however short the check.
const CHECK_MIN: i32 = 4;
/// The most ticks on the time axis.
const TICKS: usize = 12;

impl Outcome {
    /// The class a check's group carries beside `check`.
    fn class(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Refused => "refused",
            Outcome::Unavailable => "could-not-run",
        }
    }

    pub(crate) fn colour(self) -> Colour {
        match self {
            Outcome::Pass => PASS,
            Outcome::Refused => REFUSED,
            Outcome::Unavailable => UNAVAILABLE,
        }
    }
}

impl Latch {
    fn class(self) -> &'static str {
        match self {
            Latch::Optimistic => "latch optimistic",
            Latch::Refused | Latch::Unavailable | Latch::TermStart => "latch pessimistic",
        }
    }

    pub(crate) fn colour(self) -> Colour {
        match self {
            Latch::Optimistic => LATCH_OPTIMISTIC,
            Latch::Refused => LATCH_REFUSED,
            Latch::Unavailable => LATCH_UNAVAILABLE,
            Latch::TermStart => LATCH_TERM_START,
        }
    }
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

/// A text's look: `px` high, in `colour`, positioned by `anchor` and `baseline`.
pub(crate) fn font(px: f64, colour: Colour, anchor: Anchor, baseline: Baseline) -> Font {
    Font { px, colour, anchor, baseline }
}

/// A generous estimate of a text's width: better a label left out than two
/// labels on top of each other.
pub(crate) fn text_width(text: &str, px: f64) -> i32 {
    (text.chars().count() as f64 * px * 0.62).ceil() as i32
}

/// At most `max` characters, cut in the middle: the ends of pod names
/// (`…-0`, `…-1`) are what tells them apart.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max {
        return text.to_owned();
    }
    let head = max * 2 / 5;
    let tail = max - head - 1;
    chars[..head].iter().chain(['…'].iter()).chain(chars[chars.len() - tail..].iter()).collect()
}

/// Where the rows sit, in pixels.
struct Frame {
    /// The plot: rows and time, left, right, top and bottom.
    left: i32,
    right: i32,
    top: i32,
    bottom: i32,
    end_ms: f64,
}

impl Frame {
    /// Rows start a few pixels below the top, as the last ends above the bottom.
    const PAD: i32 = 6;

    fn x(&self, at_ms: f64) -> i32 {
        self.left + (at_ms / self.end_ms * f64::from(self.right - self.left)).round() as i32
    }

    /// From `from_ms` to `to_ms`, at least `min` pixels wide.
    fn span(&self, from_ms: f64, to_ms: f64, min: i32) -> (i32, i32) {
        let x0 = self.x(from_ms);
        (x0, self.x(to_ms).max(x0 + min))
    }

    fn row_y(&self, row: usize) -> i32 {
        self.top + Self::PAD + row as i32 * ROW + ROW / 2
    }
}

/// Where a label was placed: its x, and whether the text starts there
/// (right of its mark) or ends there (left of it).
type Placed = Option<(i32, Anchor)>;

/// The picture of `run` as an SVG document headed `title`.
pub(crate) fn draw(run: &Run, title: &str) -> String {
    let label_w =
        run.rows.iter().map(|r| text_width(r, LABEL_PX)).max().unwrap_or(60).clamp(60, 330) + 16;
    let legend = legend::layout(run, WIDTH - 40);
    let top = HEAD + 4;
    let frame = Frame {
        left: 12 + label_w,
        right: WIDTH - 28,
        top,
        bottom: top + run.rows.len() as i32 * ROW + 2 * Frame::PAD,
        end_ms: run.end_ms,
    };
    let legend_top = frame.bottom + AXIS;
    let height = legend_top + legend.height();

    let mut svg = Svg::new(WIDTH, height, &format!("rendergate timeline: {title}"));
    svg.rect((0, 0), (WIDTH, height), WHITE);
    let heading = font(TITLE_PX, INK, Anchor::Start, Baseline::Top);
    svg.text(&format!("rendergate timeline: {title}"), (16, 10), heading);
    svg.text(&run.subtitle(), (16, 40), font(LABEL_PX, SOFT_INK, Anchor::Start, Baseline::Top));

    rows_and_axis(&mut svg, run, &frame, label_w);
    let (band_labels, check_labels, mark_labels) = place_labels(run, &frame);

    // The latch band, its state written in where it fits beside the marks.
    let band_y = frame.row_y(0);
    for (segment, placed) in run.band.iter().zip(&band_labels) {
        let (x0, x1) = frame.span(segment.from_ms, segment.to_ms, 1);
        svg.group(segment.state.class(), &segment.title(), |svg| {
            svg.rect(
                (x0, band_y - ROW / 2 + 3),
                (x1, band_y + ROW / 2 - 3),
                segment.state.colour(),
            );
            if let Some(x) = placed {
                svg.text(
                    segment.state.words(),
                    (*x, band_y),
                    font(SMALL_PX, INK, Anchor::Start, Baseline::Middle),
                );
            }
        });
    }

    // Leadership losses cut across every row.
    for m in run.marks.iter().filter(|m| m.kind == MarkKind::LostLeadership) {
        let x = frame.x(m.at_ms);
        svg.dashed_line((x, frame.top), (x, frame.bottom), INK, 2, (6, 4));
    }

    // Checks: bars from start to verdict.
    for (check, placed) in run.checks.iter().zip(&check_labels) {
        let y = frame.row_y(check.row);
        let (x0, x1) = frame.span(check.start_ms, check.end_ms, CHECK_MIN);
        svg.group(&format!("check {}", check.outcome.class()), &check.title, |svg| {
            svg.rect((x0, y - 9), (x1, y + 9), check.outcome.colour());
            label(svg, &check.label, *placed, y);
        });
    }
    for (m, placed) in run.marks.iter().zip(&mark_labels) {
        let (x, y) = (frame.x(m.at_ms), frame.row_y(m.row));
        svg.group(m.kind.class(), &m.title, |svg| {
            mark(svg, m.kind, (x, y));
            if let Some(text) = &m.label {
                label(svg, text, *placed, y);
            }
        });
    }

    legend::draw(&mut svg, &legend, legend_top);
    svg.finish()
}

/// Row stripes, the time grid, the axis with its ticks, row labels, and
/// rules between the groups of rows (the latch, renders, pods, bad input).
fn rows_and_axis(svg: &mut Svg, run: &Run, frame: &Frame, label_w: i32) {
    for row in (1..run.rows.len()).step_by(2) {
        let y = frame.row_y(row);
        svg.rect((frame.left, y - ROW / 2), (frame.right, y + ROW / 2), STRIPE);
    }
    let unit = TimeUnit::for_span(run.end_ms);
    let step = axis::tick_step(run.end_ms, TICKS);
    // A fine line between each two ticks, then the ticks' lines over them.
    for at in axis::ticks(run.end_ms - step / 2.0, step) {
        let x = frame.x(at + step / 2.0);
        svg.line((x, frame.top), (x, frame.bottom), FINE_GRID, 1);
    }
    let tick_font = font(LABEL_PX, INK, Anchor::Middle, Baseline::Top);
    for at in axis::ticks(run.end_ms, step) {
        let x = frame.x(at);
        svg.line((x, frame.top), (x, frame.bottom), GRID, 1);
        svg.line((x, frame.bottom), (x, frame.bottom + 5), RULE, 1);
        svg.text(&unit.format(at), (x, frame.bottom + 9), tick_font);
    }
    svg.line((frame.left, frame.top), (frame.left, frame.bottom), RULE, 1);
    svg.line((frame.left, frame.bottom), (frame.right, frame.bottom), RULE, 1);
    svg.text(
        &format!("time since the start of the run ({})", unit.name()),
        ((frame.left + frame.right) / 2, frame.bottom + AXIS - 10),
        font(LABEL_PX, SOFT_INK, Anchor::Middle, Baseline::Alphabetic),
    );

    let row_font = font(LABEL_PX, INK, Anchor::End, Baseline::Middle);
    for (row, text) in run.rows.iter().enumerate() {
        svg.text(&shorten(text, 40), (frame.left - 10, frame.row_y(row)), row_font);
    }
    for &after in &run.group_breaks {
        let y = frame.row_y(after) + ROW / 2;
        svg.line((frame.left - label_w + 8, y), (frame.right, y), RULE, 1);
    }
}

/// The pixels of each row that hold a shape or a label already. A label
/// goes only where its own pixels, and `GAP` more on each side, are free.
struct Taken {
    width: usize,
    /// 1 where taken: bytes, so that a search is a plain `memchr`.
    cells: Vec<u8>,
}

impl Taken {
    const GAP: i32 = 3;

    fn new(rows: usize) -> Taken {
        let width = WIDTH as usize;
        Taken { width, cells: vec![0; rows * width] }
    }

    /// Where row `row`'s pixels from `a` to `b` (exclusive) are in `cells`,
    /// clipped to the picture.
    fn span(&self, row: usize, a: i32, b: i32) -> std::ops::Range<usize> {
        let clip = |x: i32| x.clamp(0, WIDTH) as usize;
        let (a, b) = (clip(a), clip(b).max(clip(a)));
        row * self.width + a..row * self.width + b
    }

    fn take(&mut self, row: usize, (a, b): (i32, i32)) {
        let span = self.span(row, a, b);
        self.cells[span].fill(1);
    }

    /// Whether a label on `(a, b)` touches nothing taken.
    fn is_free(&self, row: usize, (a, b): (i32, i32)) -> bool {
        !self.cells[self.span(row, a - Self::GAP, b + Self::GAP)].contains(&1)
    }

    /// Where the first taken pixels that a label on `(a, b)` would touch
    /// end; `None` if it touches none.
    fn clash(&self, row: usize, (a, b): (i32, i32)) -> Option<i32> {
        let span = self.span(row, a - Self::GAP, b + Self::GAP);
        let first = span.start + self.cells[span].iter().position(|&cell| cell == 1)?;
        let row_end = self.span(row, 0, WIDTH).end;
        let run = self.cells[first..row_end].iter().take_while(|&&cell| cell == 1).count();
        Some((first + run - row * self.width) as i32)
    }
}

/// Where the latch band's words, and each check's and mark's label, go:
/// in time order, right of their shape, else left of it, where nothing on
/// the row is yet; left out where neither fits.
fn place_labels(run: &Run, frame: &Frame) -> (Vec<Option<i32>>, Vec<Placed>, Vec<Placed>) {
    let mut taken = Taken::new(run.rows.len());
    for m in &run.marks {
        let x = frame.x(m.at_ms);
        taken.take(m.row, (x - 7, x + 7));
    }
    let band = run
        .band
        .iter()
        .map(|segment| {
            let (x0, x1) = frame.span(segment.from_ms, segment.to_ms, 1);
            let w = text_width(segment.state.words(), SMALL_PX);
            let mut a = x0 + 6;
            while let Some(end) = taken.clash(0, (a, a + w)) {
                a = end + 4;
            }
            (a + w + 6 <= x1).then(|| {
                taken.take(0, (a, a + w));
                a
            })
        })
        .collect();

    enum Owner {
        Check(usize),
        Mark(usize),
    }
    let mut labels: Vec<(usize, f64, i32, i32, &str, Owner)> = Vec::new();
    for (i, check) in run.checks.iter().enumerate() {
        let (x0, x1) = frame.span(check.start_ms, check.end_ms, CHECK_MIN);
        taken.take(check.row, (x0, x1));
        labels.push((check.row, check.start_ms, x0, x1, &check.label, Owner::Check(i)));
    }
    for (i, m) in run.marks.iter().enumerate() {
        if let Some(label) = &m.label {
            let x = frame.x(m.at_ms);
            labels.push((m.row, m.at_ms, x - 7, x + 7, label, Owner::Mark(i)));
        }
    }
    labels.sort_by(|a, b| a.1.total_cmp(&b.1));

    let mut checks = vec![None; run.checks.len()];
    let mut marks = vec![None; run.marks.len()];
    for (row, _, x0, x1, text, owner) in labels {
        let w = text_width(text, SMALL_PX);
        // Its own shape is never in the way: a label keeps 4 pixels from it.
        let free =
            |a: i32, b: i32| a >= frame.left && b <= frame.right && taken.is_free(row, (a, b));
        let (a, placed) = if free(x1 + 4, x1 + 4 + w) {
            (x1 + 4, (x1 + 4, Anchor::Start))
        } else if free(x0 - 4 - w, x0 - 4) {
            (x0 - 4 - w, (x0 - 4, Anchor::End))
        } else {
            continue;
        };
        taken.take(row, (a, a + w));
        match owner {
            Owner::Check(i) => checks[i] = Some(placed),
            Owner::Mark(i) => marks[i] = Some(placed),
        }
    }
    (band, checks, marks)
}

/// A check's or mark's label where it was placed, if it was.
fn label(svg: &mut Svg, text: &str, placed: Placed, y: i32) {
    if let Some((x, anchor)) = placed {
        svg.text(text, (x, y), font(SMALL_PX, INK, anchor, Baseline::Middle));
    }
}

/// One mark, centred on `(x, y)`.
pub(crate) fn mark(svg: &mut Svg, kind: MarkKind, (x, y): (i32, i32)) {
    match kind {
        MarkKind::Arrived => svg.rect((x - 1, y - 11), (x + 1, y + 11), NEUTRAL),
        MarkKind::Remembered(outcome) => {
            svg.polygon(&[(x, y - 8), (x + 8, y), (x, y + 8), (x - 8, y)], outcome.colour())
        }
        MarkKind::Release => {
            svg.rect((x - 1, y - 11), (x + 1, y + 11), RELEASE);
            svg.polygon(&[(x + 1, y - 11), (x + 11, y - 6), (x + 1, y - 1)], RELEASE);
        }
        MarkKind::Applied => svg.ring((x, y), 4, NEUTRAL, 2),
        MarkKind::Terminated => {
            svg.line((x - 5, y - 5), (x + 5, y + 5), NEUTRAL, 2);
            svg.line((x - 5, y + 5), (x + 5, y - 5), NEUTRAL, 2);
        }
        MarkKind::Promote => svg.polygon(&[(x, y - 8), (x + 8, y + 6), (x - 8, y + 6)], PROMOTE),
        MarkKind::Revert => svg.polygon(&[(x - 8, y - 6), (x + 8, y - 6), (x, y + 8)], REVERT),
        MarkKind::Error => {
            svg.line((x - 6, y - 6), (x + 6, y + 6), REFUSED, 3);
            svg.line((x - 6, y + 6), (x + 6, y - 6), REFUSED, 3);
        }
        MarkKind::LostLeadership => svg.polygon(&[(x - 6, y - 8), (x + 6, y - 8), (x, y)], INK),
    }
}
