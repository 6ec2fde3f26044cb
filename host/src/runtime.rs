//! The tokio adapter around the sans-IO core: events in through a channel,
//! [`Output`]s out through another, one worker running checks one at a time.
//!
//! The driver task owns the core. It feeds it events, results and timer
//! expiries, carries out its effects (start a check, ask the policy, publish)
//! and sleeps until the core's next timer. Nothing here decides anything:
//! decisions run on the policy worker's thread ([`crate::policy::worker`]),
//! and a verdict's outputs wait, as one group, for its decision to come back.
//! A shadow policy ([`GateConfig::shadow`]) decides on a thread of its own;
//! its answers never hold outputs back ([`crate::shadow`]).
//! Before each input it tells the core who judges now (the checker's
//! identity, taken afresh), so memory never answers for a replaced binary.
//! A [`Stopper`] ends the gate at once (SIGTERM): the check in flight is
//! dropped, which stops haproxy's group and removes its directory, and
//! awaited. The group itself is gone once the checker is dropped too, which
//! waits for the threads that finish the stops (docs/checking.md).

use crate::check::{Checked, Checker};
use crate::core::{
    self, CheckId, CheckOutcome, CheckRequest, Effect, Event, LatchState, Reason, Verdict,
};
use crate::health::Health;
use crate::metrics::Metrics;
use crate::policy::shadow::Shadowed;
use crate::policy::worker::{self, Decided, PolicyWorker};
use crate::policy::{LivePolicy, PolicySeat, Promote, Revert};
use crate::shadow::{Difference, Shadowing};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How the gate runs.
#[derive(Clone, Debug)]
pub struct GateConfig {
    /// Least time between the starts of two checks (default 1 s; 0 allowed).
    pub check_interval: Duration,
    /// Bound on one check, waiting for the check slot included (default 30 s).
    pub check_timeout: Duration,
    /// The slot a check must hold while `haproxy -c` runs. Gates that share
    /// one never run two checks at once.
    pub check_slot: Arc<Semaphore>,
    /// Room in the event and output channels, and how many decisions may
    /// wait for the policy before the gate stops taking events.
    pub channel_capacity: usize,
    /// Where the gate counts; share it with whatever else reports (the
    /// policy reloader, a metrics endpoint).
    pub metrics: Arc<Metrics>,
    /// How far past `check_timeout` a check in flight, or one turn of the
    /// driver, may run before [`Gate::health`] calls the gate stuck (default 5 s).
    pub health_margin: Duration,
    /// Every leadership term starts PESSIMISTIC, reason `term-start`, with a
    /// `Latch` output at its start (`--start-held`; docs/behaviour.md).
    pub start_held: bool,
    /// A second policy that decides every trigger too, compared with the
    /// live decision and never applied (`--shadow-policy`; docs/policies.md).
    pub shadow: Option<LivePolicy>,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            check_interval: Duration::from_secs(1),
            check_timeout: Duration::from_secs(30),
            check_slot: Arc::new(Semaphore::new(1)),
            channel_capacity: 256,
            metrics: Arc::new(Metrics::default()),
            health_margin: Duration::from_secs(5),
            start_held: false,
            shadow: None,
        }
    }
}

/// What the gate tells its controller, in protocol order per verdict:
/// `Verdict`, `Latch`, `Release`, then `Promote`/`Revert`; a `Shadow` after
/// the decision it compares, never inside a verdict's group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Verdict(Verdict),
    Latch(LatchState),
    /// The scheduler may dispatch this held render.
    Release {
        plan: String,
        render: String,
    },
    /// `render`: the render whose content passed, when known.
    Promote {
        promote: Promote,
        render: Option<crate::policy::Name>,
    },
    Revert(Revert),
    /// The shadow policy decided a trigger otherwise (`--shadow-policy`).
    Shadow(Difference),
}

/// The running gate: send it events; read its outputs from the receiver
/// returned by [`Gate::start`].
pub struct Gate {
    events: mpsc::Sender<Event>,
    driver: JoinHandle<()>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    stopper: Stopper,
}

/// Ends a gate at once, from outside the task that owns the [`Gate`].
#[derive(Clone, Debug)]
pub struct Stopper {
    stop: Arc<Notify>,
    /// Closed when the driver has ended (its sender is dropped then).
    ended: watch::Receiver<()>,
}

