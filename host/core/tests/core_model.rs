//! Model-based test of the sans-IO gate core: a small, deliberately plain
//! model of docs/behaviour.md (the latch table, coalescing, stragglers,
//! trimming, verdict memory, the one back-off, pods, leadership, draining)
//! runs beside `rendergate_core::Gate`, and proptest streams drive both.
//! After every input the two must have produced the same effects — every
//! field of every verdict, latch, release and decision request, and the same
//! renders sent to the checker — and must want to be woken at the same time.
//!
//! The model favours being obviously right over being fast: renders in a
//! `Vec`, memory as a list searched front to back, pods in a `BTreeMap`, and
//! each rule written where the document states it. The streams lean on what
//! invariant tests miss: pods reporting superseded renders while a check is
//! in flight, "could not run" streaks between verdicts, leadership lost
//! mid-check, contents and render ids repeated, a new judge mid-run.

mod common;

use common::{Mix, Op, Pools, config_text, id_name, plan_name, pod_name};
use policy_core::{Fleet, Name, Outcome, PodState, Trigger};
use proptest::prelude::*;
use rendergate_core::render::{Checksum, Render};
use rendergate_core::{
    CheckId, CheckOutcome, CoreConfig, Effect, Event, Gate, LatchState, PodReport, Reason, Verdict,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PLANS: u8 = 3;
const IDS: u8 = 8;
const CONTENTS: u8 = 4;
const PODS: u8 = 4;
const SUPERSEDED_LIMIT: usize = 4;
const JUDGES: [&str; 2] = ["haproxy sha256:one", "haproxy sha256:two"];
const CHECK_TOOK: Duration = Duration::from_millis(80);
const POOLS: Pools = Pools { plans: PLANS, ids: IDS, contents: CONTENTS, pods: PODS };
/// Many pod reports and "could not run" streaks; clock moves at the back-off's edges.
const MIX: Mix = Mix {
    applied: 7,
    finish: 6,
    unavailable: 0.35,
    switch_judge: 1,
    advance_ms: [1, 999, 1000, 2000, 16_000, 30_000],
};

#[derive(Clone, Debug)]
struct Scenario {
    interval: Duration,
    memory: usize,
    plan_history: usize,
    /// Every term starts held (`--start-held`).
    start_held: bool,
    /// `refuse[plan * CONTENTS + content]`: HAProxy refuses that content.
    refuse: Vec<bool>,
    ops: Vec<Op>,
    /// End of input after the ops: drain, finishing checks with these answers.
    drain: Option<Vec<bool>>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop_oneof![Just(Duration::ZERO), Just(Duration::from_secs(1))],
        prop_oneof![Just(16usize), Just(2)],
        prop_oneof![Just(32usize), Just(2)],
        prop::collection::vec(prop::bool::weighted(0.4), (PLANS * CONTENTS) as usize),
        prop::collection::vec(common::op(POOLS, MIX), 1..160),
        prop::option::of(prop::collection::vec(prop::bool::weighted(0.3), 12)),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(interval, memory, plan_history, refuse, ops, drain, start_held)| {
            Scenario { interval, memory, plan_history, start_held, refuse, ops, drain }
        })
}

/// One occurrence of a render, as the model keeps it.
#[derive(Clone, Debug)]
struct Held {
    /// Which occurrence (renders are compared by this, not by id).
    seq: u64,
    render: Arc<Render>,
    judged: bool,
    in_flight: bool,
    failed: bool,
}

/// docs/behaviour.md, written out plainly.
struct Model {
    interval: Duration,
    memory_capacity: usize,
    plan_history: usize,
    start_held: bool,
    judge: &'static str,
    pessimistic: Option<Reason>,
    pinned: Option<Reason>,
    newest: Option<Held>,
    /// Superseded renders, oldest first.
    superseded: Vec<Held>,
    /// (plan, checksum, judge, answer), least recently used first.
    memory: Vec<(String, Checksum, String, CheckOutcome)>,
    pods: BTreeMap<String, PodReport>,
    /// Render id → (its content, HAProxy's judgement of it): the host's
    /// rules promote only to content that passed.
    /// Render id → its content, HAProxy's judgement of it, and its plan.
    judged: BTreeMap<String, (Checksum, Outcome, String)>,
    /// Passed plan → the newest occurrence of a render of it whose content
    /// passed (seq, id, content): a plan-only pod's `promote` names it.
    passed_renders: BTreeMap<String, (u64, String, Checksum)>,
    passed: Vec<String>,
    refused: Vec<String>,
    in_flight: Option<u64>,
    last_start: Option<Instant>,
    failures: u32,
    retry_at: Option<Instant>,
    draining: bool,
    timer: Option<Instant>,
    effects: Vec<Seen>,
}

