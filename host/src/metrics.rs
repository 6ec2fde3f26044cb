//! Every metric of the gate in one registry, rendered in Prometheus' text
//! format. Lock-free counters, so the check worker never waits on a reader.

use crate::core::Reason;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the check-duration histogram, in seconds.
const BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
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
    policy_fallbacks: AtomicU64,
    policy_dropped: AtomicU64,
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

    pub fn policy_fell_back(&self) {
        self.policy_fallbacks.fetch_add(1, Relaxed);
    }

    pub fn policy_dropped(&self, items: usize) {
        self.policy_dropped.fetch_add(items as u64, Relaxed);
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
        let _ = writeln!(w, "# HELP rendergate_policy_fallbacks_total Triggers decided by the default because the policy failed.");
        let _ = writeln!(w, "# TYPE rendergate_policy_fallbacks_total counter");
        let _ = writeln!(w, "rendergate_policy_fallbacks_total {}", self.policy_fallbacks.load(Relaxed));
        let _ = writeln!(w, "# HELP rendergate_policy_dropped_total Policy items dropped by the host's rules.");
        let _ = writeln!(w, "# TYPE rendergate_policy_dropped_total counter");
        let _ = writeln!(w, "rendergate_policy_dropped_total {}", self.policy_dropped.load(Relaxed));
        out
    }
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
}
