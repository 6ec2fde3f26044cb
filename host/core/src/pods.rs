//! Pod bookkeeping: which render and plan each pod holds, which plan its own
//! HAProxy runs, and the baseline it falls back to.

use policy_core::{Name, PodState};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The pod names of a `pods_discovered` event, in one string: a list of
/// short names costs what they spell, not a string per name (docs/behaviour.md,
/// "Bounded work").
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PodList {
    names: String,
    /// Where each name ends in `names`.
    ends: Vec<usize>,
}

impl PodList {
    pub fn push(&mut self, name: &str) {
        self.names.push_str(name);
        self.ends.push(self.names.len());
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(start, end)| &self.names[start..end])
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

impl<S: AsRef<str>> FromIterator<S> for PodList {
    fn from_iter<I: IntoIterator<Item = S>>(names: I) -> Self {
        let mut list = PodList::default();
        for name in names {
            list.push(name.as_ref());
        }
        list
    }
}

impl std::fmt::Debug for PodList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A pod's latest `applied` report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodReport {
    pub pod: Name,
    /// The render the pod holds, when the controller knows it.
    pub render: Option<Name>,
    /// The plan the pod holds.
    pub plan: Name,
    /// The plan the pod's HAProxy last loaded.
    pub running_plan: Option<Name>,
    /// The plan the pod would be reverted to.
    pub baseline_plan: Option<Name>,
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
/// A report from a known pod allocates nothing here (names are shared), and
/// finds the pod's place in the view without a search.
#[derive(Debug, Default)]
pub struct Pods {
    by_name: HashMap<Name, Held>,
    states: Arc<Vec<PodState>>,
    holders: Holders,
    /// Pod → the render its report names, shared with decisions like
    /// `states` (the host's rules read it: promotion to judged content).
    renders: Arc<HashMap<Name, Name>>,
}

/// A pod's report and where its state sits in the sorted view. The slot is a
/// hint: a new pod inserted before it shifts it, and the next lookup that
/// misses searches and corrects it.
#[derive(Debug)]
struct Held {
    report: PodReport,
    slot: usize,
}

/// How many pods hold each render id, or, for reports without one, each plan.
#[derive(Debug, Default)]
struct Holders {
    by_render: HashMap<Name, usize>,
    by_plan_only: HashMap<Name, usize>,
}

impl Pods {
    /// Records a pod's report. Returns the pod as the policy now sees it, or
    /// `None` when the report repeats the pod's last one (nothing changed).
    pub fn report(&mut self, report: PodReport) -> Option<PodState> {
        let Pods { by_name, states, holders, renders } = self;
        if let Some(held) = by_name.get_mut(&*report.pod) {
            if held.report == report {
                return None;
            }
            set_render(renders, &report);
            holders.add(&report);
            let old = std::mem::replace(&mut held.report, report);
            holders.remove(&old);
            return Some(set_state(states, &held.report, &mut held.slot));
        }
        holders.add(&report);
        set_render(renders, &report);
        let held = by_name.entry(report.pod.clone()).or_insert(Held { report, slot: 0 });
        Some(set_state(states, &held.report, &mut held.slot))
    }

    pub fn terminated(&mut self, pod: &str) {
        if let Some(old) = self.by_name.remove(pod) {
            self.holders.remove(&old.report);
            if old.report.render.is_some() {
                Arc::make_mut(&mut self.renders).remove(pod);
            }
            let states = Arc::make_mut(&mut self.states);
            if let Ok(at) = find(states, pod, old.slot) {
                states.remove(at);
            }
        }
    }

    /// Forgets every pod not in `alive`.
    pub fn discovered(&mut self, alive: &PodList) {
        // A set of the known pods that are listed, not of the list: its
        // memory follows the fleet the gate keeps, not the line it was sent.
        let listed: HashSet<&Name> = alive
            .iter()
            .filter_map(|name| self.by_name.get_key_value(name))
            .map(|(k, _)| k)
            .collect();
        let gone: Vec<Name> =
            self.by_name.keys().filter(|name| !listed.contains(name)).cloned().collect();
        for pod in gone {
            self.terminated(&pod);
        }
    }

    /// Whether some pod reports holding this render id.
    pub fn hold_render(&self, render_id: &str) -> bool {
        self.holders.by_render.contains_key(render_id)
    }

    /// Whether some pod reports holding this plan without naming a render:
    /// it holds the latest render of the plan the gate knows.
    pub fn hold_plan(&self, plan: &str) -> bool {
        self.holders.by_plan_only.contains_key(plan)
    }