impl Model {
    /// A gate's first term; a held one says so first ("Term start").
    fn new(
        interval: Duration,
        memory_capacity: usize,
        plan_history: usize,
        start_held: bool,
    ) -> Self {
        let held = LatchState::Pessimistic(Reason::TermStart);
        Model {
            interval,
            memory_capacity,
            plan_history,
            start_held,
            judge: JUDGES[0],
            pessimistic: start_held.then_some(Reason::TermStart),
            pinned: None,
            newest: None,
            superseded: vec![],
            memory: vec![],
            pods: BTreeMap::new(),
            judged: BTreeMap::new(),
            passed_renders: BTreeMap::new(),
            passed: vec![],
            refused: vec![],
            in_flight: None,
            last_start: None,
            failures: 0,
            retry_at: None,
            draining: false,
            timer: None,
            effects: if start_held { vec![Seen::Other(Effect::Latch(held))] } else { vec![] },
        }
    }

    fn rendered(&mut self, seq: u64, render: Arc<Render>, now: Instant) {
        // a render id sent again with other content loses its judgement
        if self.judged.get(render.id()).is_some_and(|(c, _, _)| c != render.checksum()) {
            self.judged.remove(render.id());
        }
        // and no longer names content of its plan that passed
        self.passed_renders.retain(|_, (_, id, c)| id != render.id() || c == render.checksum());
        // An earlier occurrence of the same render id is replaced (unless being checked).
        self.superseded.retain(|h| h.render.id() != render.id() || h.in_flight);
        if let Some(previous) = self.newest.take() {
            // The previous newest stays only while unchecked (or being checked).
            if previous.in_flight || (!previous.judged && previous.render.id() != render.id()) {
                self.superseded.push(previous);
            }
        }
        self.newest = Some(Held { seq, render, judged: false, in_flight: false, failed: false });
        self.step(now);
    }

    fn applied(&mut self, report: PodReport, now: Instant) {
        // A report identical to the pod's last one changes nothing and asks nothing.
        if self.pods.get(&*report.pod) != Some(&report) {
            let pod = report.state();
            self.pods.insert(report.pod.to_string(), report);
            self.decide(Trigger::Applied(pod));
        }
        self.step(now);
    }

    fn forget_pods(&mut self, gone: impl Fn(&str) -> bool, now: Instant) {
        self.pods.retain(|name, _| !gone(name));
        self.step(now);
    }

    fn lost_leadership(&mut self, now: Instant) {
        if self.pessimistic.is_some() && !self.start_held {
            self.effects.push(Seen::Other(Effect::Latch(LatchState::Optimistic)));
        }
        // A new term starts from nothing; the tunables, the judge, draining
        // and the spacing of checks (the last start) carry over.
        let fresh =
            Model::new(self.interval, self.memory_capacity, self.plan_history, self.start_held);
        let mut kept = std::mem::replace(self, fresh);
        self.judge = kept.judge;
        self.draining = kept.draining;
        self.last_start = kept.last_start;
        // A held term's `Latch` comes after what the old term said last.
        kept.effects.append(&mut self.effects);
        self.effects = kept.effects;
        self.step(now);
    }