impl Stopper {
    /// Stops the gate without finishing anything: queued checks are dropped
    /// and the check in flight is stopped (its process group stopped, its
    /// directory removed; its last processes are gone once the checker is
    /// dropped). Returns once the driver, and with it the check, is gone; at
    /// once if it already was.
    pub async fn stop(mut self) {
        self.stop.notify_one();
        while self.ended.changed().await.is_ok() {}
    }
}

/// The gate task has stopped (its output receiver was dropped).
#[derive(Debug, thiserror::Error)]
#[error("the gate has stopped")]
pub struct GateStopped;

impl Gate {
    /// Starts the gate on the current tokio runtime.
    pub fn start(
        config: GateConfig,
        checker: Arc<dyn Checker>,
        policy: PolicySeat,
    ) -> (Gate, mpsc::Receiver<Output>) {
        let (outputs_tx, outputs_rx) = mpsc::channel(config.channel_capacity);
        (Gate::start_with(config, checker, policy, Sink::One(outputs_tx)), outputs_rx)
    }

    /// [`Gate::start`], with outputs handed over in groups: a verdict's
    /// outputs (with its decision) in one message, every other output alone.
    /// For a writer that interleaves other lines and must not split a group
    /// (`rendergate serve`'s `error` lines).
    pub fn start_grouped(
        config: GateConfig,
        checker: Arc<dyn Checker>,
        policy: PolicySeat,
    ) -> (Gate, mpsc::Receiver<Vec<Output>>) {
        let (outputs_tx, outputs_rx) = mpsc::channel(config.channel_capacity);
        (Gate::start_with(config, checker, policy, Sink::Groups(outputs_tx)), outputs_rx)
    }

    fn start_with(
        config: GateConfig,
        checker: Arc<dyn Checker>,
        policy: PolicySeat,
        outputs: Sink,
    ) -> Gate {
        let (events_tx, events_rx) = mpsc::channel(config.channel_capacity);
        let (ended_tx, ended) = watch::channel(());
        let stopper = Stopper { stop: Arc::new(Notify::new()), ended };
        let metrics = config.metrics.clone();
        let health = Arc::new(Health::new(config.check_timeout, config.health_margin, now()));
        let core_config = core::CoreConfig {
            check_interval: config.check_interval,
            start_held: config.start_held,
            ..core::CoreConfig::default()
        };
        let shadow =
            config.shadow.clone().map(|shadow| Shadowing::start(shadow, metrics.policy().clone()));
        let driver = Driver {
            core: core::Gate::new(core_config, &*checker.identity()),
            shadow,
            checker,
            policy: PolicyWorker::start(policy.clone(), metrics.policy().clone()),
            seat: policy,
            deciding: 0,
            metrics: metrics.clone(),
            health: health.clone(),
            outputs,
            config,
            check: None,
            shown_latch: None,
            pending: VecDeque::new(),
            pending_since: None,
            stop: stopper.stop.clone(),
            _ended: ended_tx,
        };
        let driver = tokio::spawn(driver.run(events_rx));
        Gate { events: events_tx, driver, metrics, health, stopper }
    }

