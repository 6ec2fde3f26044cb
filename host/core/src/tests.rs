//! One test per row of docs/behaviour.md, driving the sans-IO gate by hand.

use super::*;
use policy_core::RevertTarget;

fn pass() -> CheckOutcome {
    CheckOutcome::Passed { message: String::new() }
}
fn refused() -> CheckOutcome {
    CheckOutcome::Refused { message: "[ALERT] bad".into() }
}
fn unavailable() -> CheckOutcome {
    CheckOutcome::Unavailable { reason: "haproxy binary not found".into() }
}

/// A render of `plan` whose content is derived from `content`.
fn render(plan: &str, id: &str, content: &str) -> Event {
    Event::Rendered(Render::new(plan, id, format!("# {content}\n"), vec![]))
}

fn applied(pod: &str, render: &str, plan: &str, running: &str, baseline: &str) -> Event {
    Event::Applied(PodReport {
        pod: pod.into(),
        render: Some(render.into()),
        plan: plan.into(),
        running_plan: Some(running.into()),
        baseline_plan: Some(baseline.into()),
    })
}

/// Drives a [`Gate`] with a hand-held clock and collects its effects.
struct Harness {
    gate: Gate,
    now: Instant,
    /// Every render id handed to the checker, in order.
    checked: Vec<String>,
    /// Effects other than StartCheck, in order.
    log: Vec<Effect>,
}

impl Harness {
    fn new() -> Self {
        Self::with_interval(Duration::from_secs(1))
    }
    fn with_interval(check_interval: Duration) -> Self {
        let config = CoreConfig { check_interval, ..CoreConfig::default() };
        Harness {
            gate: Gate::new(config, "haproxy sha256:test"),
            now: Instant::now(),
            checked: vec![],
            log: vec![],
        }
    }
    fn pump(&mut self) {
        while let Some(e) = self.gate.poll_effect() {
            match e {
                Effect::StartCheck(r) => self.checked.push(r.render.id().to_owned()),
                other => self.log.push(other),
            }
        }
    }
    fn event(&mut self, e: Event) {
        self.gate.handle_event(self.now, e);
        self.pump();
    }
    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.gate.handle_timeout(self.now);
        self.pump();
    }
    /// Lets time run to the gate's next timer.
    fn run_to_timer(&mut self) {
        let at = self.gate.poll_timeout().expect("a timer is set");
        self.now = self.now.max(at);
        self.gate.handle_timeout(self.now);
        self.pump();
    }
    /// Finishes the check in flight with `outcome`, by the current judge.
    fn finish(&mut self, outcome: CheckOutcome) {
        let judge = self.gate.judge().to_owned();
        self.finish_by(outcome, &judge);
    }
    /// Finishes the check in flight with `outcome`, by `judge`.
    fn finish_by(&mut self, outcome: CheckOutcome, judge: &str) {
        let id = self.gate.in_flight().expect("a check is in flight").id;
        self.gate.handle_check_result(self.now, id, outcome, judge, Duration::from_millis(80));
        self.pump();
    }
    fn take(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.log)
    }
    fn verdicts(&mut self) -> Vec<Verdict> {
        self.take()
            .into_iter()
            .filter_map(|e| match e {
                Effect::Verdict(v) => Some(v),
                _ => None,
            })
            .collect()
    }
    fn last_verdict(&mut self) -> Verdict {
        self.verdicts().pop().expect("a verdict")
    }
}

#[test]
fn five_step_latch_sequence() {
    let mut h = Harness::with_interval(Duration::ZERO);
    let steps = [
        (pass(), LatchState::Optimistic, None),
        (refused(), LatchState::Pessimistic(Reason::Refused), None),
        (refused(), LatchState::Pessimistic(Reason::Refused), Some(Reason::Refused)),
        (pass(), LatchState::Optimistic, None),
        (unavailable(), LatchState::Pessimistic(Reason::Unavailable), None),
    ];
    for (i, (outcome, state, pinned)) in steps.into_iter().enumerate() {
        h.event(render(&format!("plan-{i}"), &format!("r-{i}"), &format!("c{i}")));
        h.finish(outcome);
        let v = h.last_verdict();
        assert!(v.newest, "step {i}");
        assert_eq!(v.pinned, pinned, "step {i}");
        assert_eq!(h.gate.latch().state(), state, "step {i}");
    }
}

