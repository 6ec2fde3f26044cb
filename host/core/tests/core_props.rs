//! Property test of the sans-IO gate core, `rendergate_core::Gate`.
//!
//! Random sequences of inputs — renders (plans, render ids and contents drawn
//! from small pools, so re-sent ids, repeated contents and memory hits are
//! common), pod reports (with and without a render id), pod departures, pod
//! discoveries, leadership losses, results for the check in flight, late
//! results for checks of an earlier term, and clock moves (by fixed amounts and
//! to exactly `poll_timeout()`) — are fed to a `Gate` through its public API.
//! HAProxy is played by a fixed table: the answer for one (plan, content) is
//! the same every time it is asked; only "could not run" is random.
//!
//! A small reference model runs alongside (latch, pinned, the newest render,
//! the verdict memory as an LRU *with its order*, the pods, the render ids
//! handed to the checker this term, the check in flight). After every input
//! every effect is checked against it, proving:
//!
//! 1. only verdicts that count as newest (same plan + content as the newest
//!    render; a re-sent render id with other content is not the same render)
//!    move the latch; `newest` is exactly that; the latch a `Latch` effect
//!    announces is the model's; the gate's latch ends every step equal to the
//!    model's;
//! 2. `pinned` is set iff the latch was pessimistic before a newest non-pass
//!    verdict, and says `Refused` only for two refusals in a row; a newest pass
//!    is never pinned; a stale verdict carries the current `pinned`;
//! 3. every `Release` directly follows (after its `Latch`) a newest pass that
//!    found the latch pessimistic, and names the newest render; such a pass
//!    always releases;
//! 4. the checker is never asked for content (plan + checksum) that the memory
//!    still holds. The model tracks the LRU order exactly (it does not restrict
//!    the pool: 3 plans x 6 contents = 18 distinct contents, and the memory
//!    capacity is drawn from {16, 3}, so evictions and refreshes happen);
//!    remembered verdicts come only from memory and carry HAProxy's answer;
//! 5. retained renders stay bounded: `renders().len() <= 1 + 4 + pods + 1`
//!    (a pod that names only a plan holds the latest render of that plan);
//!    and at most 4 superseded renders are neither held by a pod nor in flight;
//! 6. at most one check is in flight: no `StartCheck` while one is, starts are
//!    spaced by the check interval, and a result for a check started before a
//!    `LostLeadership` publishes nothing;
//! 7. every verdict is either `remembered` or answers a `StartCheck` of that
//!    render id in this term (and a fresh verdict answers exactly the check
//!    just reported, first in its batch, with the outcome reported).
//!
//! Also: effects come in protocol order (verdict, latch, release, decide);
//! `poll_timeout()` is always in the future; the gate never stalls (no check in
//! flight and no timer means the newest render has been judged).

mod common;

use common::{Mix, Op, Pools, config_text, id_name, plan_name, pod_name};
use policy_core::Trigger;
use proptest::prelude::*;
use rendergate_core::render::{Checksum, Render};
use rendergate_core::{
    CheckId, CheckOutcome, CoreConfig, Effect, Event, Gate, LatchState, PodReport, Reason, Verdict,
};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

const PLANS: u8 = 3;
const IDS: u8 = 10;
const CONTENTS: u8 = 6;
const PODS: u8 = 4;
const CHECK_TOOK: Duration = Duration::from_millis(80);
/// The one judge of these runs: every answer is stored and looked up under it.
const JUDGE: &str = "haproxy sha256:props";
const POOLS: Pools = Pools { plans: PLANS, ids: IDS, contents: CONTENTS, pods: PODS };
/// One judge; clock moves at the check interval's edges and past the back-off's cap.
const MIX: Mix = Mix {
    applied: 4,
    finish: 5,
    unavailable: 0.25,
    switch_judge: 0,
    advance_ms: [1, 499, 500, 1000, 2000, 30_000],
};

/// Content as HAProxy sees it: the plan and the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Content {
    plan: u8,
    content: u8,
}