    fn finished(&mut self, outcome: CheckOutcome, judge: &str, now: Instant) {
        let Some(seq) = self.in_flight.take() else { return };
        let held = self.find(seq).expect("the render being checked is kept").clone();
        if outcome.is_judgement() {
            self.memory.retain(|(p, c, j, _)| {
                !(p == held.render.plan() && c == held.render.checksum() && j == judge)
            });
            if self.memory_capacity > 0 {
                if self.memory.len() == self.memory_capacity {
                    self.memory.remove(0);
                }
                let key = (
                    held.render.plan().to_owned(),
                    held.render.checksum().clone(),
                    judge.to_owned(),
                );
                self.memory.push((key.0, key.1, key.2, outcome.clone()));
            }
            self.judged(seq);
        } else {
            self.failures += 1;
            self.retry_at = Some(now + backoff(self.failures));
            let h = self.find_mut(seq).expect("kept");
            h.in_flight = false;
            h.failed = true;
        }
        self.publish(&held, outcome, false, CHECK_TOOK);
        self.step(now);
    }

    fn find(&self, seq: u64) -> Option<&Held> {
        self.newest.iter().chain(&self.superseded).find(|h| h.seq == seq)
    }

    fn find_mut(&mut self, seq: u64) -> Option<&mut Held> {
        self.newest.iter_mut().chain(&mut self.superseded).find(|h| h.seq == seq)
    }

    /// A judgement: the newest is marked, a superseded render forgotten, and
    /// the back-off starts over.
    fn judged(&mut self, seq: u64) {
        if let Some(n) = self.newest.as_mut().filter(|n| n.seq == seq) {
            n.judged = true;
            n.in_flight = false;
        }
        self.superseded.retain(|h| h.seq != seq);
        self.failures = 0;
        self.retry_at = None;
    }

    /// Some pod reports this occurrence: by render id, or by plan alone for
    /// the latest render of that plan.
    fn held_by_a_pod(&self, h: &Held) -> bool {
        let latest_of_plan = || {
            let mut all: Vec<&Held> = self.superseded.iter().collect();
            all.extend(self.newest.iter());
            all.into_iter()
                .rev()
                .find(|o| o.render.plan() == h.render.plan())
                .is_some_and(|o| o.seq == h.seq)
        };
        self.pods.values().any(|p| match &p.render {
            Some(id) => **id == *h.render.id(),
            None => *p.plan == *h.render.plan() && latest_of_plan(),
        })
    }

    fn trim(&mut self) {
        // At most the limit wait besides the check in flight; the oldest no pod holds go first.
        loop {
            let waiting = self.superseded.iter().filter(|h| !h.in_flight).count();
            if waiting <= SUPERSEDED_LIMIT {
                return;
            }
            let Some(at) =
                self.superseded.iter().position(|h| !h.in_flight && !self.held_by_a_pod(h))
            else {
                return;
            };
            self.superseded.remove(at);
        }
    }

    fn step(&mut self, now: Instant) {
        self.timer = None;
        loop {
            self.trim();
            // The newest first, then stragglers some pod holds, newest first.
            let mut candidates: Vec<Held> = self.newest.iter().cloned().collect();
            candidates
                .extend(self.superseded.iter().rev().filter(|h| self.held_by_a_pod(h)).cloned());
            let mut waiting_for_retry = false;
            let mut ready = None;
            for h in candidates {
                if h.judged || h.in_flight || (self.draining && h.failed) {
                    continue;
                }
                if h.failed && self.retry_at.is_some_and(|at| at > now) {
                    waiting_for_retry = true;
                    continue;
                }
                ready = Some(h);
                break;
            }
            let Some(h) = ready else {
                if waiting_for_retry {
                    self.timer = self.retry_at;
                }
                return;
            };
            let remembered = self.memory.iter().position(|(p, c, j, _)| {
                p == h.render.plan() && c == h.render.checksum() && j == self.judge
            });
            if let Some(at) = remembered {
                let entry = self.memory.remove(at);
                let outcome = entry.3.clone();
                self.memory.push(entry);
                self.judged(h.seq);
                self.publish(&h, outcome, true, Duration::ZERO);
                continue;
            }
            if self.in_flight.is_some() {
                return;
            }
            if let Some(free) = self.last_start.map(|t| t + self.interval).filter(|t| *t > now) {
                self.timer = Some(free);
                return;
            }
            self.find_mut(h.seq).expect("kept").in_flight = true;
            self.in_flight = Some(h.seq);
            self.last_start = Some(now);
            self.effects.push(start(&h.render));
        }
    }

