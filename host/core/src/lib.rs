//! rendergate-core: the render gate as a sans-IO state machine. Events and
//! time go in, effects come out. No tokio, no processes, no clocks, no
//! WebAssembly: the caller passes `now` with every input, runs the checks the
//! gate asks for, and reports their outcomes. Every rule of docs/behaviour.md
//! about the latch, which renders are checked, verdict memory, the back-off,
//! pods and leadership lives here and is a plain unit test.
//!
//! ```text
//! set_judge                                           (who judges now)
//! handle_event / handle_check_result / handle_timeout   (inputs, with now)
//! poll_effect  -> StartCheck | Verdict | Latch | Release | Decide
//! poll_timeout -> when to call handle_timeout next
//! ```
//!
//! It owns [`render`] identity too (a render and the checksum the gate
//! computes over it), since verdicts are kept per content. It must never
//! depend on tokio, wasmtime, cap-std, libc or any sandboxing crate: the
//! `rendergate` crate drives it (its `runtime` module), and the checker and
//! the policy host sit beside it there. Start reading at [`Gate`], then
//! `renders.rs` (which render is checked next) and `latch.rs` (the table).

pub mod hex;
pub mod render;

mod latch;
mod memory;
mod outcome;
mod pods;
mod renders;

pub use latch::{Latch, LatchState, NewestVerdict, Reason, Transition};
pub use memory::{MemoryKey, VerdictMemory};
pub use outcome::CheckOutcome;
pub use pods::{PodList, PodReport, Pods};
pub use renders::{Entry, Next, Renders, backoff};

use crate::render::{Checksum, Render};
use policy_core::{Fleet, Name, Outcome, Trigger};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many render ids' judgements the gate keeps before it forgets those no
/// pod reports (a pod's report names one render; renders come and go).
pub const JUDGED_LIMIT: usize = 1024;

/// The gate's tunables. Defaults are docs/behaviour.md's.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// Least time between the starts of two checks.
    pub check_interval: Duration,
    /// Superseded renders kept when no pod holds them.
    pub superseded_limit: usize,
    /// Answers remembered per content.
    pub memory_capacity: usize,
    /// Plans kept in the passed and refused lists handed to policies.
    pub plan_history: usize,
    /// Every leadership term starts PESSIMISTIC (`term-start`) instead of
    /// OPTIMISTIC: its first render waits for a pass (`--start-held`).
    pub start_held: bool,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            check_interval: Duration::from_secs(1),
            superseded_limit: 4,
            memory_capacity: 16,
            plan_history: 32,
            start_held: false,
        }
    }
}

/// The inputs a controller reports.
#[derive(Clone, Debug)]
pub enum Event {
    /// A new render was dispatched.
    Rendered(Render),
    /// A pod reports what it holds.
    Applied(PodReport),
    PodTerminated {
        pod: String,
    },
    /// The complete list of live pods.
    PodsDiscovered {
        pods: PodList,
    },
    /// The controller stopped leading: a new term starts from nothing.
    LostLeadership,
}

/// Names one check the gate asked for; results for stale ids are ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CheckId(u64);

/// "Judge this render now."
#[derive(Clone, Debug, PartialEq)]
pub struct CheckRequest {
    pub id: CheckId,
    pub render: Arc<Render>,
}

/// One published verdict: HAProxy's judgement, or why there was none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub plan: String,
    pub render: String,
    pub checksum: Checksum,
    pub correlation: Option<String>,
    pub outcome: CheckOutcome,
    /// For the newest render, or the same content: it moved the latch.
    pub newest: bool,
    /// The latch is pinned (two newest failures in a row), and why.
    pub pinned: Option<Reason>,
    /// Settled from verdict memory: no `haproxy -c` ran.
    pub remembered: bool,
    /// How long the check took (zero when remembered).
    pub duration: Duration,
}

/// What the gate asks its driver to do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Run the checker over this render; report with `handle_check_result`.
    StartCheck(CheckRequest),
    Verdict(Verdict),
    /// The latch changed.
    Latch(LatchState),
    /// A pass on the newest render while pessimistic: it may go out.
    Release {
        plan: String,
        render: String,
    },
    /// Ask the promotion and revert policy.
    Decide {
        trigger: Trigger,
        fleet: Fleet,
    },
}