/// The whole scenario: the gate's tunables, HAProxy's answers, the inputs.
#[derive(Clone, Debug)]
struct Scenario {
    interval_ms: u64,
    memory: usize,
    /// `refuse[plan * CONTENTS + content]`: HAProxy refuses that content.
    refuse: Vec<bool>,
    ops: Vec<Op>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop_oneof![Just(0u64), Just(1000)],
        prop_oneof![Just(16usize), Just(3)],
        prop::collection::vec(prop::bool::weighted(0.4), (PLANS * CONTENTS) as usize),
        prop::collection::vec(common::op(POOLS, MIX), 1..200),
    )
        .prop_map(|(interval_ms, memory, refuse, ops)| Scenario {
            interval_ms,
            memory,
            refuse,
            ops,
        })
}

/// The reference model.
struct Model {
    refuse: Vec<bool>,
    checksums: Vec<Checksum>,
    latch: LatchState,
    pinned: Option<Reason>,
    /// The newest render of this term: its id and content.
    newest: Option<(String, Content)>,
    /// A judgement (pass or refusal) was published for the newest render.
    newest_judged: bool,
    /// Verdict memory, least recently used first.
    memory: VecDeque<Content>,
    memory_capacity: usize,
    pods: BTreeMap<policy_core::Name, PodReport>,
    /// Render ids handed to the checker in this term.
    started: HashSet<String>,
    /// The check in flight: its id, render id and content.
    in_flight: Option<(CheckId, String, Content)>,
    /// Every render id handed to the checker, in order (all terms).
    checked: Vec<String>,
    /// Every verdict published (all terms), and each release's render id.
    published: Vec<Verdict>,
    released: Vec<String>,
    /// Checks started in earlier terms.
    stale: Vec<CheckId>,
    last_start: Option<Instant>,
    /// Every (render id, plan) sent, for pod reports to pick from.
    rendered: Vec<(u8, u8)>,
}

impl Model {
    fn answer(&self, c: Content) -> CheckOutcome {
        if self.refuse[(c.plan * CONTENTS + c.content) as usize] {
            CheckOutcome::Refused {
                message: format!("[ALERT] plan-{} content {} is bad", c.plan, c.content),
            }
        } else {
            CheckOutcome::Passed { message: String::new() }
        }
    }

    fn content_of(&self, plan: &str, checksum: &Checksum) -> Content {
        let plan = (0..PLANS)
            .find(|p| plan_name(*p) == plan)
            .unwrap_or_else(|| panic!("unknown plan {plan}"));
        let content =
            self.checksums.iter().position(|c| c == checksum).expect("a checksum of the pool")
                as u8;
        Content { plan, content }
    }

    fn remembers(&self, c: Content) -> bool {
        self.memory.contains(&c)
    }

    /// `VerdictMemory::insert` as docs/behaviour.md states it: LRU, a judgement only.
    fn remember(&mut self, c: Content) {
        if self.memory_capacity == 0 {
            return;
        }
        self.memory.retain(|m| *m != c);
        if self.memory.len() == self.memory_capacity {
            self.memory.pop_front();
        }
        self.memory.push_back(c);
    }

    /// A hit refreshes.
    fn refresh(&mut self, c: Content) {
        let at = self.memory.iter().position(|m| *m == c);
        let at = at.unwrap_or_else(|| {
            panic!("remembered verdict for {c:?}, which memory does not hold: {:?}", self.memory)
        });
        self.memory.remove(at);
        self.memory.push_back(c);
    }

    fn holds(&self, id: &str, plan: &str) -> bool {
        self.pods.values().any(|p| match &p.render {
            Some(r) => **r == *id,
            None => *p.plan == *plan,
        })
    }