    /// Pod → the render its report names (pods whose report names none are absent).
    pub fn renders(&self) -> Arc<HashMap<Name, Name>> {
        self.renders.clone()
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
}

/// Brings `renders` up to date with `report` (copied only when a decision
/// still holds the shared map and the entry changes).
fn set_render(renders: &mut Arc<HashMap<Name, Name>>, report: &PodReport) {
    match &report.render {
        Some(render) if renders.get(&report.pod) != Some(render) => {
            Arc::make_mut(renders).insert(report.pod.clone(), render.clone());
        }
        None if renders.contains_key(&report.pod) => {
            Arc::make_mut(renders).remove(&report.pod);
        }
        _ => {}
    }
}

/// Where `pod` sits in the sorted view (or would be inserted): at `hint`
/// if it is still there, else found by binary search.
fn find(states: &[PodState], pod: &str, hint: usize) -> Result<usize, usize> {
    match states.get(hint) {
        Some(state) if *state.pod == *pod => Ok(hint),
        _ => states.binary_search_by(|s| (*s.pod).cmp(pod)),
    }
}

/// Brings the policy's view of one pod up to date, in place, and returns a
/// copy for the trigger (names are shared: the copy copies pointers).
fn set_state(states: &mut Arc<Vec<PodState>>, report: &PodReport, slot: &mut usize) -> PodState {
    let states = Arc::make_mut(states);
    match find(states, &report.pod, *slot) {
        Ok(at) => {
            *slot = at;
            let state = &mut states[at];
            state.applied_plan = Some(report.plan.clone());
            state.running_plan.clone_from(&report.running_plan);
            state.baseline_plan.clone_from(&report.baseline_plan);
            state.clone()
        }
        Err(at) => {
            *slot = at;
            states.insert(at, report.state());
            states[at].clone()
        }
    }
}

impl Holders {
    fn add(&mut self, report: &PodReport) {
        let (map, key) = self.counts(report);
        match map.get_mut(key) {
            Some(n) => *n += 1,
            None => {
                map.insert(key.clone(), 1);
            }
        }
    }

    fn remove(&mut self, report: &PodReport) {
        let (map, key) = self.counts(report);
        if let Some(n) = map.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                map.remove(key);
            }
        }
    }

    fn counts<'a>(&'a mut self, report: &'a PodReport) -> (&'a mut HashMap<Name, usize>, &'a Name) {
        match &report.render {
            Some(render) => (&mut self.by_render, render),
            None => (&mut self.by_plan_only, &report.plan),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(pod: &str, render: Option<&str>, plan: &str) -> PodReport {
        PodReport {
            pod: pod.into(),
            render: render.map(Into::into),
            plan: plan.into(),
            running_plan: None,
            baseline_plan: None,
        }
    }

    #[test]
    fn holds_follow_reports_terminations_and_discovery() {
        let mut pods = Pods::default();
        pods.report(report("ns/b", Some("r-1"), "p1"));
        pods.report(report("ns/a", Some("r-1"), "p1"));
        pods.report(report("ns/c", None, "p2"));
        assert!(pods.hold_render("r-1") && pods.hold_plan("p2") && !pods.hold_plan("p1"));
        let states = pods.states();
        let names: Vec<&str> = states.iter().map(|s| &*s.pod).collect();
        assert_eq!(names, ["ns/a", "ns/b", "ns/c"], "the policy's view is sorted by name");
        pods.report(report("ns/a", Some("r-2"), "p2"));
        assert!(pods.hold_render("r-1"), "ns/b still holds r-1");
        pods.terminated("ns/b");
        assert!(!pods.hold_render("r-1") && pods.hold_render("r-2"));
        pods.discovered(&["ns/a"].into_iter().collect());
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
        assert_eq!(
            before[0].applied_plan.as_deref(),
            Some("p1"),
            "a decision's fleet never changes under it"
        );
        drop(before);
        let ptr = Arc::as_ptr(&pods.states);
        let state = pods.report(report("ns/a", Some("r-3"), "p3")).expect("a new report");
        assert_eq!(Arc::as_ptr(&pods.states), ptr, "no copy when nobody else holds the view");
        assert_eq!(state, pods.states()[0], "the trigger's copy is the view's pod");
        assert_eq!(
            pods.report(report("ns/a", Some("r-3"), "p3")),
            None,
            "a repeated report changes nothing"
        );
        assert!(pods.hold_render("r-3") && !pods.hold_render("r-2"));
    }

    #[test]
    fn a_slot_shifted_by_a_new_pod_is_found_again() {
        let mut pods = Pods::default();
        pods.report(report("ns/c", Some("r-1"), "p1"));
        pods.report(report("ns/b", Some("r-1"), "p1")); // c moves from slot 0 to 1
        pods.report(report("ns/a", Some("r-1"), "p1")); // and to 2
        pods.report(report("ns/c", Some("r-2"), "p2"));
        pods.report(report("ns/b", Some("r-2"), "p2"));
        let view: Vec<_> = pods
            .states()
            .iter()
            .map(|s| (s.pod.clone(), s.applied_plan.clone().unwrap()))
            .collect();
        assert_eq!(
            view,
            [
                ("ns/a".into(), "p1".into()),
                ("ns/b".into(), "p2".into()),
                ("ns/c".into(), "p2".into())
            ]
        );
        pods.terminated("ns/a"); // b and c shift back
        pods.terminated("ns/c");
        assert_eq!(pods.states().iter().map(|s| &*s.pod).collect::<Vec<_>>(), ["ns/b"]);
        assert!(pods.hold_render("r-2") && !pods.hold_render("r-1"));
    }
}