/// The render gate's state.
#[derive(Debug)]
pub struct Gate {
    config: CoreConfig,
    /// Identity of the checker (the haproxy binary) as last told: memory is
    /// consulted under it. Answers are stored under the judge that gave them.
    judge: String,
    latch: Latch,
    renders: Renders,
    memory: VerdictMemory,
    pods: Pods,
    /// Shared with every decision; rebuilt only when a verdict changes them.
    passed_plans: Arc<[Name]>,
    refused_plans: Arc<[Name]>,
    /// Render id → HAProxy's judgement of the content it names now, shared
    /// with decisions (the host's rules: promotion to judged content only);
    /// and that content's checksum, so a render id sent again with other
    /// content loses its judgement.
    judged: Arc<HashMap<Name, Outcome>>,
    judged_content: HashMap<Name, Checksum>,
    /// Render id → the plan it was judged as, for the ids `judged` names:
    /// a report naming a render of another plan holds nothing judged of
    /// its own plan (the host's rules read it).
    judged_plans: Arc<HashMap<Name, Name>>,
    /// Passed plan → its newest render whose content passed, shared with
    /// decisions (a `promote` line of a pod whose report names no render
    /// names it); and that render's arrival and content.
    passed_renders: Arc<HashMap<Name, Name>>,
    passed_content: HashMap<Name, (u64, Checksum)>,
    in_flight: Option<CheckRequest>,
    last_start: Option<Instant>,
    next_id: u64,
    draining: bool,
    effects: VecDeque<Effect>,
    timer: Option<Instant>,
}

impl Gate {
    /// `judge`: the checker's identity (the haproxy binary's path and hash).
    /// It can change while the gate runs: see [`Gate::set_judge`].
    pub fn new(config: CoreConfig, judge: impl Into<String>) -> Self {
        let mut gate = Gate {
            renders: Renders::new(config.superseded_limit),
            memory: VerdictMemory::new(config.memory_capacity),
            config,
            judge: judge.into(),
            latch: Latch::default(),
            pods: Pods::default(),
            passed_plans: Arc::from([]),
            refused_plans: Arc::from([]),
            judged: Arc::default(),
            judged_content: HashMap::new(),
            judged_plans: Arc::default(),
            passed_renders: Arc::default(),
            passed_content: HashMap::new(),
            in_flight: None,
            last_start: None,
            next_id: 0,
            draining: false,
            effects: VecDeque::new(),
            timer: None,
        };
        gate.start_term();
        gate
    }

    /// Starts a term's latch: OPTIMISTIC, or held with a `Latch` effect that
    /// says so at the start of every term (`start_held`).
    fn start_term(&mut self) {
        if self.config.start_held {
            self.latch = Latch::held();
            self.effects.push_back(Effect::Latch(self.latch.state()));
        } else {
            self.latch = Latch::default();
        }
    }

    pub fn latch(&self) -> &Latch {
        &self.latch
    }
    pub fn renders(&self) -> &Renders {
        &self.renders
    }
    pub fn pods(&self) -> &Pods {
        &self.pods
    }
    pub fn memory(&self) -> &VerdictMemory {
        &self.memory
    }
    pub fn in_flight(&self) -> Option<&CheckRequest> {
        self.in_flight.as_ref()
    }
    pub fn judge(&self) -> &str {
        &self.judge
    }

    /// Who judges now (the haproxy binary's identity, taken afresh by the
    /// driver). Tell it before any input that may settle a render from
    /// memory: only answers of this judge are reused. Returns whether it changed.
    pub fn set_judge(&mut self, judge: &str) -> bool {
        if self.judge == judge {
            return false;
        }
        judge.clone_into(&mut self.judge);
        true
    }

    pub fn handle_event(&mut self, now: Instant, event: Event) {
        match event {
            Event::Rendered(render) => {
                self.forget_other_content(&render);
                self.renders.push(Arc::new(render));
            }
            // A pod repeating its last report changes nothing: no policy call.
            Event::Applied(report) => {
                if let Some(pod) = self.pods.report(report) {
                    self.decide(Trigger::Applied(pod));
                }
            }
            Event::PodTerminated { pod } => self.pods.terminated(&pod),
            Event::PodsDiscovered { pods } => self.pods.discovered(&pods),
            Event::LostLeadership => self.reset(),
        }
        self.step(now);
    }

    /// A check the gate asked for has finished; `judge` is the identity the
    /// check ran with (the binary may have changed since it was asked for),
    /// and its answer is remembered under it. Results of checks from an
    /// earlier term (or otherwise stale) publish nothing.
    pub fn handle_check_result(
        &mut self,
        now: Instant,
        id: CheckId,
        outcome: CheckOutcome,
        judge: &str,
        duration: Duration,
    ) {
        let Some(request) = self.in_flight.take_if(|r| r.id == id) else {
            return;
        };
        let arrival = self.renders.arrival(&request.render);
        if outcome.is_judgement() {
            let key = MemoryKey {
                plan: request.render.plan().to_owned(),
                checksum: request.render.checksum().clone(),
                judge: judge.to_owned(),
            };
            self.memory.insert(key, &outcome);
            self.renders.judged(&request.render);
        } else {
            self.renders.failed(&request.render, now);
        }
        self.publish(&request.render, arrival, outcome, false, duration);
        self.step(now);
    }

