//! Every metric of the gate in one registry, rendered in Prometheus' text
//! format. Lock-free counters, so the check worker never waits on a reader.

use crate::core::Reason;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the check-duration histogram, in seconds.
const BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
/// Upper bounds of the policy-decision histogram, in seconds.
const DECISION_BUCKETS: [f64; 8] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.005, 0.025, 0.1];
const OUTCOMES: [&str; 3] = ["pass", "refused", "unavailable"];

#[derive(Debug, Default)]
pub struct Metrics {
    rejected: AtomicU64,
    /// 0 = not pinned, 1 = pinned (refused), 2 = pinned (unavailable).
    pinned: AtomicU64,
    checks: [AtomicU64; 3],
    duration_buckets: [AtomicU64; BUCKETS.len()],
    duration_count: AtomicU64,
    duration_sum_micros: AtomicU64,
    /// (policy, reason) → count
    policy_failures: Mutex<BTreeMap<(String, String), u64>>,
    /// (policy, rule) → count
    policy_dropped: Mutex<BTreeMap<(String, String), u64>>,
    /// (result) → count: "accepted" or "refused"
    policy_reloads: Mutex<BTreeMap<String, u64>>,
    decision_buckets: [AtomicU64; DECISION_BUCKETS.len()],
    decision_count: AtomicU64,
    decision_sum_nanos: AtomicU64,
    /// Each sandbox layer and whether checks get it, set once at start-up.
    sandbox_layers: std::sync::OnceLock<Vec<(&'static str, bool)>>,
}

impl Metrics {
    /// One real `haproxy -c` finished (remembered verdicts are not checks).
    pub fn check_finished(&self, outcome_label: &str, took: Duration) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome_label) {
            self.checks[i].fetch_add(1, Relaxed);
        }
        if outcome_label == "refused" {
            self.rejected.fetch_add(1, Relaxed);
        }
        let secs = took.as_secs_f64();
        for (bound, bucket) in BUCKETS.iter().zip(&self.duration_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Relaxed);
            }
        }
        self.duration_count.fetch_add(1, Relaxed);
        self.duration_sum_micros.fetch_add(took.as_micros() as u64, Relaxed);
    }

    pub fn set_pinned(&self, pinned: Option<Reason>) {
        let v = match pinned {
            None => 0,
            Some(Reason::Refused) => 1,
            Some(Reason::Unavailable) => 2,
        };
        self.pinned.store(v, Relaxed);
    }

    /// A policy failed (`reason`: deadline, fuel, memory, trap, too-large,
    /// bad-component) and the default decided instead.
    pub fn policy_failed(&self, policy: &str, reason: &str) {
        *self.policy_failures.lock().unwrap().entry((policy.to_owned(), reason.to_owned())).or_default() += 1;
    }

    /// The host's rules dropped an item of a policy's decision.
    pub fn policy_dropped(&self, policy: &str, rule: &str) {
        *self.policy_dropped.lock().unwrap().entry((policy.to_owned(), rule.to_owned())).or_default() += 1;
    }

    /// Which sandbox layers checks get (`rendergate_sandbox_layer{layer}`);
    /// the first call wins, the probe runs once.
    pub fn set_sandbox_layers(&self, layers: Vec<(&'static str, bool)>) {
        let _ = self.sandbox_layers.set(layers);
    }

    /// A hot reload was accepted or refused.
    pub fn policy_reload(&self, accepted: bool) {
        let result = if accepted { "accepted" } else { "refused" };
        *self.policy_reloads.lock().unwrap().entry(result.to_owned()).or_default() += 1;
    }

    pub fn policy_decided(&self, took: Duration) {
        let secs = took.as_secs_f64();
        for (bound, bucket) in DECISION_BUCKETS.iter().zip(&self.decision_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Relaxed);
            }
        }
        self.decision_count.fetch_add(1, Relaxed);
        self.decision_sum_nanos.fetch_add(took.as_nanos() as u64, Relaxed);
    }

    pub fn policy_failures(&self, policy: &str, reason: &str) -> u64 {
        self.policy_failures.lock().unwrap().get(&(policy.to_owned(), reason.to_owned())).copied().unwrap_or(0)
    }

    pub fn policy_items_dropped(&self, policy: &str, rule: &str) -> u64 {
        self.policy_dropped.lock().unwrap().get(&(policy.to_owned(), rule.to_owned())).copied().unwrap_or(0)
    }

    pub fn policy_reloads(&self, accepted: bool) -> u64 {
        let result = if accepted { "accepted" } else { "refused" };
        self.policy_reloads.lock().unwrap().get(result).copied().unwrap_or(0)
    }

    /// HAProxy refusals counted so far.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Relaxed)
    }

    pub fn checks(&self, outcome_label: &str) -> u64 {
        OUTCOMES.iter().position(|o| *o == outcome_label).map_or(0, |i| self.checks[i].load(Relaxed))
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let w = &mut out;
        let _ = writeln!(w, "# HELP rendergate_config_rejected_total Renders HAProxy refused (remembered verdicts excluded).");
        let _ = writeln!(w, "# TYPE rendergate_config_rejected_total counter");
        let _ = writeln!(w, "rendergate_config_rejected_total {}", self.rejected());
        let pinned = self.pinned.load(Relaxed);
        let _ = writeln!(w, "# HELP rendergate_config_pinned 1 while two newest renders in a row failed; reason says whether HAProxy refused both.");
        let _ = writeln!(w, "# TYPE rendergate_config_pinned gauge");
        let _ = writeln!(w, "rendergate_config_pinned{{reason=\"refused\"}} {}", u8::from(pinned == 1));
        let _ = writeln!(w, "rendergate_config_pinned{{reason=\"unavailable\"}} {}", u8::from(pinned == 2));
        let _ = writeln!(w, "# HELP rendergate_checks_total Checks run, by outcome.");
        let _ = writeln!(w, "# TYPE rendergate_checks_total counter");
        for (label, count) in OUTCOMES.iter().zip(&self.checks) {
            let _ = writeln!(w, "rendergate_checks_total{{outcome=\"{label}\"}} {}", count.load(Relaxed));
        }
        let _ = writeln!(w, "# HELP rendergate_check_duration_seconds Time one check took.");
        let _ = writeln!(w, "# TYPE rendergate_check_duration_seconds histogram");
        for (bound, bucket) in BUCKETS.iter().zip(&self.duration_buckets) {
            let _ = writeln!(w, "rendergate_check_duration_seconds_bucket{{le=\"{bound}\"}} {}", bucket.load(Relaxed));
        }
        let count = self.duration_count.load(Relaxed);
        let _ = writeln!(w, "rendergate_check_duration_seconds_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.duration_sum_micros.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(w, "rendergate_check_duration_seconds_sum {sum}");
        let _ = writeln!(w, "rendergate_check_duration_seconds_count {count}");
        let _ = writeln!(w, "# HELP rendergate_policy_failures_total Triggers the default decided because the policy failed, by reason.");
        let _ = writeln!(w, "# TYPE rendergate_policy_failures_total counter");
        for ((policy, reason), n) in self.policy_failures.lock().unwrap().iter() {
            let _ = writeln!(w, "rendergate_policy_failures_total{{policy=\"{}\",reason=\"{reason}\"}} {n}", escape(policy));
        }
        let _ = writeln!(w, "# HELP rendergate_policy_items_dropped_total Decision items the host's rules dropped, by rule.");
        let _ = writeln!(w, "# TYPE rendergate_policy_items_dropped_total counter");
        for ((policy, rule), n) in self.policy_dropped.lock().unwrap().iter() {
            let _ = writeln!(w, "rendergate_policy_items_dropped_total{{policy=\"{}\",rule=\"{rule}\"}} {n}", escape(policy));
        }
        let _ = writeln!(w, "# HELP rendergate_policy_reloads_total Hot reloads of the policy, by result.");
        let _ = writeln!(w, "# TYPE rendergate_policy_reloads_total counter");
        for (result, n) in self.policy_reloads.lock().unwrap().iter() {
            let _ = writeln!(w, "rendergate_policy_reloads_total{{result=\"{result}\"}} {n}");
        }
        let _ = writeln!(w, "# HELP rendergate_policy_decision_seconds Time one policy decision took.");
        let _ = writeln!(w, "# TYPE rendergate_policy_decision_seconds histogram");
        for (bound, bucket) in DECISION_BUCKETS.iter().zip(&self.decision_buckets) {
            let _ = writeln!(w, "rendergate_policy_decision_seconds_bucket{{le=\"{bound}\"}} {}", bucket.load(Relaxed));
        }
        let count = self.decision_count.load(Relaxed);
        let _ = writeln!(w, "rendergate_policy_decision_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(w, "rendergate_policy_decision_seconds_sum {}", self.decision_sum_nanos.load(Relaxed) as f64 / 1e9);
        let _ = writeln!(w, "rendergate_policy_decision_seconds_count {count}");
        if let Some(layers) = self.sandbox_layers.get() {
            let _ = writeln!(w, "# HELP rendergate_sandbox_layer 1 if checks run with this sandbox layer, else 0.");
            let _ = writeln!(w, "# TYPE rendergate_sandbox_layer gauge");
            for (layer, on) in layers {
                let _ = writeln!(w, "rendergate_sandbox_layer{{layer=\"{layer}\"}} {}", u8::from(*on));
            }
        }
        out
    }
}

/// A label value as Prometheus' text format wants it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_count_as_rejections_and_durations_fill_buckets() {
        let m = Metrics::default();
        m.check_finished("refused", Duration::from_millis(30));
        m.check_finished("pass", Duration::from_millis(3));
        m.check_finished("unavailable", Duration::from_secs(31));
        m.set_pinned(Some(Reason::Unavailable));
        let text = m.render();
        assert_eq!(m.rejected(), 1);
        assert!(text.contains("rendergate_config_rejected_total 1\n"));
        assert!(text.contains("rendergate_checks_total{outcome=\"unavailable\"} 1\n"));
        assert!(text.contains("rendergate_config_pinned{reason=\"unavailable\"} 1\n"));
        assert!(text.contains("rendergate_config_pinned{reason=\"refused\"} 0\n"));
        assert!(text.contains("rendergate_check_duration_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("rendergate_check_duration_seconds_bucket{le=\"0.05\"} 2\n"));
        assert!(text.contains("rendergate_check_duration_seconds_bucket{le=\"30\"} 2\n"));
        assert!(text.contains("rendergate_check_duration_seconds_count 3\n"));
    }

    #[test]
    fn sandbox_layers_are_a_gauge_once_set() {
        let m = Metrics::default();
        assert!(!m.render().contains("rendergate_sandbox_layer"));
        m.set_sandbox_layers(vec![("landlock", true), ("netns", false)]);
        m.set_sandbox_layers(vec![("landlock", false)]);
        let text = m.render();
        assert!(text.contains("# TYPE rendergate_sandbox_layer gauge\n"), "{text}");
        assert!(text.contains("rendergate_sandbox_layer{layer=\"landlock\"} 1\n"), "{text}");
        assert!(text.contains("rendergate_sandbox_layer{layer=\"netns\"} 0\n"), "{text}");
    }
}