#[test]
fn outputs_of_one_verdict_come_in_protocol_order() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(applied("ns/a", "r-1", "plan-1", "plan-0", "plan-0"));
    h.take();
    h.event(render("plan-1", "r-1", "bad"));
    h.finish(refused());
    let kinds: Vec<&str> = h
        .take()
        .iter()
        .map(|e| match e {
            Effect::Verdict(_) => "verdict",
            Effect::Latch(_) => "latch",
            Effect::Release { .. } => "release",
            Effect::Decide { .. } => "decide",
            Effect::StartCheck(_) => "start",
        })
        .collect();
    assert_eq!(kinds, ["verdict", "latch", "decide"]);

    h.event(render("plan-2", "r-2", "good"));
    h.finish(pass());
    let effects = h.take();
    assert!(matches!(effects[0], Effect::Verdict(_)));
    assert_eq!(effects[1], Effect::Latch(LatchState::Optimistic));
    assert!(
        matches!(&effects[2], Effect::Release { plan, render } if plan == "plan-2" && render == "r-2")
    );
    assert!(matches!(effects[3], Effect::Decide { .. }));
    assert_eq!(effects.len(), 4);
}

#[test]
fn pass_while_optimistic_releases_nothing_and_stale_pass_releases_nothing() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(render("plan-1", "r-1", "a"));
    h.finish(pass());
    assert!(!h.take().iter().any(|e| matches!(e, Effect::Release { .. })));

    // Pessimistic, then a stale pass (plan-2 superseded by plan-3 during its check).
    h.event(render("plan-2", "r-2", "b"));
    h.finish(refused());
    h.event(render("plan-3", "r-3", "c"));
    h.take();
    assert_eq!(h.checked.last().unwrap(), "r-3");
    h.event(render("plan-4", "r-4", "d"));
    h.finish(pass()); // r-3: superseded by r-4
    let effects = h.take();
    assert!(!effects.iter().any(|e| matches!(e, Effect::Release { .. } | Effect::Latch(_))));
    assert!(h.gate.latch().is_pessimistic());
}

#[test]
fn burst_during_a_check_costs_exactly_one_more_check_for_the_newest() {
    let mut h = Harness::new();
    h.event(render("plan-1", "r-1", "1"));
    for i in 2..=4 {
        h.event(render(&format!("plan-{i}"), &format!("r-{i}"), &i.to_string()));
    }
    assert_eq!(h.checked, ["r-1"]);
    h.finish(pass());
    let v = h.last_verdict();
    assert_eq!(v.render, "r-1");
    assert!(!v.newest, "plan-1 is superseded by plan-4");
    h.run_to_timer(); // check spacing
    assert_eq!(h.checked, ["r-1", "r-4"]);
    h.finish(pass());
    assert!(h.last_verdict().newest);
    assert_eq!(h.gate.poll_timeout(), None, "plans 2 and 3 are held by no pod: nothing left to do");
    h.advance(Duration::from_secs(60));
    assert_eq!(h.checked, ["r-1", "r-4"]);
}

#[test]
fn superseded_refused_plan_a_pod_reports_is_checked_and_drives_a_revert() {
    let mut h = Harness::new();
    h.event(render("plan-1", "r-1", "1"));
    h.event(render("plan-2", "r-2", "2-bad"));
    h.event(render("plan-3", "r-3", "3"));
    h.finish(pass()); // r-1
    h.run_to_timer();
    h.finish(pass()); // r-3, newest
    assert_eq!(h.checked, ["r-1", "r-3"]);
    // A pod still runs plan-2's render (took it, did not load it).
    h.event(applied("ns/a", "r-2", "plan-2", "plan-1", "plan-1"));
    h.take();
    h.run_to_timer();
    assert_eq!(h.checked, ["r-1", "r-3", "r-2"]);
    h.finish(refused());
    let effects = h.take();
    let v = match &effects[0] {
        Effect::Verdict(v) => v.clone(),
        e => panic!("{e:?}"),
    };
    assert!(!v.newest && v.outcome.label() == "refused");
    assert!(!h.gate.latch().is_pessimistic(), "a stale refusal leaves the latch alone");
    let Effect::Decide { trigger, fleet } = effects.last().unwrap() else { panic!() };
    assert_eq!(*fleet.refused_plans, [Name::from("plan-2")]);
    let decision = policy_core::decide(trigger, fleet);
    assert_eq!(decision.revert.len(), 1);
    assert_eq!(&*decision.revert[0].pod, "ns/a");
    assert_eq!(decision.revert[0].target, RevertTarget::Baseline);
}

