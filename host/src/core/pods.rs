//! Pod bookkeeping: which render and plan each pod holds, which plan its own
//! HAProxy runs, and the baseline it falls back to.

use policy_core::PodState;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

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

/// Every known pod. Kept three ways so that no event costs time in
/// proportion to the fleet: the reports by name; the policy's view, sorted by
/// name and shared (`Arc`, updated in place when no decision still holds it);
/// and how many pods hold each render id (or, without an id, each plan).
#[derive(Debug, Default)]
pub struct Pods {
    by_name: BTreeMap<String, PodReport>,
    states: Arc<Vec<PodState>>,
    by_render: HashMap<String, usize>,
    by_plan_only: HashMap<String, usize>,
}

impl Pods {
    pub fn report(&mut self, report: PodReport) {
        self.hold(&report);
        let state = report.state();
        let states = Arc::make_mut(&mut self.states);
        match states.binary_search_by(|s| s.pod.cmp(&state.pod)) {
            Ok(at) => states[at] = state,
            Err(at) => states.insert(at, state),
        }
        if let Some(old) = self.by_name.insert(report.pod.clone(), report) {
            self.unhold(&old);
        }
    }

    pub fn get(&self, pod: &str) -> Option<&PodReport> {
        self.by_name.get(pod)
    }

    pub fn terminated(&mut self, pod: &str) {
        if let Some(old) = self.by_name.remove(pod) {
            self.unhold(&old);
            let states = Arc::make_mut(&mut self.states);
            if let Ok(at) = states.binary_search_by(|s| s.pod.as_str().cmp(pod)) {
                states.remove(at);
            }
        }
    }

    /// Forgets every pod not in `alive`.
    pub fn discovered(&mut self, alive: &[String]) {
        let alive: HashSet<&str> = alive.iter().map(String::as_str).collect();
        let gone: Vec<String> = self.by_name.keys().filter(|name| !alive.contains(name.as_str())).cloned().collect();
        for pod in gone {
            self.terminated(&pod);
        }
    }

    /// Whether some pod reports holding this render id.
    pub fn hold_render(&self, render_id: &str) -> bool {
        self.by_render.contains_key(render_id)
    }

    /// Whether some pod reports holding this plan without naming a render:
    /// it holds the latest render of the plan the gate knows.
    pub fn hold_plan(&self, plan: &str) -> bool {
        self.by_plan_only.contains_key(plan)
    }

    /// The pods as the policy sees them: shared, sorted by name.
    pub fn states(&self) -> Arc<Vec<PodState>> {
        self.states.clone()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn clear(&mut self) {
        *self = Pods::default();
    }

    fn hold(&mut self, report: &PodReport) {
        let (map, key) = self.holding(report);
        *map.entry(key).or_default() += 1;
    }

    fn unhold(&mut self, report: &PodReport) {
        let (map, key) = self.holding(report);
        if let Some(n) = map.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                map.remove(&key);
            }
        }
    }

    fn holding(&mut self, report: &PodReport) -> (&mut HashMap<String, usize>, String) {
        match &report.render {
            Some(render) => (&mut self.by_render, render.clone()),
            None => (&mut self.by_plan_only, report.plan.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(pod: &str, render: Option<&str>, plan: &str) -> PodReport {
        PodReport { pod: pod.into(), render: render.map(Into::into), plan: plan.into(), running_plan: None, baseline_plan: None }
    }

    #[test]
    fn holds_follow_reports_terminations_and_discovery() {
        let mut pods = Pods::default();
        pods.report(report("ns/b", Some("r-1"), "p1"));
        pods.report(report("ns/a", Some("r-1"), "p1"));
        pods.report(report("ns/c", None, "p2"));
        assert!(pods.hold_render("r-1") && pods.hold_plan("p2") && !pods.hold_plan("p1"));
        let names: Vec<_> = pods.states().iter().map(|s| s.pod.clone()).collect();
        assert_eq!(names, ["ns/a", "ns/b", "ns/c"], "the policy's view is sorted by name");
        pods.report(report("ns/a", Some("r-2"), "p2"));
        assert!(pods.hold_render("r-1"), "ns/b still holds r-1");
        pods.terminated("ns/b");
        assert!(!pods.hold_render("r-1") && pods.hold_render("r-2"));
        pods.discovered(&["ns/a".into()]);
        assert!(!pods.hold_plan("p2"));
        assert_eq!(pods.states().len(), 1);
        assert_eq!(pods.states()[0].applied_plan.as_deref(), Some("p2"));
    }

    #[test]
    fn an_unshared_view_is_updated_in_place_and_a_shared_one_is_left_alone() {
        let mut pods = Pods::default();
        pods.report(report("ns/a", Some("r-1"), "p1"));
        let before = pods.states();
        pods.report(report("ns/a", Some("r-2"), "p2"));
        assert_eq!(before[0].applied_plan.as_deref(), Some("p1"), "a decision's fleet never changes under it");
        drop(before);
        let ptr = Arc::as_ptr(&pods.states);
        pods.report(report("ns/a", Some("r-3"), "p3"));
        assert_eq!(Arc::as_ptr(&pods.states), ptr, "no copy when nobody else holds the view");
    }
}