    /// What stops this gate at once, usable after the gate itself has been
    /// handed over (to [`crate::serve::serve`]).
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    pub async fn send(&self, event: Event) -> Result<(), GateStopped> {
        self.events.send(event).await.map_err(|_| GateStopped)
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Whether the driver and the check worker make progress (`/healthz`).
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Ends the input: the gate finishes the check in flight and every queued
    /// check that can reach a verdict (without retrying checks that could not
    /// run), delivers their outputs, then closes the output channel.
    pub async fn finish(self) {
        drop(self.events);
        let _ = self.driver.await;
    }
}

/// Events taken from the channel at once. Taking them together frees their
/// slots together, so a sender that waits for room wakes once per batch, not
/// once per event.
const EVENT_BATCH: usize = 64;

/// Within a batch, outputs wait for the batch's end so that a reader who
/// keeps up wakes once per burst, not once per output. The wait is checked
/// after each event: an output waits at most this long plus one event's
/// handling, and no more than [`OUTPUT_BURST`] wait at once.
const OUTPUT_HOLD: Duration = Duration::from_millis(1);
const OUTPUT_BURST: usize = 256;

/// A check running on the worker.
struct RunningCheck {
    id: CheckId,
    task: JoinHandle<(Checked, Duration)>,
}

/// Outputs waiting to be sent, in order: one output, or a verdict's group
/// (`verdict`, `latch`, `release`, then the decision's `promote`/`revert`),
/// or an applied trigger's decision. A slot waiting for a decision holds
/// back every slot behind it, so outputs keep the order of their triggers
/// and a group is sent whole (docs/embedding.md, "Where decisions run").
struct Slot {
    outputs: Vec<Output>,
    /// The decision this slot waits for.
    awaiting: Option<u64>,
    /// A verdict's group still taking its `latch` and `release`.
    open: bool,
    /// The shadow's key for the trigger whose decision this slot waits for.
    compared: Option<u64>,
}

impl Slot {
    /// A slot sent as soon as those before it are.
    fn ready(outputs: Vec<Output>) -> Slot {
        Slot { outputs, awaiting: None, open: false, compared: None }
    }
}

/// Where outputs go: one by one ([`Gate::start`]) or a slot at a time
/// ([`Gate::start_grouped`]).
enum Sink {
    One(mpsc::Sender<Output>),
    Groups(mpsc::Sender<Vec<Output>>),
}

/// Nobody reads the outputs any more.
struct Stopped;

struct Driver {
    core: core::Gate,
    checker: Arc<dyn Checker>,
    policy: PolicyWorker,
    /// The same live policy, to decide in place when it is the built-in default.
    seat: PolicySeat,
    /// Decisions asked of the worker and not yet back.
    deciding: usize,
    /// The shadow policy, if any, and its triggers waiting to be compared.
    shadow: Option<Shadowing>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    outputs: Sink,
    config: GateConfig,
    check: Option<RunningCheck>,
    /// The latch as the gauges last showed it: they move only when it does.
    shown_latch: Option<(LatchState, Option<Reason>)>,
    /// Outputs not yet sent, in order, and since when the first has waited.
    pending: VecDeque<Slot>,
    pending_since: Option<std::time::Instant>,
    /// Raised by [`Stopper::stop`].
    stop: Arc<Notify>,
    /// Dropped with the driver: tells the stopper it has ended.
    _ended: watch::Sender<()>,
}

impl Driver {
    async fn run(mut self, mut events: mpsc::Receiver<Event>) {
        let mut input_open = true;
        let mut batch = Vec::with_capacity(EVENT_BATCH);
        loop {
            self.health.turn_started(now());
            self.carry_out_effects();
            if self.flush().await.is_err() {
                break; // nobody listens any more
            }
            let shadow_waiting = self.shadow.as_ref().map_or(0, Shadowing::outstanding);
            // The shadow's last answers are waited for, so their lines are
            // written; each is bounded by the policy deadline.
            if !input_open && self.core.is_drained() && self.deciding == 0 && shadow_waiting == 0 {
                break;
            }
            let timer = self.core.poll_timeout();
            self.health.turn_ended();
            // A slow policy holds events back only once this many decisions wait.
            let room = self.deciding < self.config.channel_capacity;
            tokio::select! {
                decided = self.policy.next(), if self.deciding > 0 => self.decided(decided),
                shadowed = next_shadowed(&mut self.shadow), if shadow_waiting > 0 => self.shadowed(shadowed),
                n = events.recv_many(&mut batch, EVENT_BATCH), if input_open && room => {
                    if n == 0 {
                        input_open = false;
                        self.refresh_judge();
                        self.core.drain(now());
                    } else if self.handle_events(&mut batch).await.is_err() {
                        break; // nobody listens any more
                    }
                },
                result = async { (&mut self.check.as_mut().expect("guarded").task).await }, if self.check.is_some() => {
                    let id = self.check.take().expect("guarded").id;
                    self.health.check_ended();
                    let (checked, took) = result.unwrap_or_else(|e| {
                        let outcome = CheckOutcome::Unavailable { reason: format!("the check task failed: {e}") };
                        (Checked { outcome, judge: self.core.judge().into() }, Duration::ZERO)
                    });
                    self.metrics.check_finished(checked.outcome.label(), took);
                    self.sandbox_checked(&checked.outcome);
                    self.refresh_judge();
                    self.core.handle_check_result(now(), id, checked.outcome, &checked.judge, took);
                },
                () = sleep_until(timer), if timer.is_some() => {
                    self.refresh_judge();
                    self.core.handle_timeout(now());
                },
                () = self.stop.notified() => break,
            }
            self.cancel_abandoned_check();
        }
        if let Some(check) = self.check.take() {
            check.task.abort();
            // Awaited: the check is dropped (group killed, directory removed)
            // before the driver ends and a stopper returns.
            let _ = check.task.await;
        }
        self.health.check_ended();
        self.health.turn_ended();
    }