    fn publish(&mut self, h: &Held, outcome: CheckOutcome, remembered: bool, duration: Duration) {
        let newest = self.newest.as_ref().is_some_and(|n| {
            n.seq == h.seq
                || (n.render.plan() == h.render.plan()
                    && n.render.checksum() == h.render.checksum())
        });
        let kind = outcome.kind();
        if kind != Outcome::Unavailable {
            let judged = (h.render.checksum().clone(), kind, h.render.plan().to_owned());
            self.judged.insert(h.render.id().to_owned(), judged);
        }
        let mut after = vec![];
        let pinned = if newest {
            let before = self.pessimistic;
            let failed = match kind {
                Outcome::Passed => None,
                Outcome::Refused => Some(Reason::Refused),
                Outcome::Unavailable => Some(Reason::Unavailable),
            };
            // The latch table of docs/behaviour.md.
            self.pinned = match (before, failed) {
                // A held term's first failure is its first.
                (Some(Reason::TermStart), _) => None,
                (Some(Reason::Refused), Some(Reason::Refused)) => Some(Reason::Refused),
                (Some(_), Some(_)) => Some(Reason::Unavailable),
                _ => None,
            };
            self.pessimistic = failed;
            let state =
                |p: Option<Reason>| p.map_or(LatchState::Optimistic, LatchState::Pessimistic);
            if state(before) != state(failed) {
                after.push(Effect::Latch(state(failed)));
            }
            if before.is_some() && failed.is_none() {
                let held = &self.newest.as_ref().expect("newest").render;
                after.push(Effect::Release { plan: held.plan().into(), render: held.id().into() });
            }
            self.pinned
        } else {
            self.pinned
        };
        let plan = h.render.plan().to_owned();
        match kind {
            Outcome::Passed => {
                record_plan(&mut self.passed, &mut self.refused, &plan, self.plan_history)
            }
            Outcome::Refused => {
                record_plan(&mut self.refused, &mut self.passed, &plan, self.plan_history)
            }
            Outcome::Unavailable => {}
        }
        if kind == Outcome::Passed
            && self.passed_renders.get(&plan).is_none_or(|(seq, _, _)| *seq < h.seq)
        {
            let newest = (h.seq, h.render.id().to_owned(), h.render.checksum().clone());
            self.passed_renders.insert(plan.clone(), newest);
        }
        let passed = &self.passed;
        self.passed_renders.retain(|plan, _| passed.contains(plan));
        let trigger = Trigger::Verdict(policy_core::Verdict {
            plan: plan.clone(),
            render: h.render.id().into(),
            outcome: kind,
            newest,
            pinned: pinned.is_some(),
            remembered,
            message: outcome.message().into(),
        });
        self.effects.push(Seen::Other(Effect::Verdict(Verdict {
            plan,
            render: h.render.id().into(),
            checksum: h.render.checksum().clone(),
            correlation: None,
            outcome,
            newest,
            pinned,
            remembered,
            duration,
        })));
        self.effects.extend(after.into_iter().map(Seen::Other));
        self.decide(trigger);
    }

    fn decide(&mut self, trigger: Trigger) {
        let names =
            |v: &[String]| v.iter().map(|p| Name::from(p.as_str())).collect::<Arc<[Name]>>();
        let held = policy_core::Held {
            renders: Arc::new(
                self.pods
                    .values()
                    .filter_map(|r| Some((r.pod.clone(), r.render.clone()?)))
                    .collect(),
            ),
            judged: Arc::new(
                self.judged
                    .iter()
                    .map(|(id, (_, kind, _))| (Name::from(id.as_str()), *kind))
                    .collect(),
            ),
            plans: Arc::new(
                self.judged
                    .iter()
                    .map(|(id, (_, _, plan))| (Name::from(id.as_str()), Name::from(plan.as_str())))
                    .collect(),
            ),
            passed: Some(Arc::new(
                self.passed_renders
                    .iter()
                    .map(|(plan, (_, id, _))| (Name::from(plan.as_str()), Name::from(id.as_str())))
                    .collect(),
            )),
        };
        let fleet = Fleet {
            pods: Arc::new(self.pods.values().map(PodReport::state).collect::<Vec<PodState>>()),
            passed_plans: names(&self.passed),
            refused_plans: names(&self.refused),
            held,
        };
        self.effects.push(Seen::Other(Effect::Decide { trigger, fleet }));
    }
}