#[test]
fn trim_keeps_four_waiting_besides_the_check_in_flight_and_every_render_a_pod_holds() {
    let mut h = Harness::new();
    // r-0 goes to check; r-1..r-6 pile up behind it, each held by a pod.
    for i in 0..=7 {
        h.event(render(&format!("plan-{i}"), &format!("r-{i}"), &i.to_string()));
        if (1..=6).contains(&i) {
            h.event(applied(&format!("ns/p{i}"), &format!("r-{i}"), &format!("plan-{i}"), "", ""));
        }
    }
    let ids = |h: &Harness| {
        h.gate.renders().superseded().map(|e| e.render.id().to_owned()).collect::<Vec<_>>()
    };
    assert_eq!(ids(&h), ["r-0", "r-1", "r-2", "r-3", "r-4", "r-5", "r-6"], "r-0 is in flight");
    // Pods p1..p3 move on to plan-7: r-1..r-3 are no longer held. Six wait
    // besides r-0 in flight: the two oldest no pod holds go.
    for i in 1..=3 {
        h.event(applied(&format!("ns/p{i}"), "r-7", "plan-7", "", ""));
    }
    assert_eq!(
        ids(&h),
        ["r-0", "r-3", "r-4", "r-5", "r-6"],
        "the check in flight is not one of the 4"
    );
    // r-3 was kept: a pod that reports it now still gets its verdict.
    h.event(applied("ns/p1", "r-3", "plan-3", "", ""));
    h.finish(pass()); // r-0 judged: forgotten
    assert_eq!(ids(&h), ["r-3", "r-4", "r-5", "r-6"]);
}

#[test]
fn one_backoff_for_the_gate_and_any_judgement_resets_it() {
    let mut h = Harness::with_interval(Duration::ZERO);
    let t0 = h.now;
    h.event(render("plan-1", "r-1", "1"));
    h.event(applied("ns/a", "r-1", "plan-1", "", ""));
    h.finish(unavailable());
    assert_eq!(h.gate.poll_timeout(), Some(t0 + Duration::from_secs(1)));
    // A new newest render does not wait out r-1's back-off...
    h.event(render("plan-2", "r-2", "2"));
    assert_eq!(h.checked, ["r-1", "r-2"]);
    // ...but its failure is the gate's second in a row: both wait 2 s.
    h.finish(unavailable());
    assert_eq!(h.gate.renders().backoff().failures, 2);
    assert_eq!(h.gate.poll_timeout(), Some(t0 + Duration::from_secs(2)));
    // A pass resets the back-off: r-1 (still held by ns/a) is retried at
    // once, not at the end of the wait it had.
    h.event(render("plan-3", "r-3", "3"));
    h.finish(pass());
    assert_eq!(h.checked, ["r-1", "r-2", "r-3", "r-1"]);
    assert_eq!(h.gate.renders().backoff().failures, 0);
    assert_eq!(h.now, t0);
}

#[test]
fn a_previous_newest_already_judged_is_simply_replaced() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(render("plan-1", "r-1", "1"));
    h.finish(pass());
    h.event(render("plan-2", "r-2", "2"));
    assert_eq!(h.gate.renders().superseded().count(), 0);
    assert_eq!(h.gate.renders().len(), 1);
}

#[test]
fn memory_hit_publishes_a_remembered_verdict_without_a_check_and_moves_the_latch() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(render("plan-1", "r-1", "bad"));
    h.finish(refused());
    h.event(render("plan-2", "r-2", "good"));
    h.finish(pass());
    assert_eq!(h.checked, ["r-1", "r-2"]);
    h.take();
    // plan-1's content again, as a new render: settled from memory.
    h.event(render("plan-1", "r-3", "bad"));
    assert_eq!(h.checked, ["r-1", "r-2"], "no check for remembered content");
    let v = h.last_verdict();
    assert_eq!((v.render.as_str(), v.remembered, v.newest), ("r-3", true, true));
    assert_eq!(v.outcome, refused());
    assert_eq!(v.duration, Duration::ZERO);
    assert!(h.gate.latch().is_pessimistic(), "a remembered refusal still moves the latch");
    // The same plan with other content is not a hit.
    h.event(render("plan-1", "r-4", "other"));
    assert_eq!(h.checked.last().unwrap(), "r-4");
}