    /// A check the core no longer waits for (the term ended) is stopped:
    /// dropping it kills haproxy's process group and removes its directory.
    /// Tells `/healthz` and the metrics whether the check's sandbox could
    /// be set up: a check that could not run for a sandbox reason makes the
    /// gate unhealthy until a check runs again (docs/operations.md).
    fn sandbox_checked(&self, outcome: &CheckOutcome) {
        match outcome {
            CheckOutcome::Unavailable { reason }
                if rendergate_check::trial::holds_every_check(reason) =>
            {
                self.metrics.check_sandbox_failed();
                self.health.sandbox_checked(Some(reason));
            }
            CheckOutcome::Unavailable { .. } => {}
            _ => self.health.sandbox_checked(None),
        }
    }

    fn cancel_abandoned_check(&mut self) {
        let wanted = self.core.in_flight().map(|r| r.id);
        if let Some(check) = self.check.take_if(|c| Some(c.id) != wanted) {
            check.task.abort();
            self.health.check_ended();
        }
    }

    /// Feeds a batch of events to the core, carrying out each one's effects
    /// before the next: a pending decision shares the fleet, which the next
    /// event would otherwise have to copy before changing it.
    async fn handle_events(&mut self, batch: &mut Vec<Event>) -> Result<(), Stopped> {
        self.health.turn_started(now());
        self.refresh_judge();
        for event in batch.drain(..) {
            self.core.handle_event(now(), event);
            // Before the effects: a lost term must stop its check before the
            // next render of this batch can start another.
            self.cancel_abandoned_check();
            self.carry_out_effects();
            let held_long = self
                .pending_since
                .is_some_and(|since| now().saturating_duration_since(since) >= OUTPUT_HOLD);
            if self.pending.len() >= OUTPUT_BURST || held_long {
                self.flush().await?;
            }
        }
        self.flush().await
    }

    /// Tells the core who judges now, before it may consult memory. A `stat`
    /// of the binary, unless it changed (then it is hashed once).
    fn refresh_judge(&mut self) {
        let judge = self.checker.identity();
        if self.core.set_judge(&judge) {
            tracing::info!(
                judge = &*judge,
                "the judge changed: answers of the previous haproxy binary are not reused"
            );
        }
    }

    /// Sends the pending outputs up to the first that waits for a decision,
    /// waiting for room as the reader frees it.
    async fn flush(&mut self) -> Result<(), Stopped> {
        while self.pending.front().is_some_and(|slot| slot.awaiting.is_none() && !slot.open) {
            let slot = self.pending.pop_front().expect("checked");
            match &self.outputs {
                Sink::One(outputs) => {
                    for output in slot.outputs {
                        outputs.send(output).await.map_err(|_| Stopped)?;
                    }
                }
                Sink::Groups(outputs) if !slot.outputs.is_empty() => {
                    outputs.send(slot.outputs).await.map_err(|_| Stopped)?
                }
                Sink::Groups(_) => {}
            }
        }
        self.pending_since = (!self.pending.is_empty()).then(now);
        Ok(())
    }

    fn push(&mut self, slot: Slot) {
        if self.pending.is_empty() {
            self.pending_since = Some(now());
        }
        self.pending.push_back(slot);
    }

    /// An output that joins the open verdict group, if any.
    fn emit(&mut self, output: Output) {
        match self.pending.back_mut() {
            Some(group) if group.open => group.outputs.push(output),
            _ => self.push(Slot::ready(vec![output])),
        }
    }