/// A plan's latest judgement is the one that counts: in `into` (once, at the
/// end, at most `bound` kept), out of `from`.
fn record_plan(into: &mut Vec<String>, from: &mut Vec<String>, plan: &str, bound: usize) {
    from.retain(|p| p != plan);
    into.retain(|p| p != plan);
    into.push(plan.to_owned());
    while into.len() > bound {
        into.remove(0);
    }
}

fn backoff(failures: u32) -> Duration {
    Duration::from_secs([1, 2, 4, 8, 16, 30][(failures.clamp(1, 6) - 1) as usize])
}

/// An effect as compared: a `StartCheck` by its render (the gate numbers
/// its checks, the model does not), everything else whole.
#[derive(Debug, PartialEq)]
enum Seen {
    Start { render: String, checksum: Checksum },
    Other(Effect),
}

fn start(render: &Render) -> Seen {
    Seen::Start { render: render.id().to_owned(), checksum: render.checksum().clone() }
}

fn seen(effect: Effect) -> Seen {
    match effect {
        Effect::StartCheck(request) => start(&request.render),
        other => Seen::Other(other),
    }
}

fn render_of(plan: u8, id: u8, content: u8) -> Render {
    Render::new(plan_name(plan), id_name(id), config_text(content), vec![])
}

fn run(s: Scenario) -> Result<(), TestCaseError> {
    let config = CoreConfig {
        check_interval: s.interval,
        superseded_limit: SUPERSEDED_LIMIT,
        memory_capacity: s.memory,
        plan_history: s.plan_history,
        start_held: s.start_held,
    };
    let mut gate = Gate::new(config, JUDGES[0]);
    let mut model = Model::new(s.interval, s.memory, s.plan_history, s.start_held);
    // A held gate says so before any input (docs/behaviour.md, "Term start"),
    // as a driver polls it before its first event.
    let initial: Vec<Seen> = std::iter::from_fn(|| gate.poll_effect()).map(seen).collect();
    prop_assert_eq!(initial, std::mem::take(&mut model.effects), "effects at start differ");
    let mut now = Instant::now();
    let mut seq = 0u64;
    let mut sent: Vec<(u8, u8, u8)> = vec![];
    // The gate's checks in flight, by term, for stale results.
    let mut in_flight: Option<(CheckId, u8, u8)> = None;
    let mut earlier_terms: Vec<CheckId> = vec![];
    let answer = |plan: u8, content: u8, unavailable: bool| {
        if unavailable {
            CheckOutcome::Unavailable { reason: "the check timed out".into() }
        } else if s.refuse[(plan * CONTENTS + content) as usize] {
            CheckOutcome::Refused { message: format!("[ALERT] plan-{plan} content {content}") }
        } else {
            CheckOutcome::Passed { message: String::new() }
        }
    };
    let contents = |r: &Render| -> (u8, u8) {
        let plan = r.plan()[5..].parse().unwrap();
        let content = (0..CONTENTS)
            .find(|c| r.config().ends_with(format!("content {c}\n").as_bytes()))
            .unwrap();
        (plan, content)
    };

    let mut step = |i: usize,
                    op: &Op,
                    gate: &mut Gate,
                    model: &mut Model,
                    now: &mut Instant,
                    in_flight: &mut Option<(CheckId, u8, u8)>|
     -> Result<(), TestCaseError> {
        match op {
            Op::Rendered { plan, id, content } => {
                seq += 1;
                sent.push((*plan, *id, *content));
                let render = render_of(*plan, *id, *content);
                model.rendered(seq, Arc::new(render.clone()), *now);
                gate.handle_event(*now, Event::Rendered(render));
            }
            Op::Applied { pod, pick, with_id, running, baseline } => {
                if sent.is_empty() {
                    return Ok(());
                }
                let (plan, id, _) = sent[pick % sent.len()];
                let report = PodReport {
                    pod: pod_name(*pod).into(),
                    render: with_id.then(|| id_name(id).into()),
                    plan: plan_name(plan).into(),
                    running_plan: running.map(|p| plan_name(p).into()),
                    baseline_plan: baseline.map(|p| plan_name(p).into()),
                };
                model.applied(report.clone(), *now);
                gate.handle_event(*now, Event::Applied(report));
            }
            Op::PodTerminated { pod } => {
                let name = pod_name(*pod);
                model.forget_pods(|p| p == name, *now);
                gate.handle_event(*now, Event::PodTerminated { pod: name });
            }
            Op::PodsDiscovered { alive } => {
                let pods: Vec<String> =
                    (0..PODS).filter(|p| alive & (1 << p) != 0).map(pod_name).collect();
                model.forget_pods(|p| !pods.iter().any(|a| a == p), *now);
                gate.handle_event(*now, Event::PodsDiscovered { pods: pods.iter().collect() });
            }
            Op::LostLeadership => {
                earlier_terms.extend(in_flight.take().map(|f| f.0));
                model.lost_leadership(*now);
                gate.handle_event(*now, Event::LostLeadership);
            }
            Op::Finish { unavailable } => {
                if let Some((id, plan, content)) = in_flight.take() {
                    *now += CHECK_TOOK;
                    let outcome = answer(plan, content, *unavailable);
                    model.finished(outcome.clone(), model.judge, *now);
                    let judge = gate.judge().to_owned();
                    gate.handle_check_result(*now, id, outcome, &judge, CHECK_TOOK);
                }
            }
            Op::StaleResult { pick } => {
                if !earlier_terms.is_empty() {
                    let id = earlier_terms[pick % earlier_terms.len()];
                    let judge = gate.judge().to_owned();
                    gate.handle_check_result(*now, id, answer(0, 0, false), &judge, CHECK_TOOK);
                }
            }
            Op::SwitchJudge => {
                let next = if model.judge == JUDGES[0] { JUDGES[1] } else { JUDGES[0] };
                model.judge = next;
                gate.set_judge(next);
            }
            Op::Advance { ms } => {
                *now += Duration::from_millis(*ms);
                model.step(*now);
                gate.handle_timeout(*now);
            }
            Op::ToTimer => {
                if let Some(at) = gate.poll_timeout() {
                    *now = (*now).max(at);
                    model.step(*now);
                    gate.handle_timeout(*now);
                }
            }
        }
        let mut got = vec![];
        while let Some(effect) = gate.poll_effect() {
            if let Effect::StartCheck(request) = &effect {
                let (plan, content) = contents(&request.render);
                prop_assert!(in_flight.is_none(), "op {i}: a second check while one is in flight");
                *in_flight = Some((request.id, plan, content));
            }
            got.push(seen(effect));
        }
        let want = std::mem::take(&mut model.effects);
        prop_assert_eq!(got, want, "op {} ({:?}): effects differ", i, op);
        prop_assert_eq!(gate.poll_timeout(), model.timer, "op {} ({:?}): timers differ", i, op);
        prop_assert_eq!(
            gate.latch().state(),
            model.pessimistic.map_or(LatchState::Optimistic, LatchState::Pessimistic)
        );
        Ok(())
    };

    for (i, op) in s.ops.iter().enumerate() {
        step(i, op, &mut gate, &mut model, &mut now, &mut in_flight)?;
    }
    if let Some(answers) = &s.drain {
        model.draining = true;
        model.step(now);
        gate.drain(now);
        let mut answers = answers.iter();
        for i in 0..40 {
            let op = match (in_flight.is_some(), gate.poll_timeout().is_some()) {
                (true, _) => Op::Finish { unavailable: *answers.next().unwrap_or(&false) },
                (false, true) => Op::ToTimer,
                // what draining itself settled (from memory) is compared
                // first: a step that moves no clock polls it
                (false, false) if !gate.is_drained() => Op::ToTimer,
                (false, false) => break,
            };
            step(s.ops.len() + i, &op, &mut gate, &mut model, &mut now, &mut in_flight)?;
        }
        prop_assert!(gate.is_drained(), "draining ends: nothing in flight, no timer");
        let unjudged_newest = model.newest.as_ref().is_some_and(|n| !n.judged && !n.failed);
        prop_assert!(!unjudged_newest, "draining judged the newest render, or it could not run");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]
    #[test]
    fn the_core_behaves_as_the_model(s in scenario()) {
        run(s)?;
    }
}
