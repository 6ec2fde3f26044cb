//! The gate's side of `--shadow-policy` (docs/policies.md, "Shadow
//! policies"): asks the shadow about each trigger the live policy decides,
//! pairs the two decisions in whichever order they come back, and makes a
//! [`Difference`] when they differ as sets. The shadow decides on its own
//! thread ([`crate::policy::shadow`]): nothing here ever holds back a live
//! decision's outputs; a difference is written after them, as its own line.

use crate::policy::shadow::{Actions, ShadowTrigger, ShadowWorker, Shadowed};
use crate::policy::{Fleet, LivePolicy, PolicyMetrics, Promote, Revert, Trigger};
use std::collections::HashMap;
use std::sync::Arc;

/// A trigger the shadow decided otherwise than the live policy: the `shadow` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub trigger: ShadowTrigger,
    /// What was applied, after the host's rules.
    pub live: Actions,
    /// What the shadow would have applied, after the same rules.
    pub shadow: Actions,
}

/// How many triggers may wait for the shadow: a rollout's burst of reports
/// at a few hundred pods fits. A shadow further behind is not asked the next
/// triggers (reason `backlog`).
pub(crate) const SHADOW_BACKLOG: usize = 256;

/// How many pods the waiting triggers' fleets may hold together: each keeps
/// a snapshot of the fleet (about 60 bytes a pod), so this caps them near
/// 16 MiB; at 10,000 pods about 26 triggers wait.
pub(crate) const SHADOW_POD_BUDGET: usize = 262_144;

/// One trigger's two decisions, as they arrive.
struct Pair {
    trigger: ShadowTrigger,
    /// The live decision, with the name of the policy in force.
    live: Option<(Actions, String)>,
    /// The shadow's, with its name.
    shadow: Option<(Actions, String)>,
}

/// The shadow's worker and the triggers waiting for one of their two decisions.
pub(crate) struct Shadowing {
    worker: ShadowWorker,
    pairs: HashMap<u64, Pair>,
    next_key: u64,
    metrics: Arc<PolicyMetrics>,
}

impl Shadowing {
    /// Starts the shadow's thread, with [`SHADOW_BACKLOG`] and [`SHADOW_POD_BUDGET`].
    pub fn start(shadow: LivePolicy, metrics: Arc<PolicyMetrics>) -> Shadowing {
        let worker =
            ShadowWorker::start(shadow, metrics.clone(), SHADOW_BACKLOG, SHADOW_POD_BUDGET);
        Shadowing { worker, pairs: HashMap::new(), next_key: 0, metrics }
    }

    /// Asks the shadow about a trigger the live policy is deciding. Returns
    /// the key to give [`Shadowing::live`], or `None` if the shadow was not
    /// asked (too far behind: counted by the worker).
    pub fn ask(&mut self, trigger: &Trigger, fleet: &Fleet) -> Option<u64> {
        let key = self.next_key;
        self.next_key += 1;
        if !self.worker.ask(key, trigger.clone(), fleet.clone()) {
            return None;
        }
        let pair = Pair { trigger: ShadowTrigger::of(trigger), live: None, shadow: None };
        self.pairs.insert(key, pair);
        Some(key)
    }

    /// The live decision for `key`, as applied by `policy`.
    pub fn live(
        &mut self,
        key: u64,
        policy: String,
        promote: &[Promote],
        revert: &[Revert],
    ) -> Option<Difference> {
        let pair = self.pairs.get_mut(&key)?; // gone: the shadow failed
        let actions = Actions { promote: promote.to_vec(), revert: revert.to_vec() };
        pair.live = Some((actions, policy));
        self.complete(key)
    }

    /// The shadow's answer for one trigger.
    pub fn shadowed(&mut self, shadowed: Shadowed) -> Option<Difference> {
        let Some(actions) = shadowed.actions else {
            self.pairs.remove(&shadowed.key); // failed: counted and logged, not compared
            return None;
        };
        let pair = self.pairs.get_mut(&shadowed.key)?;
        pair.shadow = Some((actions, shadowed.shadow));
        self.complete(shadowed.key)
    }