    /// A decision came back: its outputs complete the slot that waits for it.
    fn decided(&mut self, decided: Option<Decided>) {
        let Some(decided) = decided else {
            // The worker catches panics, so this is not expected; never wait forever.
            tracing::error!(
                "the policy worker is gone: {} triggers get no decision",
                self.deciding
            );
            for slot in &mut self.pending {
                slot.awaiting = None;
            }
            self.deciding = 0;
            return;
        };
        self.deciding -= 1;
        let Some(slot) = self.pending.iter_mut().find(|slot| slot.awaiting == Some(decided.seq))
        else {
            debug_assert!(false, "decision {} matches no slot", decided.seq);
            return;
        };
        slot.awaiting = None;
        let difference = shadow_difference(self.shadow.as_mut(), slot.compared.take(), &decided);
        slot.outputs.extend(decision_outputs(decided));
        self.differed(difference);
    }

    /// The shadow answered: a `shadow` line if the pair is complete and differs.
    fn shadowed(&mut self, shadowed: Option<Shadowed>) {
        let Some(shadow) = self.shadow.as_mut() else { return };
        let Some(shadowed) = shadowed else {
            // Its thread catches panics, so this is not expected: stop asking.
            tracing::error!("the shadow policy's thread is gone: no more triggers are compared");
            self.shadow = None;
            return;
        };
        let difference = shadow.shadowed(shadowed);
        self.differed(difference);
    }

    /// A difference's line goes after everything pending, so after the
    /// decision it compares, and never inside a verdict's group.
    fn differed(&mut self, difference: Option<Difference>) {
        if let Some(difference) = difference {
            self.push(Slot::ready(vec![Output::Shadow(difference)]));
        }
    }

    /// The slot a decision's outputs go to: the open verdict group, closed
    /// now, or a new slot after everything pending.
    fn decision_slot(&mut self, awaiting: Option<u64>) -> &mut Slot {
        if !self.pending.back().is_some_and(|group| group.open) {
            self.push(Slot::ready(Vec::new()));
        }
        let slot = self.pending.back_mut().expect("pushed");
        (slot.awaiting, slot.open) = (awaiting, false);
        slot
    }

    /// Carries out the core's effects; their outputs wait in `pending`.
    fn carry_out_effects(&mut self) {
        // The gauges first, so whoever reads an output finds them moved.
        let latch = (self.core.latch().state(), self.core.latch().pinned());
        if self.shown_latch != Some(latch) {
            self.metrics.set_latch(latch.0);
            self.metrics.set_pinned(latch.1);
            self.shown_latch = Some(latch);
        }
        self.metrics.set_renders_retained(self.core.renders().len());
        while let Some(effect) = self.core.poll_effect() {
            match effect {
                Effect::StartCheck(request) => self.start_check(request),
                Effect::Verdict(v) => {
                    if v.remembered {
                        self.metrics.verdict_remembered();
                    }
                    log_verdict(&v);
                    self.push(Slot {
                        outputs: vec![Output::Verdict(v)],
                        awaiting: None,
                        open: true,
                        compared: None,
                    });
                }
                Effect::Latch(state) => {
                    tracing::info!(?state, "latch changed");
                    self.emit(Output::Latch(state));
                }
                Effect::Release { plan, render } => self.emit(Output::Release { plan, render }),
                Effect::Decide { trigger, fleet } => {
                    let compared = self.shadow.as_mut().and_then(|s| s.ask(&trigger, &fleet));
                    if self.seat.inline() {
                        let decided = worker::settle(
                            &mut self.seat,
                            0,
                            &trigger,
                            &fleet,
                            self.metrics.policy(),
                        );
                        let difference =
                            shadow_difference(self.shadow.as_mut(), compared, &decided);
                        self.decision_slot(None).outputs.extend(decision_outputs(decided));
                        self.differed(difference);
                    } else {
                        let seq = self.policy.ask(trigger, fleet);
                        self.deciding += 1;
                        self.decision_slot(Some(seq)).compared = compared;
                    }
                }
            }
        }
        // The core follows every verdict with its decision; should one ever
        // come alone, its group must not wait for a decision never asked.
        if let Some(group) = self.pending.back_mut() {
            group.open = false;
        }
    }