    /// docs/behaviour.md's latch table, with the "pinned says why" fix. Returns
    /// (pinned on the verdict, the new state if it changed, release).
    fn apply_to_latch(
        &mut self,
        outcome: &CheckOutcome,
    ) -> (Option<Reason>, Option<LatchState>, bool) {
        let before = self.latch;
        let fail = match outcome {
            CheckOutcome::Passed { .. } => None,
            CheckOutcome::Refused { .. } => Some(Reason::Refused),
            CheckOutcome::Unavailable { .. } => Some(Reason::Unavailable),
        };
        let (after, pinned) = match (before, fail) {
            (_, None) => (LatchState::Optimistic, None),
            (LatchState::Optimistic, Some(r)) => (LatchState::Pessimistic(r), None),
            (LatchState::Pessimistic(prev), Some(r)) => {
                let why = if prev == Reason::Refused && r == Reason::Refused {
                    Reason::Refused
                } else {
                    Reason::Unavailable
                };
                (LatchState::Pessimistic(r), Some(why))
            }
        };
        self.latch = after;
        self.pinned = pinned;
        let release = fail.is_none() && before != LatchState::Optimistic;
        (pinned, (after != before).then_some(after), release)
    }
}

/// What the input just given lets the batch contain.
#[derive(Default)]
struct Expect {
    /// The check result just reported: its verdict opens the batch.
    fresh: Option<(String, Content, CheckOutcome)>,
    /// A pod report: the policy is asked about it first.
    applied: Option<String>,
}

struct Run {
    gate: Gate,
    model: Model,
    now: Instant,
    interval: Duration,
    limit: usize,
}

impl Run {
    fn new(s: &Scenario) -> Self {
        let config = CoreConfig {
            check_interval: Duration::from_millis(s.interval_ms),
            memory_capacity: s.memory,
            ..CoreConfig::default()
        };
        assert_eq!(config.superseded_limit, 4, "docs/behaviour.md keeps 4 superseded renders");
        let limit = config.superseded_limit;
        let checksums = (0..CONTENTS)
            .map(|c| Render::new("any", "any", config_text(c), vec![]).checksum().clone())
            .collect();
        Run {
            gate: Gate::new(config, JUDGE),
            model: Model {
                refuse: s.refuse.clone(),
                checksums,
                latch: LatchState::Optimistic,
                pinned: None,
                newest: None,
                newest_judged: false,
                memory: VecDeque::new(),
                memory_capacity: s.memory,
                pods: BTreeMap::new(),
                started: HashSet::new(),
                in_flight: None,
                checked: vec![],
                published: vec![],
                released: vec![],
                stale: vec![],
                last_start: None,
                rendered: vec![],
            },
            now: Instant::now(),
            interval: Duration::from_millis(s.interval_ms),
            limit,
        }
    }

    fn through(s: &Scenario) -> Run {
        let mut run = Run::new(s);
        for op in &s.ops {
            run.apply(op);
        }
        run
    }

    fn effects(&mut self) -> Vec<Effect> {
        std::iter::from_fn(|| self.gate.poll_effect()).collect()
    }

