//! The renders the gate still cares about: the newest one, and superseded
//! ones that were never judged. Decides which render is judged next, and
//! keeps the gate's one retry back-off (docs/behaviour.md, "When a check
//! cannot run").

use super::Pods;
use crate::render::Render;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The retry back-off after "could not run": 1, 2, 4, 8, 16, then 30 s.
pub fn backoff(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        1..=5 => Duration::from_secs(1 << (failures - 1)),
        _ => Duration::from_secs(30),
    }
}

/// One retained render and how far its judgement got.
#[derive(Clone, Debug)]
pub struct Entry {
    pub render: Arc<Render>,
    /// When it came, counted over every render the gate was sent: a
    /// larger number is a newer render.
    pub arrival: u64,
    /// HAProxy's answer (or memory's) is in: never checked again.
    pub judged: bool,
    /// A check of it is running now.
    pub in_flight: bool,
    /// Its last check could not run: it waits for the gate's retry time.
    pub failed: bool,
}

impl Entry {
    fn new(render: Arc<Render>, arrival: u64) -> Self {
        Entry { render, arrival, judged: false, in_flight: false, failed: false }
    }
}

/// The gate's one back-off: "could not run" in a row, whatever the render,
/// and when a failed render may be tried again. Any judgement resets it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backoff {
    /// "Could not run" outcomes since the last pass or refusal.
    pub failures: u32,
    /// Failed renders are not retried before this.
    pub retry_at: Option<Instant>,
}

/// What to judge next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Judge this render now.
    Ready(Arc<Render>),
    /// Nothing is ready; something will be at this instant.
    Wait(Instant),
    Idle,
}

#[derive(Debug)]
pub struct Renders {
    limit: usize,
    newest: Option<Entry>,
    /// Unjudged superseded renders, oldest first.
    superseded: VecDeque<Entry>,
    backoff: Backoff,
    /// Renders sent so far (never reset: arrivals only compare).
    arrivals: u64,
}

impl Renders {
    /// `limit`: how many superseded renders no pod holds may be kept.
    pub fn new(limit: usize) -> Self {
        Renders {
            limit,
            newest: None,
            superseded: VecDeque::new(),
            backoff: Backoff::default(),
            arrivals: 0,
        }
    }

    pub fn newest(&self) -> Option<&Entry> {
        self.newest.as_ref()
    }

    pub fn superseded(&self) -> impl Iterator<Item = &Entry> {
        self.superseded.iter()
    }

    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// Renders held in all (newest included).
    pub fn len(&self) -> usize {
        self.superseded.len() + usize::from(self.newest.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&mut self) {
        self.newest = None;
        self.superseded.clear();
        self.backoff = Backoff::default();
    }

    /// A new render becomes the newest. The previous newest is kept as
    /// superseded only while unjudged (or being judged); an earlier
    /// occurrence of the same render id is replaced.
    pub fn push(&mut self, render: Arc<Render>) {
        self.superseded.retain(|e| e.render.id() != render.id() || e.in_flight);
        if let Some(previous) = self.newest.take() {
            let same_id = previous.render.id() == render.id();
            if previous.in_flight || (!previous.judged && !same_id) {
                self.superseded.push_back(previous);
            }
        }
        self.arrivals += 1;
        self.newest = Some(Entry::new(render, self.arrivals));
    }

    /// When this very render came ([`Entry::arrival`]), while it is kept.
    pub fn arrival(&self, render: &Arc<Render>) -> Option<u64> {
        self.newest
            .iter()
            .chain(self.superseded.iter())
            .find(|e| Arc::ptr_eq(&e.render, render))
            .map(|e| e.arrival)
    }

    /// Whether a verdict on `render` counts as newest: it is the newest
    /// render (this very occurrence: a re-sent render id with other content
    /// is not), or has the same plan and content.
    pub fn is_newest(&self, render: &Arc<Render>) -> bool {
        self.newest.as_ref().is_some_and(|n| {
            Arc::ptr_eq(&n.render, render)
                || (n.render.plan() == render.plan() && n.render.checksum() == render.checksum())
        })
    }

    /// Whether some pod holds this render: by its id, or, for a pod that
    /// names only a plan, as the latest render of that plan.
    fn held(&self, render: &Arc<Render>, pods: &Pods) -> bool {
        if pods.hold_render(render.id()) {
            return true;
        }
        // The hash lookup first: the scan only matters for plan-only pods.
        pods.hold_plan(render.plan())
            && self
                .newest
                .iter()
                .chain(self.superseded.iter().rev())
                .find(|e| e.render.plan() == render.plan())
                .is_some_and(|e| Arc::ptr_eq(&e.render, render))
    }

    /// The unjudged entry holding this very render (the same `Arc`: a
    /// re-sent render id is another entry).
    pub fn get_mut(&mut self, render: &Arc<Render>) -> Option<&mut Entry> {
        self.newest
            .iter_mut()
            .chain(self.superseded.iter_mut())
            .find(|e| Arc::ptr_eq(&e.render, render) && !e.judged)
    }

    /// Records a judgement of this exact render; a judged superseded render
    /// is forgotten. A judgement (HAProxy's or memory's) resets the back-off:
    /// a failed render waiting for its retry is ready again.
    pub fn judged(&mut self, render: &Arc<Render>) {
        self.backoff = Backoff::default();
        if let Some(n) = self.newest.as_mut().filter(|n| Arc::ptr_eq(&n.render, render)) {
            n.judged = true;
            n.in_flight = false;
        }
        self.superseded.retain(|e| !Arc::ptr_eq(&e.render, render));
    }

    /// Records "could not run": the render stays unjudged, and every failed
    /// render waits for the gate's next retry time.
    pub fn failed(&mut self, render: &Arc<Render>, now: Instant) {
        self.backoff.failures += 1;
        self.backoff.retry_at = Some(now + backoff(self.backoff.failures));
        if let Some(e) = self.get_mut(render) {
            e.in_flight = false;
            e.failed = true;
        }
    }

    /// Drops the oldest superseded renders no pod holds while more than the
    /// limit wait. The render being judged is not one of them, and a render
    /// some pod holds is never dropped.
    pub fn trim(&mut self, pods: &Pods) {
        let mut waiting = self.superseded.iter().filter(|e| !e.in_flight).count();
        while waiting > self.limit {
            let Some(at) =
                self.superseded.iter().position(|e| !e.in_flight && !self.held(&e.render, pods))
            else {
                break;
            };
            self.superseded.remove(at);
            waiting -= 1;
        }
    }

    /// The next render to judge: the newest first, then superseded renders
    /// some pod holds, newest first. A render that failed waits for the
    /// gate's retry time (one not yet tried does not); when `retry` is false
    /// (draining) it is skipped.
    pub fn next(&self, now: Instant, pods: &Pods, retry: bool) -> Next {
        let newest = self.newest.iter();
        let stragglers = self.superseded.iter().rev().filter(|e| self.held(&e.render, pods));
        let mut wait = None;
        for e in newest.chain(stragglers) {
            if e.judged || e.in_flight || (!retry && e.failed) {
                continue;
            }
            match self.backoff.retry_at {
                Some(at) if e.failed && at > now => wait = Some(at),
                _ => return Next::Ready(e.render.clone()),
            }
        }
        wait.map_or(Next::Idle, Next::Wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_sequence() {
        let secs: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