    /// Time has passed: back-offs and spacing may have run out.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.step(now);
    }

    /// End of input: judge what can still be judged, retry nothing.
    pub fn drain(&mut self, now: Instant) {
        self.draining = true;
        self.step(now);
    }

    /// Draining and nothing is left to judge or to report.
    pub fn is_drained(&self) -> bool {
        self.draining && self.in_flight.is_none() && self.effects.is_empty() && self.timer.is_none()
    }

    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When the driver should call [`Gate::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timer
    }

    /// Settles what memory knows, trims, and starts the next check if the
    /// worker is free and spacing allows.
    fn step(&mut self, now: Instant) {
        self.timer = None;
        loop {
            self.renders.trim(&self.pods);
            let next = self.renders.next(now, &self.pods, !self.draining);
            let render = match next {
                Next::Idle => return,
                Next::Wait(at) => {
                    self.timer = Some(at);
                    return;
                }
                Next::Ready(render) => render,
            };
            if let Some(outcome) = self.memory.find(render.plan(), render.checksum(), &self.judge) {
                let arrival = self.renders.arrival(&render);
                self.renders.judged(&render);
                self.publish(&render, arrival, outcome, true, Duration::ZERO);
                continue;
            }
            if self.in_flight.is_some() {
                return; // the result's arrival steps again
            }
            let free_at = self.last_start.map(|t| t + self.config.check_interval);
            if let Some(at) = free_at.filter(|at| *at > now) {
                self.timer = Some(at);
                return;
            }
            if let Some(e) = self.renders.get_mut(&render) {
                e.in_flight = true;
            }
            self.last_start = Some(now);
            self.next_id += 1;
            let request = CheckRequest { id: CheckId(self.next_id), render };
            self.in_flight = Some(request.clone());
            self.effects.push_back(Effect::StartCheck(request));
        }
    }

    /// Publishes one verdict with everything that follows from it, in the
    /// order of docs/protocol.md: verdict, latch, release, then the policy.
    /// `arrival`: when the render came ([`Renders::arrival`]).
    fn publish(
        &mut self,
        render: &Arc<Render>,
        arrival: Option<u64>,
        outcome: CheckOutcome,
        remembered: bool,
        duration: Duration,
    ) {
        let newest = self.renders.is_newest(render);
        let kind = outcome.kind();
        let mut transition = None;
        let pinned = if newest {
            let newest_verdict = match kind {
                Outcome::Passed => NewestVerdict::Pass,
                Outcome::Refused => NewestVerdict::Fail(Reason::Refused),
                Outcome::Unavailable => NewestVerdict::Fail(Reason::Unavailable),
            };
            let t = self.latch.apply(newest_verdict);
            transition = Some(t);
            t.pinned
        } else {
            self.latch.pinned() // a stale verdict leaves the latch alone
        };
        match kind {
            Outcome::Passed => record(
                &mut self.passed_plans,
                &mut self.refused_plans,
                render.plan(),
                self.config.plan_history,
            ),
            Outcome::Refused => record(
                &mut self.refused_plans,
                &mut self.passed_plans,
                render.plan(),
                self.config.plan_history,
            ),
            Outcome::Unavailable => {}
        }
        if kind != Outcome::Unavailable {
            self.remember_judged(render, kind);
            self.remember_passed(render, arrival, kind);
        }
        let verdict = Verdict {
            plan: render.plan().to_owned(),
            render: render.id().to_owned(),
            checksum: render.checksum().clone(),
            correlation: render.correlation().map(str::to_owned),
            outcome,
            newest,
            pinned,
            remembered,
            duration,
        };
        let trigger = Trigger::Verdict(policy_core::Verdict {
            plan: verdict.plan.clone(),
            render: verdict.render.clone(),
            outcome: kind,
            newest,
            pinned: pinned.is_some(),
            remembered,
            message: verdict.outcome.message().to_owned(),
        });
        self.effects.push_back(Effect::Verdict(verdict));
        if let Some(t) = transition {
            if let Some(state) = t.changed {
                self.effects.push_back(Effect::Latch(state));
            }
            if t.release {
                let held = self.renders.newest().map(|e| &e.render).unwrap_or(render);
                self.effects.push_back(Effect::Release {
                    plan: held.plan().to_owned(),
                    render: held.id().to_owned(),
                });
            }
        }
        self.decide(trigger);
    }

    /// Records HAProxy's judgement of `render`'s content under its id. Past
    /// [`JUDGED_LIMIT`] ids, those no pod reports are forgotten.
    fn remember_judged(&mut self, render: &Render, kind: Outcome) {
        let id: Name = render.id().into();
        if self.judged.get(&id) != Some(&kind) {
            Arc::make_mut(&mut self.judged).insert(id.clone(), kind);
        }
        if self.judged_plans.get(&id).is_none_or(|plan| **plan != *render.plan()) {
            Arc::make_mut(&mut self.judged_plans).insert(id.clone(), render.plan().into());
        }
        self.judged_content.insert(id, render.checksum().clone());
        if self.judged_content.len() > JUDGED_LIMIT {
            let pods = &self.pods;
            self.judged_content.retain(|id, _| **id == *render.id() || pods.hold_render(id));
            let kept = &self.judged_content;
            Arc::make_mut(&mut self.judged).retain(|id, _| kept.contains_key(id));
            Arc::make_mut(&mut self.judged_plans).retain(|id, _| kept.contains_key(id));
        }
    }

    /// Keeps, for each passed plan, its newest render whose content passed
    /// (after a verdict of `kind` on `render`, its plan's list moved).
    fn remember_passed(&mut self, render: &Render, arrival: Option<u64>, kind: Outcome) {
        let plan = render.plan();
        let arrival = arrival.unwrap_or(0);
        if kind == Outcome::Passed
            && self.passed_content.get(plan).is_none_or(|(kept, _)| *kept < arrival)
        {
            Arc::make_mut(&mut self.passed_renders).insert(plan.into(), render.id().into());
            self.passed_content.insert(plan.into(), (arrival, render.checksum().clone()));
        }
        // only plans still passed (the plan history bounds them)
        let passed = self.passed_plans.clone(); // a pointer's copy
        self.forget_passed(|plan, _, _| !passed.contains(plan));
    }

    /// Forgets the passed renders `gone` names (by plan, render id and content).
    fn forget_passed(&mut self, gone: impl Fn(&Name, &Name, &Checksum) -> bool) {
        let renders = &self.passed_renders;
        let before = self.passed_content.len();
        self.passed_content.retain(|plan, (_, content)| !gone(plan, &renders[plan], content));
        if self.passed_content.len() != before {
            let kept = &self.passed_content;
            Arc::make_mut(&mut self.passed_renders).retain(|plan, _| kept.contains_key(plan));
        }
    }

    /// A render id sent again with other content: its judgement was of the
    /// old content, and no longer says anything about what pods get now
    /// (nor does it name a plan's content that passed).
    fn forget_other_content(&mut self, render: &Render) {
        if self.judged_content.get(render.id()).is_some_and(|c| c != render.checksum()) {
            self.judged_content.remove(render.id());
            Arc::make_mut(&mut self.judged).remove(render.id());
            Arc::make_mut(&mut self.judged_plans).remove(render.id());
        }
        let (id, checksum) = (render.id(), render.checksum());
        self.forget_passed(|_, passed, content| **passed == *id && content != checksum);
    }

    fn decide(&mut self, trigger: Trigger) {
        let fleet = Fleet {
            pods: self.pods.states(),
            passed_plans: self.passed_plans.clone(),
            refused_plans: self.refused_plans.clone(),
            held: policy_core::Held {
                renders: self.pods.renders(),
                judged: self.judged.clone(),
                plans: self.judged_plans.clone(),
                passed: Some(self.passed_renders.clone()),
            },
        };
        self.effects.push_back(Effect::Decide { trigger, fleet });
    }

    /// A new leadership term starts from nothing. The check in flight is
    /// forgotten, so its result publishes nothing.
    fn reset(&mut self) {
        if self.latch.is_pessimistic() && !self.config.start_held {
            self.effects.push_back(Effect::Latch(LatchState::Optimistic));
        }
        self.start_term();
        self.renders.clear();
        self.pods.clear();
        self.memory.clear();
        self.passed_plans = Arc::from([]);
        self.refused_plans = Arc::from([]);
        self.judged = Arc::default();
        self.judged_content.clear();
        self.judged_plans = Arc::default();
        self.passed_renders = Arc::default();
        self.passed_content.clear();
        self.in_flight = None;
    }
}

/// Appends `plan` to `into` (oldest first, bounded, no repeats) and drops it
/// from `from`: a plan's latest judgement is the one that counts.
fn record(into: &mut Arc<[Name]>, from: &mut Arc<[Name]>, plan: &str, bound: usize) {
    let in_from = from.iter().any(|p| &**p == plan);
    if !in_from && into.last().is_some_and(|p| &**p == plan) {
        return; // already the latest judgement: the shared lists stay as they are
    }
    if in_from {
        *from = from.iter().filter(|p| &***p != plan).cloned().collect();
    }
    let mut plans: Vec<Name> = into.iter().filter(|p| &***p != plan).cloned().collect();
    plans.push(plan.into());
    plans.drain(..plans.len().saturating_sub(bound));
    *into = plans.into();
}

#[cfg(test)]
mod tests;