    fn start_check(&mut self, request: CheckRequest) {
        // The core asks for one check at a time, and every input is followed
        // by `cancel_abandoned_check` before the effects are carried out.
        debug_assert!(self.check.is_none(), "a check still running when the next starts");
        let deadline = Instant::now() + self.config.check_timeout;
        let timeout = self.config.check_timeout;
        let checker = self.checker.clone();
        let slot = self.config.check_slot.clone();
        let render = request.render;
        // The answer of a check that never finished names the judge it was asked under.
        let asked_of: Arc<str> = self.core.judge().into();
        tracing::debug!(
            plan = render.plan(),
            render = render.id(),
            correlation = render.correlation().unwrap_or(""),
            "check started"
        );
        tracing::trace!(target: "rendergate::timing", "check started");
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let checking = tokio::time::timeout_at(deadline, async {
                let _slot = slot.acquire_owned().await;
                checker.check(&render, deadline).await
            });
            let checked = checking.await.unwrap_or_else(|_| {
                let reason =
                    format!("the check timed out after {}", crate::duration::format(timeout));
                Checked { outcome: CheckOutcome::Unavailable { reason }, judge: asked_of }
            });
            (checked, started.elapsed())
        });
        self.health.check_started(now());
        self.check = Some(RunningCheck { id: request.id, task });
    }
}

/// One line per verdict, carrying the render's identity and the check's
/// outcome; refusals (of any render) carry HAProxy's message at warn. A
/// superseded render's pass is routine: debug.
fn log_verdict(v: &Verdict) {
    let (plan, render, correlation) =
        (v.plan.as_str(), v.render.as_str(), v.correlation.as_deref().unwrap_or(""));
    let duration_ms = v.duration.as_millis() as u64;
    let outcome = v.outcome.label();
    let (newest, remembered) = (v.newest, v.remembered);
    match &v.outcome {
        CheckOutcome::Unavailable { reason } => {
            tracing::warn!(
                plan,
                render,
                correlation,
                outcome,
                duration_ms,
                newest,
                reason = reason.as_str(),
                "check could not run"
            )
        }
        // newest or not: a superseded render's refusal is what reverts the pods holding it
        CheckOutcome::Refused { message } => {
            tracing::warn!(
                plan,
                render,
                correlation,
                outcome,
                duration_ms,
                newest,
                remembered,
                haproxy_message = message.as_str(),
                "HAProxy refused the render"
            )
        }
        _ if newest => {
            tracing::info!(plan, render, correlation, outcome, duration_ms, remembered, "verdict")
        }
        _ => tracing::debug!(
            plan,
            render,
            correlation,
            outcome,
            duration_ms,
            remembered,
            "verdict on a superseded render"
        ),
    }
}

/// The shadow's next answer; never, without a shadow.
async fn next_shadowed(shadow: &mut Option<Shadowing>) -> Option<Shadowed> {
    match shadow {
        Some(shadow) => shadow.next().await,
        None => std::future::pending().await,
    }
}

/// The time the core is given: tokio's clock, so paused time in tests moves it.
fn now() -> std::time::Instant {
    Instant::now().into_std()
}

async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

/// A decision's outputs, in protocol order: promotions, then reverts.
/// Pairs a live decision with the shadow's for the same trigger (`compared`,
/// if the shadow was asked), labelled with the policy that decided it: a
/// [`Difference`] once both are in and they differ.
fn shadow_difference(
    shadow: Option<&mut Shadowing>,
    compared: Option<u64>,
    decided: &Decided,
) -> Option<Difference> {
    let (key, shadow) = compared.zip(shadow)?;
    shadow.live(key, decided.policy.clone(), &decided.promote, &decided.revert)
}

fn decision_outputs(decided: Decided) -> impl Iterator<Item = Output> {
    let renders = decided.promoted_renders.into_iter().chain(std::iter::repeat(None));
    let policy = decided.policy;
    let promote = decided.promote.into_iter().zip(renders).map(move |(promote, render)| {
        let (pod, plan) = (&*promote.pod, &*promote.plan);
        tracing::info!(policy, pod, plan, render = render.as_deref(), "promote");
        Output::Promote { promote, render }
    });
    let revert = decided.revert.into_iter().map(|revert| {
        let (pod, plan) = (&*revert.pod, &*revert.plan);
        let to = match &revert.target {
            crate::policy::RevertTarget::Baseline => "baseline",
            crate::policy::RevertTarget::Plan(plan) => plan,
        };
        tracing::info!(pod, plan, to, "revert");
        Output::Revert(revert)
    });
    promote.chain(revert)
}
