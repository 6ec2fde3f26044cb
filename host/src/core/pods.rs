//! Pod bookkeeping: which render and plan each pod holds, which plan its own
//! HAProxy runs, and the baseline it falls back to.

use policy_core::PodState;
use std::collections::BTreeMap;

/// A pod's latest `applied` report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodReport {
    pub pod: String,
    /// The render the pod holds, when the controller knows it.
    pub render: Option<String>,
    /// The plan the pod holds.
    pub plan: String,
    /// The plan the pod's HAProxy last loaded.
    pub running_plan: Option<String>,
    /// The plan the pod would be reverted to.
    pub baseline_plan: Option<String>,
}

impl PodReport {
    /// The pod as the policy sees it.
    pub fn state(&self) -> PodState {
        PodState {
            pod: self.pod.clone(),
            applied_plan: Some(self.plan.clone()),
            running_plan: self.running_plan.clone(),
            baseline_plan: self.baseline_plan.clone(),
        }
    }
}

/// Every known pod, by name (sorted, so policies see a stable order).
#[derive(Debug, Default)]
pub struct Pods {
    by_name: BTreeMap<String, PodReport>,
}

impl Pods {
    pub fn report(&mut self, report: PodReport) {
        self.by_name.insert(report.pod.clone(), report);
    }

    pub fn get(&self, pod: &str) -> Option<&PodReport> {
        self.by_name.get(pod)
    }

    pub fn terminated(&mut self, pod: &str) {
        self.by_name.remove(pod);
    }

    /// Forgets every pod not in `alive`.
    pub fn discovered(&mut self, alive: &[String]) {
        self.by_name.retain(|name, _| alive.iter().any(|a| a == name));
    }

    /// Whether some pod reports holding this render id.
    pub fn hold_render(&self, render_id: &str) -> bool {
        self.by_name.values().any(|p| p.render.as_deref() == Some(render_id))
    }

    /// Whether some pod reports holding this plan without naming a render:
    /// it holds the latest render of the plan the gate knows.
    pub fn hold_plan(&self, plan: &str) -> bool {
        self.by_name.values().any(|p| p.render.is_none() && p.plan == plan)
    }

    pub fn states(&self) -> Vec<PodState> {
        self.by_name.values().map(PodReport::state).collect()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn clear(&mut self) {
        self.by_name.clear();
    }
}