#[test]
fn a_new_judge_is_not_answered_from_the_old_ones_memory() {
    let mut h = Harness::with_interval(Duration::ZERO);
    assert!(h.gate.set_judge("haproxy-1"));
    assert!(!h.gate.set_judge("haproxy-1"), "the same judge told again changes nothing");
    h.event(render("plan-1", "r-1", "x"));
    h.finish(refused());
    // the binary was replaced: the same content is checked again
    assert!(h.gate.set_judge("haproxy-2"));
    h.take();
    h.event(render("plan-1", "r-2", "x"));
    assert_eq!(h.checked, ["r-1", "r-2"], "the new judge is asked");
    assert!(h.take().is_empty(), "no verdict from memory");
    h.finish(pass());
    assert_eq!(h.last_verdict().outcome, pass());
    h.event(render("plan-1", "r-3", "x"));
    let v = h.last_verdict();
    assert_eq!((v.render.as_str(), v.remembered, v.outcome), ("r-3", true, pass()));
    // and back: the first binary's answer is its own
    h.gate.set_judge("haproxy-1");
    h.event(render("plan-1", "r-4", "x"));
    let v = h.last_verdict();
    assert_eq!((v.render.as_str(), v.remembered, v.outcome), ("r-4", true, refused()));
    assert_eq!(h.checked, ["r-1", "r-2"]);
}

#[test]
fn an_answer_is_remembered_under_the_judge_that_gave_it() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.gate.set_judge("haproxy-1");
    h.event(render("plan-1", "r-1", "x"));
    // asked under haproxy-1, but haproxy-2 was in place when the check ran
    h.finish_by(refused(), "haproxy-2");
    assert_eq!(h.last_verdict().outcome, refused());
    h.event(render("plan-1", "r-2", "x"));
    assert_eq!(h.checked, ["r-1", "r-2"], "haproxy-1 never answered: asked again");
    // the other way round: asked under haproxy-2, answered by haproxy-1
    h.gate.set_judge("haproxy-2");
    h.finish_by(pass(), "haproxy-1");
    h.take();
    h.event(render("plan-1", "r-3", "x"));
    let v = h.last_verdict();
    assert_eq!(
        (v.render.as_str(), v.remembered, v.outcome),
        ("r-3", true, refused()),
        "haproxy-2's own answer"
    );
    h.gate.set_judge("haproxy-1");
    h.event(render("plan-1", "r-4", "x"));
    let v = h.last_verdict();
    assert_eq!(
        (v.render.as_str(), v.remembered, v.outcome),
        ("r-4", true, pass()),
        "haproxy-1's own answer"
    );
    assert_eq!(h.checked, ["r-1", "r-2"]);
}

#[test]
fn could_not_run_is_never_remembered() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(render("plan-1", "r-1", "x"));
    h.finish(unavailable());
    h.event(render("plan-1", "r-2", "x"));
    assert_eq!(h.checked, ["r-1", "r-2"]);
    assert!(h.gate.memory().is_empty());
}

#[test]
fn could_not_run_is_retried_with_the_backoff_sequence_and_a_verdict_resets_it() {
    let mut h = Harness::with_interval(Duration::ZERO);
    let start = h.now;
    h.event(render("plan-1", "r-1", "x"));
    let mut starts = vec![];
    for _ in 0..7 {
        starts.push((h.now - start).as_secs());
        h.finish(unavailable());
        let v = h.last_verdict();
        assert_eq!(v.outcome.label(), "unavailable");
        assert!(v.newest);
        h.run_to_timer();
    }
    assert_eq!(starts, [0, 1, 3, 7, 15, 31, 61]);
    assert_eq!(h.gate.latch().state(), LatchState::Pessimistic(Reason::Unavailable));
    assert_eq!(h.gate.latch().pinned(), Some(Reason::Unavailable));
    h.finish(pass());
    assert!(!h.gate.latch().is_pessimistic());
    // A new render that fails starts the back-off from 1 s again.
    h.event(render("plan-2", "r-2", "y"));
    let t = h.now;
    h.finish(unavailable());
    assert_eq!(h.gate.poll_timeout(), Some(t + Duration::from_secs(1)));
}

#[test]
fn checks_are_spaced_by_the_interval() {
    let mut h = Harness::with_interval(Duration::from_millis(500));
    h.event(render("plan-1", "r-1", "1"));
    h.finish(pass());
    h.event(render("plan-2", "r-2", "2"));
    assert_eq!(h.checked, ["r-1"], "spacing holds the second start");
    assert_eq!(h.gate.poll_timeout(), Some(h.now + Duration::from_millis(500)));
    h.advance(Duration::from_millis(499));
    assert_eq!(h.checked.len(), 1);
    h.advance(Duration::from_millis(1));
    assert_eq!(h.checked, ["r-1", "r-2"]);
}