    /// Asked of the shadow and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.worker.outstanding()
    }

    /// The shadow's next answer; `None` only if its thread is gone.
    pub async fn next(&mut self) -> Option<Shadowed> {
        self.worker.next().await
    }

    /// Compares the pair at `key` once both decisions are in.
    fn complete(&mut self, key: u64) -> Option<Difference> {
        let pair = self.pairs.get(&key)?;
        if pair.live.is_none() || pair.shadow.is_none() {
            return None;
        }
        let pair = self.pairs.remove(&key).expect("found above");
        let ((live, policy), (shadow, shadow_name)) =
            (pair.live.expect("checked"), pair.shadow.expect("checked"));
        if live.same_set(&shadow) {
            return None;
        }
        let kind = pair.trigger.kind();
        self.metrics.shadow_differed(&policy, &shadow_name, kind);
        tracing::info!(
            policy,
            shadow = shadow_name,
            trigger = kind,
            live_promote = live.promote.len(),
            live_revert = live.revert.len(),
            shadow_promote = shadow.promote.len(),
            shadow_revert = shadow.revert.len(),
            "the shadow policy decided otherwise"
        );
        Some(Difference { trigger: pair.trigger, live, shadow })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{NativeDefault, PodState};

    /// A pod that applied p1, which passed: the default promotes it.
    fn applied() -> (Trigger, Fleet) {
        let pod = PodState {
            pod: "ns/a".into(),
            applied_plan: Some("p1".into()),
            running_plan: None,
            baseline_plan: None,
        };
        let fleet = Fleet {
            held: Default::default(),
            pods: vec![pod.clone()].into(),
            passed_plans: vec!["p1".into()].into(),
            refused_plans: Arc::from([]),
        };
        (Trigger::Applied(pod), fleet)
    }

    fn shadowing() -> (Shadowing, Arc<PolicyMetrics>) {
        let metrics = Arc::new(PolicyMetrics::default());
        (Shadowing::start(LivePolicy::new(Arc::new(NativeDefault)), metrics.clone()), metrics)
    }

    #[tokio::test]
    async fn a_pair_is_compared_whichever_decision_comes_first() {
        let (mut shadowing, metrics) = shadowing();
        let (trigger, fleet) = applied();
        let promote = [Promote { pod: "ns/a".into(), plan: "p1".into() }];
        // The live decision first, differing: the difference waits for the shadow.
        let key = shadowing.ask(&trigger, &fleet).unwrap();
        assert_eq!(shadowing.live(key, "live".into(), &[], &[]), None);
        let answer = shadowing.next().await.unwrap();
        let difference = shadowing.shadowed(answer).unwrap();
        assert_eq!(difference.trigger, ShadowTrigger::Applied { pod: "ns/a".into() });
        assert_eq!((difference.live.promote.len(), difference.shadow.promote.len()), (0, 1));
        assert_eq!(metrics.shadow_differences("live", "default", "applied"), 1);
        // The shadow first, then the same decision live: nothing.
        let key = shadowing.ask(&trigger, &fleet).unwrap();
        let answer = shadowing.next().await.unwrap();
        assert_eq!(shadowing.shadowed(answer), None);
        assert_eq!(shadowing.live(key, "live".into(), &promote, &[]), None);
        assert_eq!(metrics.shadow_differences("live", "default", "applied"), 1);
        assert!(shadowing.pairs.is_empty(), "every pair done is forgotten");
    }

    #[tokio::test]
    async fn a_trigger_the_shadow_failed_is_not_compared() {
        let (mut shadowing, metrics) = shadowing();
        let (trigger, fleet) = applied();
        let key = shadowing.ask(&trigger, &fleet).unwrap();
        let real = shadowing.next().await.unwrap();
        let failed = Shadowed { key, shadow: "default".into(), actions: None };
        assert_eq!(shadowing.shadowed(failed), None);
        assert_eq!(shadowing.live(key, "live".into(), &[], &[]), None, "nothing to compare with");
        assert_eq!(shadowing.shadowed(real), None);
        assert!(shadowing.pairs.is_empty());
        assert_eq!(metrics.shadow_differences("live", "default", "applied"), 0);
    }
}