    fn apply(&mut self, op: &Op) {
        let now = self.now;
        match *op {
            Op::Rendered { plan, id, content } => {
                let render =
                    Render::new(plan_name(plan), id_name(id), config_text(content), vec![]);
                self.model.newest = Some((id_name(id), Content { plan, content }));
                self.model.newest_judged = false;
                self.model.rendered.push((id, plan));
                self.gate.handle_event(now, Event::Rendered(render));
                self.absorb(Expect::default());
            }
            Op::Applied { pod, pick, with_id, running, baseline } => {
                let (id, plan) = match self.model.rendered.len() {
                    0 => (0, 0),
                    n => self.model.rendered[pick % n],
                };
                let report = PodReport {
                    pod: pod_name(pod).into(),
                    render: with_id.then(|| id_name(id).into()),
                    plan: plan_name(plan).into(),
                    running_plan: running.map(|p| plan_name(p).into()),
                    baseline_plan: baseline.map(|p| plan_name(p).into()),
                };
                // A pod repeating its last report changes nothing and asks no policy.
                let repeated = self.model.pods.get(&report.pod) == Some(&report);
                self.model.pods.insert(report.pod.clone(), report.clone());
                self.gate.handle_event(now, Event::Applied(report));
                let applied = (!repeated).then(|| pod_name(pod));
                self.absorb(Expect { applied, ..Expect::default() });
            }
            Op::PodTerminated { pod } => {
                self.model.pods.remove(pod_name(pod).as_str());
                self.gate.handle_event(now, Event::PodTerminated { pod: pod_name(pod) });
                self.absorb(Expect::default());
            }
            Op::PodsDiscovered { alive } => {
                let alive: Vec<String> =
                    (0..PODS).filter(|p| alive & (1 << p) != 0).map(pod_name).collect();
                self.model.pods.retain(|name, _| alive.iter().any(|a| **a == **name));
                self.gate.handle_event(now, Event::PodsDiscovered { pods: alive.iter().collect() });
                self.absorb(Expect::default());
            }
            Op::LostLeadership => {
                let was_pessimistic = self.model.latch != LatchState::Optimistic;
                let m = &mut self.model;
                m.latch = LatchState::Optimistic;
                m.pinned = None;
                m.newest = None;
                m.newest_judged = false;
                m.memory.clear();
                m.pods.clear();
                m.started.clear();
                if let Some((id, ..)) = m.in_flight.take() {
                    m.stale.push(id);
                }
                self.gate.handle_event(now, Event::LostLeadership);
                let effects = self.effects();
                let expected = if was_pessimistic {
                    vec![Effect::Latch(LatchState::Optimistic)]
                } else {
                    vec![]
                };
                assert_eq!(effects, expected, "a lost leadership only drops the latch");
                assert!(
                    self.gate.renders().is_empty()
                        && self.gate.memory().is_empty()
                        && self.gate.pods().is_empty()
                );
            }
            Op::Finish { unavailable } => {
                let Some(request) = self.gate.in_flight().cloned() else {
                    assert!(self.model.in_flight.is_none(), "the gate forgot its check in flight");
                    return self.check_state();
                };
                let (id, render, content) =
                    self.model.in_flight.take().expect("the model knows the check in flight");
                assert_eq!(request.id, id);
                assert_eq!(request.render.id(), render);
                let outcome = if unavailable {
                    CheckOutcome::Unavailable { reason: "haproxy binary not found".into() }
                } else {
                    self.model.answer(content)
                };
                if outcome.is_judgement() {
                    self.model.remember(content);
                }
                self.gate.handle_check_result(now, id, outcome.clone(), JUDGE, CHECK_TOOK);
                self.absorb(Expect {
                    fresh: Some((render, content, outcome)),
                    ..Expect::default()
                });
            }
            Op::StaleResult { pick } => {
                if !self.model.stale.is_empty() {
                    let id = self.model.stale[pick % self.model.stale.len()];
                    let in_flight = self.gate.in_flight().map(|r| r.id);
                    self.gate.handle_check_result(
                        now,
                        id,
                        CheckOutcome::Passed { message: String::new() },
                        JUDGE,
                        CHECK_TOOK,
                    );
                    let effects = self.effects();
                    assert!(effects.is_empty(), "a check of an earlier term published {effects:?}");
                    assert_eq!(
                        self.gate.in_flight().map(|r| r.id),
                        in_flight,
                        "a stale result touched the check in flight"
                    );
                }
            }
            Op::Advance { ms } => {
                self.now += Duration::from_millis(ms);
                self.gate.handle_timeout(self.now);
                self.absorb(Expect::default());
            }
            Op::ToTimer => {
                if let Some(at) = self.gate.poll_timeout() {
                    self.now = self.now.max(at);
                    self.gate.handle_timeout(self.now);
                    self.absorb(Expect::default());
                }
            }
            // One judge throughout: `MIX` never draws a switch (core_model.rs covers them).
            Op::SwitchJudge => unreachable!("not drawn here"),
        }
        self.check_state();
    }

