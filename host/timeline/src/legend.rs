//! The legend under the picture: one entry per kind of bar, mark and latch
//! state (terminations, bad lines and leadership losses only when the run
//! has them), laid out in a grid of equal columns.

use crate::draw::{INK, LABEL_PX, font, mark, text_width};
use crate::run::{Latch, MarkKind, Outcome, Run};
use crate::svg::{Anchor, Baseline, Svg};

/// One entry of the legend.
#[derive(Clone, Copy)]
enum Key {
    Check(Outcome),
    Mark(MarkKind),
    Latch(Latch),
}

impl Key {
    fn words(self) -> &'static str {
        match self {
            Key::Check(Outcome::Pass) => "check passed",
            Key::Check(Outcome::Refused) => "check refused",
            Key::Check(Outcome::Unavailable) => "check could not run",
            Key::Mark(MarkKind::Remembered(_)) => "remembered verdict (no check)",
            Key::Mark(MarkKind::Arrived) => "render arrived",
            Key::Mark(MarkKind::Release) => "release",
            Key::Mark(MarkKind::Applied) => "pod applied a plan",
            Key::Mark(MarkKind::Promote) => "promote",
            Key::Mark(MarkKind::Revert) => "revert",
            Key::Mark(MarkKind::Terminated) => "pod terminated",
            Key::Mark(MarkKind::Error) => "bad input line",
            Key::Mark(MarkKind::LostLeadership) => "lost leadership",
            Key::Latch(Latch::Optimistic) => "latch optimistic",
            Key::Latch(Latch::Refused) => "latch pessimistic: refused",
            Key::Latch(Latch::Unavailable) => "latch pessimistic: unavailable",
            Key::Latch(Latch::TermStart) => "latch pessimistic: term start",
        }
    }
}

const SWATCH: i32 = 26;
const LINE: i32 = 24;
/// The legend's left edge.
const LEFT: i32 = 20;

/// The legend's entries placed: (key, x offset, line).
pub(crate) struct Legend {
    entries: Vec<(Key, i32, i32)>,
}

impl Legend {
    /// Its height, from the heading to the margin under the last line.
    pub fn height(&self) -> i32 {
        let lines = self.entries.iter().map(|&(_, _, line)| line + 1).max().unwrap_or(1);
        12 + 28 + lines * LINE + 12
    }
}

/// The entries `run` calls for, in lines at most `width` wide.
pub(crate) fn layout(run: &Run, width: i32) -> Legend {
    let mut keys = vec![
        Key::Check(Outcome::Pass),
        Key::Check(Outcome::Refused),
        Key::Check(Outcome::Unavailable),
        Key::Mark(MarkKind::Remembered(Outcome::Refused)),
        Key::Mark(MarkKind::Arrived),
        Key::Mark(MarkKind::Release),
        Key::Mark(MarkKind::Applied),
        Key::Mark(MarkKind::Promote),
        Key::Mark(MarkKind::Revert),
    ];
    let present = |kind: MarkKind| run.marks.iter().any(|m| m.kind == kind);
    for kind in [MarkKind::Terminated, MarkKind::Error, MarkKind::LostLeadership] {
        if present(kind) {
            keys.push(Key::Mark(kind));
        }
    }
    keys.extend([
        Key::Latch(Latch::Optimistic),
        Key::Latch(Latch::Refused),
        Key::Latch(Latch::Unavailable),
    ]);
    // Only a run with --start-held has it: no key for what is never drawn.
    if run.band.iter().any(|s| s.state == Latch::TermStart) {
        keys.push(Key::Latch(Latch::TermStart));
    }
    // A grid: every column as wide as the widest entry.
    let column =
        keys.iter().map(|k| SWATCH + 8 + text_width(k.words(), LABEL_PX) + 20).max().unwrap_or(200);
    let columns = (width / column).max(1) as usize;
    let entries = keys
        .into_iter()
        .enumerate()
        .map(|(i, key)| (key, (i % columns) as i32 * column, (i / columns) as i32))
        .collect();
    Legend { entries }
}

/// The legend, its top at `top`.
pub(crate) fn draw(svg: &mut Svg, legend: &Legend, top: i32) {
    let heading_y = top + 12;
    svg.text("Legend", (LEFT, heading_y), font(LABEL_PX, INK, Anchor::Start, Baseline::Top));
    for &(key, x, line) in &legend.entries {
        let x = LEFT + x;
        let y = heading_y + 28 + line * LINE + LINE / 2 - 4;
        let centre = (x + SWATCH / 2, y);
        match key {
            Key::Check(outcome) => svg.rect((x, y - 7), (x + SWATCH, y + 7), outcome.colour()),
            Key::Latch(state) => svg.rect((x, y - 9), (x + SWATCH, y + 9), state.colour()),
            // The dashed line a leadership loss draws across the rows.
            Key::Mark(MarkKind::LostLeadership) => {
                for dy in [-10, 0] {
                    svg.line((centre.0, y + dy), (centre.0, y + dy + 6), INK, 2);
                }
            }
            Key::Mark(kind) => mark(svg, kind, centre),
        }
        svg.text(
            key.words(),
            (x + SWATCH + 8, y),
            font(LABEL_PX, INK, Anchor::Start, Baseline::Middle),
        );
    }
}
