//! The policy host's metrics: failures, fallbacks, dropped items, reloads,
//! decision time, the actions applied and the shadow policy's differences
//! and failures, as `prometheus-client` families. The application owns
//! the registry and the endpoint; it registers these beside its own
//! ([`PolicyMetrics::register`]), so this crate serves no HTTP.

use crate::{PolicyFailure, Promote, Revert, RevertTarget};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

/// Upper bounds of the policy-decision histogram, in seconds.
const DECISION_BUCKETS: [f64; 8] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.005, 0.025, 0.1];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyReason {
    policy: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyRule {
    policy: String,
    rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyFallback {
    policy: String,
    fallback: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadResult {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabel {
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyTarget {
    policy: String,
    /// `baseline` or `plan`: a revert's target, without the plan's id (unbounded).
    to: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShadowDifference {
    policy: String,
    shadow: String,
    trigger: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShadowReason {
    shadow: String,
    reason: &'static str,
}

fn reload_result(accepted: bool) -> ReloadResult {
    ReloadResult { result: if accepted { "accepted" } else { "refused" } }
}

/// The policy host's metrics. Share one (`Arc`) between the seat's worker
/// and the reloader; counters are atomics, so neither waits on a reader.
#[derive(Debug, Default)]
pub struct PolicyMetrics {
    failures: Family<PolicyReason, Counter>,
    dropped: Family<PolicyRule, Counter>,
    fallbacks: Family<PolicyFallback, Counter>,
    sample_failures: Family<PolicyReason, Counter>,
    reloads: Family<ReloadResult, Counter>,
    decision_duration: DecisionHistogram,
    promotions: Family<PolicyLabel, Counter>,
    reverts: Family<PolicyTarget, Counter>,
    shadow_differences: Family<ShadowDifference, Counter>,
    shadow_failures: Family<ShadowReason, Counter>,
    shadow_reloads: Family<ReloadResult, Counter>,
    shadow_sample_failures: Family<ShadowReason, Counter>,
}

/// `Histogram` has no `Default`; this one has the decision buckets.
#[derive(Debug)]
struct DecisionHistogram(Histogram);

impl Default for DecisionHistogram {
    fn default() -> Self {
        DecisionHistogram(Histogram::new(DECISION_BUCKETS))
    }
}

impl PolicyMetrics {
    /// Adds every policy metric to `registry` (counters without `_total`:
    /// the encoder appends it).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "rendergate_policy_failures",
            "Triggers a policy failed, by reason (the fallback decided them)",
            self.failures.clone(),
        );
        registry.register(
            "rendergate_policy_items_dropped",
            "Decision items the host's rules dropped, by rule",
            self.dropped.clone(),
        );
        registry.register(
            "rendergate_policy_fallbacks",
            "Triggers a failing policy left to the fallback, by fallback (default: the built-in decision; none: no decision)",
            self.fallbacks.clone(),
        );
        registry.register(
            "rendergate_policy_sample_failures",
            "Sample triggers a policy failed when it was loaded (at start or reload); it was put in force anyway",
            self.sample_failures.clone(),
        );
        registry.register(
            "rendergate_policy_reloads",
            "Hot reloads of the policy, by result",
            self.reloads.clone(),
        );
        registry.register(
            "rendergate_policy_decision_seconds",
            "Time one decision of a loaded policy component took (the built-in default is not timed)",
            self.decision_duration.0.clone(),
        );
        registry.register(
            "rendergate_policy_output_dropped_bytes",
            "Bytes policy components wrote to stdout/stderr past the 64 KiB kept per decision (process-wide)",
            crate::stdio::dropped_bytes_counter(),
        );
        registry.register(
            "rendergate_policy_promotions",
            "Promotions the gate wrote, after the host's rules, by the policy in force",
            self.promotions.clone(),
        );
        registry.register(
            "rendergate_policy_reverts",
            "Reverts the gate wrote, after the host's rules, by the policy in force and target (baseline or plan)",
            self.reverts.clone(),
        );
        registry.register(
            "rendergate_shadow_differences",
            "Triggers the shadow policy decided otherwise than the live one (compared as sets, after the host's rules), by trigger kind",
            self.shadow_differences.clone(),
        );
        registry.register(
            "rendergate_shadow_failures",
            "Triggers the shadow policy gave no decision for (not compared), by reason; backlog: it was too far behind to be asked",
            self.shadow_failures.clone(),
        );
        registry.register(
            "rendergate_shadow_reloads",
            "Hot reloads of the shadow policy, by result",
            self.shadow_reloads.clone(),
        );
        registry.register(
            "rendergate_shadow_sample_failures",
            "Sample triggers the shadow policy failed when loaded (it is in force anyway), by reason",
            self.shadow_sample_failures.clone(),
        );
    }

    /// A decision the gate wrote, after the host's rules, by the policy in force.
    pub fn applied(&self, policy: &str, promote: &[Promote], revert: &[Revert]) {
        if !promote.is_empty() {
            let key = PolicyLabel { policy: policy.to_owned() };
            self.promotions.get_or_create(&key).inc_by(promote.len() as u64);
        }
        if revert.is_empty() {
            return;
        }
        let to_plan = revert.iter().filter(|r| matches!(r.target, RevertTarget::Plan(_))).count();
        for (to, count) in [("baseline", revert.len() - to_plan), ("plan", to_plan)] {
            if count > 0 {
                let key = PolicyTarget { policy: policy.to_owned(), to };
                self.reverts.get_or_create(&key).inc_by(count as u64);
            }
        }
    }

    /// The shadow decided a trigger of kind `trigger` otherwise than the live `policy`.
    pub fn shadow_differed(&self, policy: &str, shadow: &str, trigger: &'static str) {
        let key =
            ShadowDifference { policy: policy.to_owned(), shadow: shadow.to_owned(), trigger };
        self.shadow_differences.get_or_create(&key).inc();
    }

    /// The shadow gave no decision for a trigger: a [`PolicyFailure::reason`], or `backlog`.
    pub fn shadow_failed(&self, shadow: &str, reason: &'static str) {
        let key = ShadowReason { shadow: shadow.to_owned(), reason };
        self.shadow_failures.get_or_create(&key).inc();
    }

    /// The shadow policy being loaded failed a sample trigger; it is in force anyway.
    pub fn shadow_sample_failed(&self, shadow: &str, failure: &PolicyFailure) {
        let key = ShadowReason { shadow: shadow.to_owned(), reason: failure.reason() };
        self.shadow_sample_failures.get_or_create(&key).inc();
    }

    /// A hot reload of the shadow was accepted or refused.
    pub fn shadow_reloaded(&self, accepted: bool) {
        self.shadow_reloads.get_or_create(&reload_result(accepted)).inc();
    }

    pub fn promotions(&self, policy: &str) -> u64 {
        self.promotions.get(&PolicyLabel { policy: policy.to_owned() }).map_or(0, |c| c.get())
    }

    /// Reverts applied under `policy` to `to`, `baseline` or `plan`.
    pub fn reverts(&self, policy: &str, to: &'static str) -> u64 {
        self.reverts.get(&PolicyTarget { policy: policy.to_owned(), to }).map_or(0, |c| c.get())
    }

    pub fn shadow_differences(&self, policy: &str, shadow: &str, trigger: &'static str) -> u64 {
        let key =
            ShadowDifference { policy: policy.to_owned(), shadow: shadow.to_owned(), trigger };
        self.shadow_differences.get(&key).map_or(0, |c| c.get())
    }

    pub fn shadow_failures(&self, shadow: &str, reason: &'static str) -> u64 {
        let key = ShadowReason { shadow: shadow.to_owned(), reason };
        self.shadow_failures.get(&key).map_or(0, |c| c.get())
    }

    pub fn shadow_reloads(&self, accepted: bool) -> u64 {
        self.shadow_reloads.get(&reload_result(accepted)).map_or(0, |c| c.get())
    }

    /// A policy failed and the fallback decided instead.
    pub fn failed(&self, policy: &str, failure: &PolicyFailure) {
        self.failures
            .get_or_create(&PolicyReason {
                policy: policy.to_owned(),
                reason: failure.reason().into(),
            })
            .inc();
    }

    /// A failing policy's trigger got the fallback (`default` or `none`).
    pub fn fell_back(&self, policy: &str, fallback: &'static str) {
        self.fallbacks.get_or_create(&PolicyFallback { policy: policy.to_owned(), fallback }).inc();
    }

    /// A policy being loaded failed a sample trigger; it is put in force anyway.
    pub fn sample_failed(&self, policy: &str, failure: &PolicyFailure) {
        let key = PolicyReason { policy: policy.to_owned(), reason: failure.reason().into() };
        self.sample_failures.get_or_create(&key).inc();
    }

    /// The host's rules dropped an item of a policy's decision.
    pub fn dropped(&self, policy: &str, rule: &str) {
        self.dropped
            .get_or_create(&PolicyRule { policy: policy.to_owned(), rule: rule.to_owned() })
            .inc();
    }

    /// A hot reload was accepted or refused.
    pub fn reloaded(&self, accepted: bool) {
        self.reloads.get_or_create(&reload_result(accepted)).inc();
    }

    pub fn decided(&self, took: Duration) {
        self.decision_duration.0.observe(took.as_secs_f64());
    }

    pub fn failures(&self, policy: &str, reason: &str) -> u64 {
        let key = PolicyReason { policy: policy.to_owned(), reason: reason.to_owned() };
        self.failures.get(&key).map_or(0, |c| c.get())
    }

    pub fn fallbacks(&self, policy: &str, fallback: &'static str) -> u64 {
        self.fallbacks
            .get(&PolicyFallback { policy: policy.to_owned(), fallback })
            .map_or(0, |c| c.get())
    }

    /// Sample failures of `policy`, every reason together.
    pub fn sample_failures(&self, policy: &str) -> u64 {
        let mut total = 0;
        for reason in PolicyFailure::REASONS {
            let key = PolicyReason { policy: policy.to_owned(), reason: reason.to_owned() };
            total += self.sample_failures.get(&key).map_or(0, |c| c.get());
        }
        total
    }

    pub fn items_dropped(&self, policy: &str, rule: &str) -> u64 {
        let key = PolicyRule { policy: policy.to_owned(), rule: rule.to_owned() };
        self.dropped.get(&key).map_or(0, |c| c.get())
    }

    pub fn reloads(&self, accepted: bool) -> u64 {
        self.reloads.get(&reload_result(accepted)).map_or(0, |c| c.get())
    }
}