    /// Checks one batch of effects against the model, updating it.
    fn absorb(&mut self, expect: Expect) {
        let effects = self.effects();
        let mut it = effects.into_iter().peekable();
        if let Some(pod) = expect.applied {
            match it.next() {
                Some(Effect::Decide { trigger: Trigger::Applied(state), fleet }) => {
                    assert_eq!(*state.pod, *pod);
                    assert_eq!(fleet.pods.len(), self.model.pods.len());
                }
                other => panic!("a pod report must first ask the policy, got {other:?}"),
            }
        }
        let mut fresh = expect.fresh;
        let mut first = true;
        while let Some(effect) = it.next() {
            match effect {
                Effect::StartCheck(request) => {
                    // 6: one check at a time, spaced.
                    assert!(
                        self.model.in_flight.is_none(),
                        "StartCheck while {:?} is in flight",
                        self.model.in_flight
                    );
                    if let Some(last) = self.model.last_start {
                        assert!(
                            self.now - last >= self.interval,
                            "checks started {:?} apart",
                            self.now - last
                        );
                    }
                    let render = &request.render;
                    let content = self.model.content_of(render.plan(), render.checksum());
                    // 4: never ask for what memory knows.
                    assert!(
                        !self.model.remembers(content),
                        "checker asked for {content:?}, which memory holds"
                    );
                    // Only the newest, or a superseded render some pod holds.
                    let newest =
                        self.model.newest.as_ref().is_some_and(|(id, _)| id == render.id());
                    assert!(
                        newest || self.model.holds(render.id(), render.plan()),
                        "checking {} {}: neither newest nor held by a pod",
                        render.plan(),
                        render.id()
                    );
                    self.model.last_start = Some(self.now);
                    self.model.started.insert(render.id().to_owned());
                    self.model.checked.push(render.id().to_owned());
                    self.model.in_flight = Some((request.id, render.id().to_owned(), content));
                }
                Effect::Verdict(v) => {
                    let content = self.model.content_of(&v.plan, &v.checksum);
                    if v.remembered {
                        self.model.refresh(content);
                        assert_eq!(
                            v.outcome,
                            self.model.answer(content),
                            "memory changed HAProxy's answer"
                        );
                        assert_eq!(v.duration, Duration::ZERO);
                    } else {
                        // 7: a fresh verdict answers the check just reported.
                        let (render, c, outcome) = fresh.take().unwrap_or_else(|| {
                            panic!("fresh verdict {v:?} that no reported check explains")
                        });
                        assert!(first, "the reported check's verdict opens the batch");
                        assert_eq!(
                            (v.render.as_str(), content, &v.outcome),
                            (render.as_str(), c, &outcome)
                        );
                        assert_eq!(v.duration, CHECK_TOOK);
                        assert!(
                            self.model.started.contains(&v.render),
                            "verdict for {} never started this term",
                            v.render
                        );
                    }
                    self.verdict(&v, &mut it);
                }
                Effect::Latch(state) => panic!("latch moved to {state:?} without a newest verdict"),
                Effect::Release { plan, render } => {
                    panic!("release of {plan} {render} without a newest pass while pessimistic")
                }
                Effect::Decide { trigger, .. } => {
                    panic!("policy asked about {trigger:?} without a cause")
                }
            }
            first = false;
        }
        assert!(fresh.is_none(), "the reported check published no verdict");
    }

