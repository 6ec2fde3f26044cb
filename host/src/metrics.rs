//! Every metric of the gate in one `prometheus-client` registry, rendered in
//! Prometheus' text format (0.0.4). Counters, gauges and histograms are
//! atomics, so the check worker never waits on a reader; a labelled family
//! takes a short lock to find its series.

use crate::core::{LatchState, Reason};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rendergate_policy::PolicyMetrics;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The `Content-Type` of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Upper bounds of the check-duration histogram, in seconds.
const BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
const OUTCOMES: [&str; 3] = ["pass", "refused", "unavailable"];
/// `rendergate_latch_state{reason}`: "none" is optimistic.
const LATCH_REASONS: [&str; 4] = ["none", "refused", "unavailable", "term-start"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LayerLabel {
    layer: &'static str,
}

/// The gate's metrics. Share one (`Arc`) between the gate, the policy
/// reloader and the metrics endpoint.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    rejected: Counter,
    pinned: Family<ReasonLabel, Gauge>,
    latch: Family<ReasonLabel, Gauge>,
    checks: Family<OutcomeLabel, Counter>,
    sandbox_failures: Counter,
    check_duration: Histogram,
    remembered: Counter,
    renders_retained: Gauge,
    policy: Arc<PolicyMetrics>,
    sandbox_layers: Family<LayerLabel, Gauge>,
    /// The sandbox probe runs once: the first [`Metrics::set_sandbox_layers`] wins.
    sandbox_set: OnceLock<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        // Counters are registered without `_total`: the encoder appends it.
        let rejected = Counter::default();
        registry.register(
            "rendergate_config_rejected",
            "Renders HAProxy refused (remembered verdicts excluded)",
            rejected.clone(),
        );
        let pinned = Family::<ReasonLabel, Gauge>::default();
        registry.register(
            "rendergate_config_pinned",
            "1 while two newest renders in a row failed; reason says whether HAProxy refused both",
            pinned.clone(),
        );
        let latch = Family::<ReasonLabel, Gauge>::default();
        registry.register(
            "rendergate_latch_state",
            "1 for the latch's state: reason=none is optimistic; refused, unavailable or term-start is pessimistic for that reason",
            latch.clone(),
        );
        let checks = Family::<OutcomeLabel, Counter>::default();
        registry.register("rendergate_checks", "Checks run, by outcome", checks.clone());
        let check_duration = Histogram::new(BUCKETS);
        registry.register(
            "rendergate_check_duration_seconds",
            "Time one check took",
            check_duration.clone(),
        );
        let remembered = Counter::default();
        registry.register(
            "rendergate_verdicts_remembered",
            "Verdicts settled from verdict memory, without running haproxy",
            remembered.clone(),
        );
        let renders_retained = Gauge::default();
        registry.register(
            "rendergate_renders_retained",
            "Renders the gate holds: the newest and the superseded ones still kept",
            renders_retained.clone(),
        );
        let policy = Arc::new(PolicyMetrics::default());
        policy.register(&mut registry);
        let sandbox_failures = Counter::default();
        registry.register(
            "rendergate_check_sandbox_failures",
            "Checks that could not run because their sandbox or world could not be set up (/healthz answers 503 until a check runs again)",
            sandbox_failures.clone(),
        );
        let sandbox_layers = Family::<LayerLabel, Gauge>::default();
        registry.register(
            "rendergate_sandbox_layer",
            "1 if checks run with this sandbox layer, else 0",
            sandbox_layers.clone(),
        );

        // Series that exist from the start, so a query never finds nothing.
        for outcome in OUTCOMES {
            checks.get_or_create_owned(&OutcomeLabel { outcome });
        }
        let metrics = Metrics {
            registry,
            rejected,
            pinned,
            latch,
            checks,
            sandbox_failures,
            check_duration,
            remembered,
            renders_retained,
            policy,
            sandbox_layers,
            sandbox_set: OnceLock::new(),
        };
        metrics.set_pinned(None);
        metrics.set_latch(LatchState::Optimistic);
        metrics
    }

    /// One real `haproxy -c` finished (remembered verdicts are not checks).
    pub fn check_finished(&self, outcome_label: &str, took: Duration) {
        if let Some(outcome) = OUTCOMES.iter().find(|o| **o == outcome_label) {
            self.checks.get_or_create(&OutcomeLabel { outcome }).inc();
        }
        if outcome_label == "refused" {
            self.rejected.inc();
        }
        self.check_duration.observe(took.as_secs_f64());
    }

    /// A check could not run because its sandbox could not be set up.
    pub fn check_sandbox_failed(&self) {
        self.sandbox_failures.inc();
    }

    /// A verdict was settled from memory, no check run.
    pub fn verdict_remembered(&self) {
        self.remembered.inc();
    }

    pub fn set_pinned(&self, pinned: Option<Reason>) {
        for reason in [Reason::Refused, Reason::Unavailable] {
            let on = pinned == Some(reason);
            self.pinned.get_or_create(&ReasonLabel { reason: reason.as_str() }).set(i64::from(on));
        }
    }

    /// The latch's state: `rendergate_latch_state{reason}` is 1 for it, 0 for the others.
    pub fn set_latch(&self, state: LatchState) {
        let current = match state {
            LatchState::Optimistic => "none",
            LatchState::Pessimistic(reason) => reason.as_str(),
        };
        for reason in LATCH_REASONS {
            self.latch.get_or_create(&ReasonLabel { reason }).set(i64::from(reason == current));
        }
    }

    /// How many renders the gate holds now.
    pub fn set_renders_retained(&self, renders: usize) {
        self.renders_retained.set(i64::try_from(renders).unwrap_or(i64::MAX));
    }

    /// The policy host's metrics, registered in this registry.
    pub fn policy(&self) -> &Arc<PolicyMetrics> {
        &self.policy
    }

    /// Which sandbox layers checks get (`rendergate_sandbox_layer{layer}`);
    /// the first call wins, the probe runs once.
    pub fn set_sandbox_layers(&self, layers: Vec<(&'static str, bool)>) {
        if self.sandbox_set.set(()).is_ok() {
            for (layer, on) in layers {
                self.sandbox_layers.get_or_create(&LayerLabel { layer }).set(i64::from(on));
            }
        }
    }

    /// HAProxy refusals counted so far.
    pub fn rejected(&self) -> u64 {
        self.rejected.get()
    }

    pub fn checks(&self, outcome_label: &str) -> u64 {
        match OUTCOMES.iter().find(|o| **o == outcome_label) {
            Some(outcome) => self.checks.get(&OutcomeLabel { outcome }).map_or(0, |c| c.get()),
            None => 0,
        }
    }

    /// Verdicts settled from memory so far.
    pub fn remembered(&self) -> u64 {
        self.remembered.get()
    }

    /// The Prometheus text exposition (format 0.0.4, [`CONTENT_TYPE`]) of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rendergate_policy::PolicyFailure;

    #[test]
    fn refusals_count_as_rejections_and_durations_fill_buckets() {
        let m = Metrics::default();
        m.check_finished("refused", Duration::from_millis(30));
        m.check_finished("pass", Duration::from_millis(3));
        m.check_finished("unavailable", Duration::from_secs(31));
        m.set_pinned(Some(Reason::Unavailable));
        let text = m.render();
        assert_eq!(m.rejected(), 1);
        assert_eq!(m.checks("pass"), 1);
        assert!(text.contains("# TYPE rendergate_config_rejected_total counter\n"), "{text}");
        assert!(text.contains("rendergate_config_rejected_total 1\n"), "{text}");
        assert!(text.contains("rendergate_checks_total{outcome=\"unavailable\"} 1\n"), "{text}");
        assert!(text.contains("rendergate_config_pinned{reason=\"unavailable\"} 1\n"), "{text}");
        assert!(text.contains("rendergate_config_pinned{reason=\"refused\"} 0\n"), "{text}");
        assert!(text.contains("# TYPE rendergate_check_duration_seconds histogram\n"), "{text}");
        assert!(
            text.contains("rendergate_check_duration_seconds_bucket{le=\"0.005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("rendergate_check_duration_seconds_bucket{le=\"0.05\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("rendergate_check_duration_seconds_bucket{le=\"30\"} 2\n"), "{text}");
        assert!(
            text.contains("rendergate_check_duration_seconds_bucket{le=\"+Inf\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("rendergate_check_duration_seconds_count 3\n"), "{text}");
    }

    #[test]
    fn every_series_a_dashboard_needs_is_there_from_the_start() {
        let m = Metrics::default();
        let text = m.render();
        for line in [
            "rendergate_config_rejected_total 0\n",
            "rendergate_config_pinned{reason=\"refused\"} 0\n",
            "rendergate_config_pinned{reason=\"unavailable\"} 0\n",
            "rendergate_latch_state{reason=\"none\"} 1\n",
            "rendergate_latch_state{reason=\"refused\"} 0\n",
            "rendergate_checks_total{outcome=\"pass\"} 0\n",
            "rendergate_verdicts_remembered_total 0\n",
            "rendergate_renders_retained 0\n",
            "rendergate_check_duration_seconds_count 0\n",
            "rendergate_policy_decision_seconds_count 0\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("_total_total"), "{text}");
    }

    #[test]
    fn the_latch_state_is_one_for_the_current_reason_only() {
        let m = Metrics::default();
        m.set_latch(LatchState::Pessimistic(Reason::Refused));
        m.set_renders_retained(3);
        m.verdict_remembered();
        let text = m.render();
        assert!(text.contains("rendergate_latch_state{reason=\"none\"} 0\n"), "{text}");
        assert!(text.contains("rendergate_latch_state{reason=\"refused\"} 1\n"), "{text}");
        assert!(text.contains("rendergate_latch_state{reason=\"unavailable\"} 0\n"), "{text}");
        assert!(text.contains("rendergate_renders_retained 3\n"), "{text}");
        assert!(text.contains("rendergate_verdicts_remembered_total 1\n"), "{text}");
        assert_eq!(m.remembered(), 1);
    }

    #[test]
    fn policy_metrics_carry_their_labels_escaped() {
        let m = Metrics::default();
        let p = m.policy();
        p.failed("odd \"name\"", &PolicyFailure::Trap("x".into()));
        p.dropped("p", "unknown-pod");
        p.dropped("p", "unknown-pod");
        p.reloaded(false);
        p.decided(Duration::from_micros(70));
        assert_eq!(p.failures("odd \"name\"", "trap"), 1);
        assert_eq!(p.failures("other", "trap"), 0);
        assert_eq!(p.items_dropped("p", "unknown-pod"), 2);
        assert_eq!((p.reloads(false), p.reloads(true)), (1, 0));
        let text = m.render();
        assert!(
            text.contains(
                "rendergate_policy_failures_total{policy=\"odd \\\"name\\\"\",reason=\"trap\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "rendergate_policy_items_dropped_total{policy=\"p\",rule=\"unknown-pod\"} 2\n"
            ),
            "{text}"
        );
        assert!(text.contains("rendergate_policy_reloads_total{result=\"refused\"} 1\n"), "{text}");
        assert!(
            !text.contains("rendergate_policy_reloads_total{result=\"accepted\"}"),
            "reading creates no series: {text}"
        );
        assert!(
            text.contains("rendergate_policy_decision_seconds_bucket{le=\"0.0001\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn sandbox_layers_are_a_gauge_once_set() {
        let m = Metrics::default();
        assert!(!m.render().contains("rendergate_sandbox_layer{"));
        m.set_sandbox_layers(vec![("landlock", true), ("netns", false)]);
        m.set_sandbox_layers(vec![("landlock", false)]);
        let text = m.render();
        assert!(text.contains("# TYPE rendergate_sandbox_layer gauge\n"), "{text}");
        assert!(text.contains("rendergate_sandbox_layer{layer=\"landlock\"} 1\n"), "{text}");
        assert!(text.contains("rendergate_sandbox_layer{layer=\"netns\"} 0\n"), "{text}");
    }
}