#[test]
fn leadership_loss_resets_everything_and_the_in_flight_check_publishes_nothing() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(applied("ns/a", "r-1", "plan-1", "plan-0", "plan-0"));
    h.event(render("plan-1", "r-1", "bad"));
    h.finish(refused());
    h.event(render("plan-2", "r-2", "x"));
    let stale = h.gate.in_flight().unwrap().id;
    h.take();
    h.event(Event::LostLeadership);
    assert_eq!(h.take(), [Effect::Latch(LatchState::Optimistic)]);
    assert_eq!(h.gate.latch().state(), LatchState::Optimistic);
    assert!(h.gate.renders().is_empty() && h.gate.pods().is_empty() && h.gate.memory().is_empty());
    h.gate.handle_check_result(h.now, stale, pass(), "haproxy sha256:test", Duration::ZERO);
    h.pump();
    assert!(h.take().is_empty(), "a cancelled check is not a verdict");
    // The new term knows nothing: plan-1's bad content is checked afresh.
    h.event(render("plan-1", "r-1", "bad"));
    assert_eq!(h.checked.last().unwrap(), "r-1");
    h.finish(refused());
    let Some(Effect::Decide { fleet, .. }) = h.take().pop() else { panic!() };
    assert!(fleet.pods.is_empty() && fleet.passed_plans.is_empty());
}

#[test]
fn terminated_and_undiscovered_pods_no_longer_keep_a_render_alive() {
    let mut h = Harness::new();
    for (pod, i) in [("ns/a", 1), ("ns/b", 2), ("ns/c", 3), ("ns/d", 4)] {
        h.event(applied(pod, &format!("r-{i}"), &format!("plan-{i}"), "", ""));
    }
    for i in 0..=6 {
        h.event(render(&format!("plan-{i}"), &format!("r-{i}"), &i.to_string()));
    }
    let ids = |h: &Harness| {
        h.gate.renders().superseded().map(|e| e.render.id().to_owned()).collect::<Vec<_>>()
    };
    assert_eq!(ids(&h), ["r-0", "r-1", "r-2", "r-3", "r-4"], "held renders outlive the limit");
    h.event(Event::PodTerminated { pod: "ns/a".into() });
    assert_eq!(
        ids(&h),
        ["r-0", "r-1", "r-2", "r-3", "r-4"],
        "four wait besides the one in flight: none dropped"
    );
    h.event(Event::PodsDiscovered { pods: ["ns/c", "ns/x"].into_iter().collect() });
    assert_eq!(h.gate.pods().len(), 1);
    h.event(render("plan-7", "r-7", "7"));
    assert_eq!(
        ids(&h),
        ["r-0", "r-2", "r-3", "r-4", "r-6"],
        "r-1 lost its pod and was the oldest unheld"
    );
    // Only a held straggler is judged: r-3 (ns/c), never r-4 or r-6.
    h.finish(pass());
    h.run_to_timer();
    h.finish(pass()); // r-7
    h.run_to_timer();
    h.finish(pass()); // r-3
    assert_eq!(h.checked, ["r-0", "r-7", "r-3"]);
    assert_eq!(h.gate.poll_timeout(), None);
}

#[test]
fn a_verdict_for_the_same_content_as_the_newest_counts_as_newest() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(render("plan-1", "r-1", "same"));
    h.event(render("plan-1", "r-2", "same"));
    h.finish(refused());
    let v = h.verdicts().remove(0);
    assert_eq!(v.render, "r-1");
    assert!(v.newest);
    assert!(h.gate.latch().is_pessimistic());
}

#[test]
fn stale_verdict_leaves_the_latch_alone_and_reports_the_current_pinned() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(render("plan-1", "r-1", "1"));
    h.finish(refused());
    h.event(render("plan-2", "r-2", "2"));
    h.finish(refused()); // pinned
    h.event(render("plan-3", "r-3", "3"));
    h.event(render("plan-4", "r-4", "4"));
    h.take();
    h.finish(pass()); // r-3, stale
    let v = h.last_verdict();
    assert!(!v.newest);
    assert_eq!(v.pinned, Some(Reason::Refused));
    assert_eq!(h.gate.latch().state(), LatchState::Pessimistic(Reason::Refused));
}