    /// A verdict and the effects that follow it: latch, release, decide.
    fn verdict(&mut self, v: &Verdict, it: &mut std::iter::Peekable<std::vec::IntoIter<Effect>>) {
        let content = self.model.content_of(&v.plan, &v.checksum);
        let newest = self.model.newest.clone();
        // 1: newest means the newest render's content (or, tolerated, its id).
        let is_newest = newest.as_ref().is_some_and(|(_, c)| *c == content);
        assert_eq!(v.newest, is_newest, "newest flag of {v:?}; newest render is {newest:?}");
        let latch_before = self.model.latch;
        let (pinned, changed, release) = if v.newest {
            if v.outcome.is_judgement() && newest.as_ref().is_some_and(|(id, _)| *id == v.render) {
                self.model.newest_judged = true;
            }
            self.model.apply_to_latch(&v.outcome)
        } else {
            (self.model.pinned, None, false)
        };
        // 2
        assert_eq!(v.pinned, pinned, "pinned of {v:?}, latch before {latch_before:?}");
        if v.newest && matches!(v.outcome, CheckOutcome::Passed { .. }) {
            assert_eq!(v.pinned, None, "a newest pass is never pinned");
        }
        // 1: the latch moves only here, and announces it.
        match changed {
            Some(state) => assert_eq!(it.next(), Some(Effect::Latch(state)), "after {v:?}"),
            None => assert!(
                !matches!(it.peek(), Some(Effect::Latch(_))),
                "latch moved by {v:?} ({latch_before:?})"
            ),
        }
        // 3: a release follows a newest pass while pessimistic, names the newest.
        if release {
            let (id, c) = newest.expect("a newest verdict has a newest render");
            self.model.released.push(id.clone());
            assert_eq!(
                it.next(),
                Some(Effect::Release { plan: plan_name(c.plan), render: id }),
                "after {v:?}"
            );
        } else {
            assert!(
                !matches!(it.peek(), Some(Effect::Release { .. })),
                "release after {v:?} ({latch_before:?})"
            );
        }
        match it.next() {
            Some(Effect::Decide { trigger: Trigger::Verdict(pv), fleet }) => {
                assert_eq!(
                    (pv.render.as_str(), pv.newest, pv.remembered),
                    (v.render.as_str(), v.newest, v.remembered)
                );
                assert_eq!(pv.pinned, v.pinned.is_some());
                assert_eq!(fleet.pods.len(), self.model.pods.len());
            }
            other => panic!("verdict {v:?} must be followed by its Decide, got {other:?}"),
        }
        self.model.published.push(v.clone());
    }

