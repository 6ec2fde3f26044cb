//! Generated fleets and triggers for measuring what a decision costs: the
//! one generator behind `rendergate policy bench` (docs/protocol.md §1) and
//! this crate's `cargo bench --bench policy`, so both measure the same work.
//!
//! The fleet is a rollout gone half wrong: every pod was given `plan-2`,
//! one in three loaded it (`running_plan`), every baseline is `plan-1`.
//! Deterministic: a policy and the built-in default see the same pods. Each
//! [`TriggerKind`] pairs a trigger with the plan lists that make it
//! consistent (a pass of `plan-2` lists `plan-2` as passed), so each asks
//! for real work: a pass promotes every pod, a refusal reverts two in three.

use policy_core::{Fleet, Name, Outcome, PodState, Trigger, Verdict};
use std::sync::Arc;
use std::time::Duration;

/// The plan every pod was given.
const ROLLED_OUT: &str = "plan-2";
/// Every pod's baseline, passed long ago.
const BASELINE: &str = "plan-1";

/// The pods of a generated fleet of `pods` pods, sorted by name as the gate keeps them.
pub fn pods(pods: usize) -> Arc<Vec<PodState>> {
    let mut states: Vec<PodState> = (0..pods)
        .map(|i| PodState {
            pod: format!("haptic/haproxy-{i}").into(),
            applied_plan: Some(ROLLED_OUT.into()),
            running_plan: Some(if i % 3 == 0 { ROLLED_OUT } else { BASELINE }.into()),
            baseline_plan: Some(BASELINE.into()),
        })
        .collect();
    states.sort_by(|a, b| a.pod.cmp(&b.pod));
    Arc::new(states)
}

/// The fleet as a refusal of `plan-2` sees it: `plan-1` passed, `plan-2` refused.
pub fn fleet(pods: usize) -> Fleet {
    TriggerKind::Refused.fleet(self::pods(pods))
}

/// The triggers a policy is measured on, each named as the bench reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerKind {
    /// A pass of the newest render (`plan-2`): every pod holding it may be promoted.
    Passed,
    /// A refusal of the newest render: pods that did not load it are reverted.
    Refused,
    /// A refusal of a superseded render (`newest: false`).
    RefusedStale,
    /// A check that could not run on the newest render: HAProxy judged nothing.
    CouldNotRun,
    /// One pod's report that it applied `plan-2`, after `plan-2` passed.
    Applied,
}

impl TriggerKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [TriggerKind; 5] = [
        TriggerKind::Passed,
        TriggerKind::Refused,
        TriggerKind::RefusedStale,
        TriggerKind::CouldNotRun,
        TriggerKind::Applied,
    ];

    /// The name in `policy bench`'s output.
    pub fn name(self) -> &'static str {
        match self {
            TriggerKind::Passed => "passed",
            TriggerKind::Refused => "refused",
            TriggerKind::RefusedStale => "refused-stale",
            TriggerKind::CouldNotRun => "could-not-run",
            TriggerKind::Applied => "applied",
        }
    }

    /// The fleet this trigger meets: `pods`, with the plan lists its verdict implies.
    pub fn fleet(self, pods: Arc<Vec<PodState>>) -> Fleet {
        let plans = |list: &[&str]| -> Arc<[Name]> { list.iter().map(|&p| p.into()).collect() };
        let (passed, refused) = match self {
            TriggerKind::Passed | TriggerKind::Applied => {
                (plans(&[BASELINE, ROLLED_OUT]), plans(&[]))
            }
            TriggerKind::Refused | TriggerKind::RefusedStale => {
                (plans(&[BASELINE]), plans(&[ROLLED_OUT]))
            }
            TriggerKind::CouldNotRun => (plans(&[BASELINE]), plans(&[])),
        };
        Fleet { held: Default::default(), pods, passed_plans: passed, refused_plans: refused }
    }

    /// The trigger, over `fleet` (the applied report is its first pod's).
    pub fn trigger(self, fleet: &Fleet) -> Trigger {
        let verdict = |outcome, newest, message: &str| {
            Trigger::Verdict(Verdict {
                plan: ROLLED_OUT.into(),
                render: "r-2".into(),
                outcome,
                newest,
                pinned: false,
                remembered: false,
                message: message.into(),
            })
        };
        match self {
            TriggerKind::Passed => verdict(Outcome::Passed, true, ""),
            TriggerKind::Refused => verdict(Outcome::Refused, true, "[ALERT] config: refused"),
            TriggerKind::RefusedStale => {
                verdict(Outcome::Refused, false, "[ALERT] config: refused")
            }
            TriggerKind::CouldNotRun => {
                verdict(Outcome::Unavailable, true, "the check timed out after 30s")
            }
            TriggerKind::Applied => match fleet.pods.first() {
                Some(pod) => Trigger::Applied(pod.clone()),
                None => Trigger::Applied(PodState {
                    pod: "haptic/haproxy-0".into(),
                    applied_plan: Some(ROLLED_OUT.into()),
                    running_plan: None,
                    baseline_plan: Some(BASELINE.into()),
                }),
            },
        }
    }
}

/// The p50 and p99 of some timings (sorted in place), by nearest rank: the
/// smallest timing at least q% of them do not exceed. Of fewer than 100
/// timings, p99 is the largest. Zero for none.
pub fn percentiles(times: &mut [Duration]) -> (Duration, Duration) {
    if times.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    times.sort();
    let at = |q: usize| times[(times.len() * q).div_ceil(100).max(1) - 1];
    (at(50), at(99))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NativeDefault, Policy};

    #[test]
    fn each_kind_asks_the_default_for_the_work_its_name_says() {
        let pods = pods(30);
        let decide = |kind: TriggerKind| {
            let fleet = kind.fleet(pods.clone());
            NativeDefault.decide(&kind.trigger(&fleet), &fleet).unwrap()
        };
        let passed = decide(TriggerKind::Passed);
        assert_eq!((passed.promote.len(), passed.revert.len()), (30, 0));
        let refused = decide(TriggerKind::Refused);
        assert_eq!((refused.promote.len(), refused.revert.len()), (0, 20));
        let could_not_run = decide(TriggerKind::CouldNotRun);
        assert_eq!((could_not_run.promote.len(), could_not_run.revert.len()), (0, 0));
        let applied = decide(TriggerKind::Applied);
        assert_eq!((applied.promote.len(), applied.revert.len()), (1, 0));
        assert!(pods.windows(2).all(|w| w[0].pod < w[1].pod), "sorted as the gate keeps them");
    }

    #[test]
    fn percentiles_pick_the_middle_and_the_tail() {
        let micros = |n| Duration::from_micros(n);
        let mut times: Vec<Duration> = (1..=100).rev().map(micros).collect();
        assert_eq!(percentiles(&mut times), (micros(50), micros(99)));
        let mut times: Vec<Duration> = (1..=1000).rev().map(micros).collect();
        assert_eq!(percentiles(&mut times), (micros(500), micros(990)));
        let mut times: Vec<Duration> = (1..=10).map(micros).collect();
        assert_eq!(percentiles(&mut times), (micros(5), micros(10)), "p99 of 10 is the largest");
        assert_eq!(percentiles(&mut [micros(7)]), (micros(7), micros(7)));
        assert_eq!(percentiles(&mut []), (Duration::ZERO, Duration::ZERO));
    }
}