#[test]
fn applied_reports_ask_the_policy_with_the_pod_and_the_plans_judged() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(render("plan-1", "r-1", "1"));
    h.finish(pass());
    h.take();
    h.event(applied("ns/a", "r-1", "plan-1", "plan-0", "plan-0"));
    let effects = h.take();
    let [Effect::Decide { trigger, fleet }] = effects.as_slice() else { panic!("{effects:?}") };
    assert_eq!(*fleet.passed_plans, [Name::from("plan-1")]);
    let decision = policy_core::decide(trigger, fleet);
    assert_eq!(decision.promote.len(), 1, "a late report of a passed plan promotes");
}

#[test]
fn plan_lists_keep_the_latest_judgement_of_each_plan() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(render("plan-1", "r-1", "a"));
    h.finish(refused());
    h.event(render("plan-1", "r-2", "b"));
    h.finish(pass());
    let Some(Effect::Decide { fleet, .. }) = h.take().pop() else { panic!() };
    assert_eq!(*fleet.passed_plans, [Name::from("plan-1")]);
    assert!(fleet.refused_plans.is_empty());
}

#[test]
fn draining_judges_what_it_can_and_retries_nothing() {
    let mut h = Harness::new();
    h.event(render("plan-1", "r-1", "1"));
    h.event(render("plan-2", "r-2", "2"));
    h.gate.drain(h.now);
    assert!(!h.gate.is_drained());
    h.finish(pass());
    h.run_to_timer();
    assert_eq!(h.checked, ["r-1", "r-2"]);
    h.finish(unavailable());
    assert!(h.gate.is_drained(), "the failed render is not retried while draining");
}

#[test]
fn a_resent_render_id_replaces_the_earlier_occurrence() {
    let mut h = Harness::new();
    h.event(render("plan-1", "r-1", "1"));
    h.event(render("plan-2", "r-2", "2"));
    h.event(render("plan-3", "r-2", "3"));
    let ids: Vec<_> = h.gate.renders().superseded().map(|e| e.render.id().to_owned()).collect();
    assert_eq!(ids, ["r-1"], "r-1 in flight; the first r-2 is replaced");
    assert_eq!(h.gate.renders().newest().unwrap().render.plan(), "plan-3");
}

#[test]
fn a_repeated_identical_report_does_not_ask_the_policy_again() {
    let mut h = Harness::with_interval(Duration::ZERO);
    h.event(applied("ns/a", "r-1", "plan-1", "plan-0", "plan-0"));
    assert_eq!(h.take().len(), 1, "the first report asks the policy");
    h.event(applied("ns/a", "r-1", "plan-1", "plan-0", "plan-0"));
    assert!(h.take().is_empty(), "the same report again does not");
    h.event(applied("ns/a", "r-1", "plan-1", "plan-1", "plan-0"));
    assert_eq!(h.take().len(), 1, "a changed report does");
}

/// docs/behaviour.md, "Term start": with `start_held` every term starts
/// PESSIMISTIC (`term-start`) with a `Latch` effect, even one that starts
/// held again; its first pass releases; its first failure is not pinned.
#[test]
fn a_held_term_starts_pessimistic_and_says_so_every_term() {
    let held = LatchState::Pessimistic(Reason::TermStart);
    let config =
        CoreConfig { check_interval: Duration::ZERO, start_held: true, ..CoreConfig::default() };
    let mut h = Harness {
        gate: Gate::new(config, "haproxy sha256:test"),
        now: Instant::now(),
        checked: vec![],
        log: vec![],
    };
    h.pump();
    assert!(matches!(h.take()[..], [Effect::Latch(state)] if state == held));

    h.event(render("plan-1", "r-1", "c1"));
    h.finish(pass());
    let effects = h.take();
    assert!(matches!(effects[1], Effect::Latch(LatchState::Optimistic)), "{effects:?}");
    assert!(
        matches!(&effects[2], Effect::Release { render, .. } if &**render == "r-1"),
        "{effects:?}"
    );

    h.event(Event::LostLeadership);
    assert!(matches!(h.take()[..], [Effect::Latch(state)] if state == held));
    h.event(Event::LostLeadership);
    assert!(matches!(h.take()[..], [Effect::Latch(state)] if state == held), "every term says so");

    h.event(render("plan-2", "r-2", "c2"));
    h.finish(refused());
    let v = h.last_verdict();
    assert_eq!(v.pinned, None, "a held term's first failure is its first");
    assert_eq!(h.gate.latch().state(), LatchState::Pessimistic(Reason::Refused));
}