    /// State checks after every input.
    fn check_state(&self) {
        let g = &self.gate;
        let m = &self.model;
        assert_eq!(g.latch().state(), m.latch, "latch");
        assert_eq!(g.latch().pinned(), m.pinned, "pinned");
        assert_eq!(
            g.in_flight().map(|r| r.id),
            m.in_flight.as_ref().map(|f| f.0),
            "check in flight"
        );
        assert_eq!(g.memory().len(), m.memory.len(), "memory size");
        assert_eq!(g.pods().len(), m.pods.len(), "pods");
        let newest = g.renders().newest().map(|e| {
            (e.render.id().to_owned(), m.content_of(e.render.plan(), e.render.checksum()))
        });
        assert_eq!(newest, m.newest, "newest render");
        // 5
        let renders = g.renders();
        assert!(
            renders.len() <= 1 + self.limit + g.pods().len() + 1,
            "{} renders retained with {} pods: {:?}",
            renders.len(),
            g.pods().len(),
            renders.superseded().map(|e| e.render.id()).collect::<Vec<_>>()
        );
        let loose = renders
            .superseded()
            .filter(|e| !e.in_flight && !m.holds(e.render.id(), e.render.plan()))
            .count();
        assert!(loose <= self.limit, "{loose} superseded renders neither held nor in flight");
        assert!(
            renders.superseded().filter(|e| e.in_flight).count()
                + usize::from(renders.newest().is_some_and(|e| e.in_flight))
                <= 1
        );
        // Timers are in the future; no stall.
        if let Some(at) = g.poll_timeout() {
            assert!(at > self.now, "timer {:?} not in the future", at - self.now);
        } else if g.in_flight().is_none() {
            assert!(
                m.newest.is_none() || m.newest_judged,
                "stalled: newest {:?} unjudged, nothing in flight, no timer",
                m.newest
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn gate_keeps_its_invariants(s in scenario()) {
        Run::through(&s);
    }
}

// Deterministic seeds: sequences worth keeping whatever the random search does.
// Each runs through the same model and invariants, then checks its point.

fn seed(interval_ms: u64, memory: usize, refuse: &[(u8, u8)], ops: Vec<Op>) -> Scenario {
    let mut table = vec![false; (PLANS * CONTENTS) as usize];
    for (plan, content) in refuse {
        table[(plan * CONTENTS + content) as usize] = true;
    }
    Scenario { interval_ms, memory, refuse: table, ops }
}

fn rendered(plan: u8, id: u8, content: u8) -> Op {
    Op::Rendered { plan, id, content }
}
/// HAProxy's fixed answer for the check in flight.
const ANSWER: Op = Op::Finish { unavailable: false };
const UNAVAILABLE: Op = Op::Finish { unavailable: true };

/// A check in flight when the term ends: its late result publishes nothing,
/// and the new term checks the same content afresh (memory was dropped), still
/// spaced from the start of the cancelled check.
#[test]
fn seed_cancelled_check_then_same_content_in_the_next_term() {
    let s = seed(
        1000,
        16,
        &[(0, 0)],
        vec![
            rendered(0, 0, 1),
            ANSWER, // passes: remembered
            Op::Advance { ms: 1000 },
            rendered(0, 1, 0), // checked now
            Op::Applied { pod: 0, pick: 1, with_id: true, running: None, baseline: None },
            Op::LostLeadership,
            Op::StaleResult { pick: 0 },
            rendered(0, 2, 1), // remembered in the old term only
            Op::ToTimer,       // spacing from the cancelled start
            Op::StaleResult { pick: 0 },
            ANSWER,
        ],
    );
    let run = Run::through(&s);
    assert_eq!(run.model.checked, ["r-0", "r-1", "r-2"]);
    assert_eq!(run.model.stale.len(), 1);
    assert!(run.gate.pods().is_empty());
}

/// LRU order matters: with 3 entries, a hit refreshes c0, so the next insert
/// evicts c1, not c0.
#[test]
fn seed_memory_hit_refreshes_and_eviction_takes_the_least_recent() {
    let s = seed(
        0,
        3,
        &[(0, 1)],
        vec![
            rendered(0, 0, 0),
            ANSWER,
            rendered(0, 1, 1),
            ANSWER, // refused: pessimistic
            rendered(0, 2, 2),
            ANSWER,            // pass: release r-2
            rendered(0, 3, 0), // hit: c0 refreshed
            rendered(0, 4, 3),
            ANSWER,            // evicts c1
            rendered(0, 5, 0), // still remembered
            rendered(0, 6, 1), // forgotten: checked again
            ANSWER,            // refused again, from HAProxy
        ],
    );
    let run = Run::through(&s);
    assert_eq!(run.model.checked, ["r-0", "r-1", "r-2", "r-4", "r-6"]);
    assert_eq!(run.model.memory.iter().map(|c| c.content).collect::<Vec<_>>(), [3, 0, 1]);
    assert_eq!(run.gate.latch().state(), LatchState::Pessimistic(Reason::Refused));
}

/// Pinned says why; a retry lands exactly on `poll_timeout()`; a pass on a
/// superseded render while pessimistic releases nothing and keeps `pinned`; a
/// pass on the newest releases it.
#[test]
fn seed_pinned_reasons_retry_and_release() {
    let s = seed(
        0,
        16,
        &[(1, 1), (1, 2)],
        vec![
            rendered(1, 0, 0),
            UNAVAILABLE,       // r-0: pessimistic (unavailable)
            Op::ToTimer,       // 1 s back-off: r-0 retried
            rendered(1, 1, 1), // r-0 superseded while in flight
            ANSWER,            // r-0 passes, stale: no release; r-1 starts
            Op::ToTimer,       // no timer: nothing happens
            ANSWER,            // r-1 refused: pinned, but not "refused twice"
            rendered(1, 2, 2),
            ANSWER, // r-2 refused after a refusal: pinned refused
            rendered(2, 3, 0),
            rendered(2, 4, 1),
            ANSWER, // r-3 passes, stale: pinned stays
            ANSWER, // r-4 passes: newest, releases r-4
        ],
    );
    let run = Run::through(&s);
    let seen: Vec<_> = run
        .model
        .published
        .iter()
        .map(|v| (v.render.as_str(), v.outcome.label(), v.newest, v.pinned))
        .collect();
    use Reason::*;
    assert_eq!(
        seen,
        [
            ("r-0", "unavailable", true, None),
            ("r-0", "pass", false, None),
            ("r-1", "refused", true, Some(Unavailable)),
            ("r-2", "refused", true, Some(Refused)),
            ("r-3", "pass", false, Some(Refused)),
            ("r-4", "pass", true, None),
        ]
    );
    assert_eq!(run.model.checked, ["r-0", "r-0", "r-1", "r-2", "r-3", "r-4"]);
    assert_eq!(run.model.released, ["r-4"]);
    assert_eq!(run.gate.latch().state(), LatchState::Optimistic);
}

/// A pod that reports only a plan holds the latest render of that plan, not
/// every render of it: retention stays bounded by `1 + 4 + pods + 1`.
#[test]
fn seed_plan_only_report_holds_the_latest_render_of_its_plan() {
    let mut ops = vec![
        rendered(0, 0, 0),
        Op::Applied { pod: 0, pick: 0, with_id: false, running: None, baseline: None },
    ];
    ops.extend((1..IDS).map(|id| rendered(0, id, id % CONTENTS)));
    let run = Run::through(&seed(0, 16, &[], ops));
    let renders = run.gate.renders();
    let ids: Vec<_> = renders.superseded().map(|e| e.render.id().to_owned()).collect();
    assert_eq!(
        ids,
        [id_name(0), id_name(5), id_name(6), id_name(7), id_name(8)],
        "r-0 in flight, then the 4 latest unheld (the check in flight is not one of the 4)"
    );
    assert!(renders.len() <= 1 + 4 + run.gate.pods().len() + 1);
}

/// A regression: a pass for an earlier occurrence of the newest render id,
/// with other content, once counted as newest and released the newest render,
/// whose content HAProxy never passed (here it refuses it).
#[test]
fn resent_id_with_other_content_is_not_released_unchecked() {
    let mut gate = Gate::new(
        CoreConfig { check_interval: Duration::ZERO, ..CoreConfig::default() },
        "haproxy",
    );
    let now = Instant::now();
    let effects = |gate: &mut Gate| std::iter::from_fn(|| gate.poll_effect()).collect::<Vec<_>>();
    let start = |gate: &mut Gate| gate.in_flight().expect("a check in flight").id;

    gate.handle_event(now, Event::Rendered(Render::new("plan-1", "r-1", "bad", vec![])));
    let id = start(&mut gate);
    gate.handle_check_result(
        now,
        id,
        CheckOutcome::Refused { message: "[ALERT] bad".into() },
        "haproxy",
        CHECK_TOOK,
    );
    assert!(gate.latch().is_pessimistic());

    gate.handle_event(now, Event::Rendered(Render::new("plan-2", "r-2", "good", vec![])));
    let id = start(&mut gate); // r-2 "good" in flight
    gate.handle_event(now, Event::Rendered(Render::new("plan-2", "r-2", "also bad", vec![])));
    effects(&mut gate);
    gate.handle_check_result(
        now,
        id,
        CheckOutcome::Passed { message: String::new() },
        "haproxy",
        CHECK_TOOK,
    );
    let out = effects(&mut gate);
    let Some(Effect::Verdict(v)) = out.first() else { panic!("{out:?}") };
    assert!(
        !v.newest,
        "a pass on content \"good\" is not a pass on the newest render (content \"also bad\")"
    );
    assert!(
        !out.iter().any(|e| matches!(e, Effect::Release { .. })),
        "released r-2 (\"also bad\") on a pass for other content: {out:?}"
    );
    assert!(gate.latch().is_pessimistic());
}
