//! `rendergate replay EVENTS --fixtures OUT.json`: every policy trigger of
//! the replay, with the fleet it saw and the decision the live policy
//! proposed, written as fixture cases (docs/protocol.md §4), so a recorded
//! incident becomes a regression test for `rendergate policy test`.
//!
//! The cases come from the gate's own decisions: [`FixtureLog`] observes
//! the policy seat ([`rendergate::policy::observe`]), nothing decides twice.
//! `expect` is the policy's proposal before the host's rules, which is what
//! `policy test` compares (what the rules dropped is listed beside it); a
//! trigger on which the policy failed, and the fallback decided, gets no
//! case: no decision of the policy's could be expected there.
//!
//! Each case names its trigger and the input line that brought it: the
//! `rendered` line of a verdict's render, or the `applied` line of a report.
//! The feeder tells the log each line it feeds ([`FixtureLog::fed`]) before
//! the gate can read it; a report's line is found by pod, in order, past
//! the reports that changed nothing (those ask no decision).

use anyhow::Context as _;
use policy_core::Outcome;
use rendergate::Event;
use rendergate::policy::Trigger;
use rendergate::policy::observe::{DecisionObserver, Observed};
use rendergate::protocol;
use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::sync::Mutex;

/// The cases of one replay, gathered as the gate decides.
pub struct FixtureLog {
    inner: Mutex<Inner>,
    /// OUT.json, opened before the replay starts (so a bad path fails at once).
    file: Mutex<Option<std::fs::File>>,
}

#[derive(Default)]
struct Inner {
    /// The line of each render id's latest `rendered` line.
    renders: HashMap<String, u64>,
    /// Per pod, the `applied` lines fed and not yet matched to a decision.
    applied: HashMap<String, VecDeque<AppliedLine>>,
    /// Each case as JSON text, pretty-printed.
    cases: Vec<String>,
    /// Triggers on which the policy failed: no case.
    failed: Vec<String>,
}

/// An `applied` line, with what it says the pod holds.
struct AppliedLine {
    line: u64,
    plan: String,
    running_plan: Option<String>,
    baseline_plan: Option<String>,
}

impl FixtureLog {
    /// Creates `path` (0600: a refusal's message may quote the render) or
    /// truncates it, for [`FixtureLog::write`] to fill once the replay ends.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        Ok(FixtureLog { inner: Mutex::default(), file: Mutex::new(Some(file)) })
    }

    /// A log that writes nowhere, for tests of the matching.
    #[cfg(test)]
    fn detached() -> Self {
        FixtureLog { inner: Mutex::default(), file: Mutex::new(None) }
    }

    /// An input line about to be fed to the gate, numbered as `serve`
    /// numbers its lines (from 1, over all input lines).
    pub fn fed(&self, number: u64, line: &[u8]) {
        let Ok(text) = std::str::from_utf8(line) else { return };
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match protocol::parse_line(number, text) {
            Ok(Some(Event::Rendered(render))) => {
                inner.renders.insert(render.id().to_owned(), number);
            }
            Ok(Some(Event::Applied(report))) => {
                inner.applied.entry(report.pod.to_string()).or_default().push_back(AppliedLine {
                    line: number,
                    plan: report.plan.to_string(),
                    running_plan: report.running_plan.as_deref().map(str::to_owned),
                    baseline_plan: report.baseline_plan.as_deref().map(str::to_owned),
                });
            }
            _ => {}
        }
    }

    /// Writes the cases to the file [`FixtureLog::create`] opened; returns how many.
    pub fn write(&self) -> anyhow::Result<usize> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for skipped in &inner.failed {
            tracing::warn!("--fixtures: no case for {skipped}: the policy failed on it");
        }
        // An array of the cases, each indented one step, as `to_string_pretty` would.
        let indented: Vec<String> = inner
            .cases
            .iter()
            .map(|case| case.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n"))
            .collect();
        let text = if indented.is_empty() {
            "[]\n".to_owned()
        } else {
            format!("[\n{}\n]\n", indented.join(",\n"))
        };
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let file = file.as_mut().context("already written")?;
        file.write_all(text.as_bytes()).context("writing")?;
        Ok(inner.cases.len())
    }
}

impl Inner {
    /// The input line that brought `trigger`.
    fn line_of(&mut self, trigger: &Trigger) -> Option<u64> {
        match trigger {
            Trigger::Verdict(v) => self.renders.get(&v.render).copied(),
            Trigger::Applied(state) => {
                let lines = self.applied.get_mut(&*state.pod)?;
                // Lines before the match repeated a report: they asked nothing.
                while let Some(fed) = lines.pop_front() {
                    let holds =
                        |said: &Option<String>, state: &Option<rendergate::policy::Name>| {
                            said.is_none() || said.as_deref() == state.as_deref()
                        };
                    if state.applied_plan.as_deref() == Some(fed.plan.as_str())
                        && holds(&fed.running_plan, &state.running_plan)
                        && holds(&fed.baseline_plan, &state.baseline_plan)
                    {
                        return Some(fed.line);
                    }
                }
                None
            }
        }
    }
}

/// A case's name: its trigger, what it is about, and its input line.
fn name(index: usize, line: Option<u64>, trigger: &Trigger) -> String {
    let line = line.map_or_else(|| "line ?".to_owned(), |n| format!("line {n}"));
    match trigger {
        Trigger::Verdict(v) => {
            let outcome = match v.outcome {
                Outcome::Passed => "passed",
                Outcome::Refused => "refused",
                Outcome::Unavailable => "could-not-run",
            };
            let mut about = vec![format!("render {}", v.render)];
            about.push(if v.newest { "newest" } else { "superseded" }.to_owned());
            if v.pinned {
                about.push("pinned".into());
            }
            if v.remembered {
                about.push("remembered".into());
            }
            format!("#{index} {line}: {outcome} verdict on {} ({})", v.plan, about.join(", "))
        }
        Trigger::Applied(state) => format!(
            "#{index} {line}: {} applied {}",
            state.pod,
            state.applied_plan.as_deref().unwrap_or("no plan")
        ),
    }
}

/// One case as written: docs/protocol.md §4's fields, and what else helps
/// a reader (`policy test` reads only `name`, `trigger`, `fleet`, `expect`).
#[derive(serde::Serialize)]
struct Case<'a> {
    name: &'a str,
    input_line: Option<u64>,
    policy: &'a str,
    trigger: &'a Trigger,
    fleet: &'a rendergate::policy::Fleet,
    expect: &'a rendergate::policy::Decision,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dropped_by_host_rules: Vec<&'a str>,
}

impl DecisionObserver for FixtureLog {
    fn decided(&self, decision: &Observed<'_>) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let line = inner.line_of(decision.trigger);
        let index = inner.cases.len() + inner.failed.len() + 1;
        let name = name(index, line, decision.trigger);
        if decision.settled.failure.is_some() {
            inner.failed.push(name);
            return;
        }
        let case = Case {
            name: &name,
            input_line: line,
            policy: decision.policy,
            trigger: decision.trigger,
            fleet: decision.fleet,
            expect: decision.proposed,
            dropped_by_host_rules: decision.settled.dropped.iter().map(|d| &*d.item).collect(),
        };
        match serde_json::to_string_pretty(&case) {
            Ok(text) => inner.cases.push(text),
            Err(e) => tracing::error!("--fixtures: cannot write {name}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rendergate::policy::PodState;

    fn applied(pod: &str, plan: &str, running: &str) -> String {
        format!(r#"{{"type":"applied","pod":"{pod}","plan":"{plan}","running_plan":"{running}"}}"#)
    }

    fn state(pod: &str, plan: &str, running: &str) -> Trigger {
        Trigger::Applied(PodState {
            pod: pod.into(),
            applied_plan: Some(plan.into()),
            running_plan: Some(running.into()),
            baseline_plan: None,
        })
    }

    #[test]
    fn a_report_is_matched_to_its_line_past_repeats_that_asked_nothing() {
        let log = FixtureLog::detached();
        log.fed(1, applied("ns/a", "p1", "p1").as_bytes());
        log.fed(2, applied("ns/b", "p1", "p1").as_bytes());
        log.fed(3, applied("ns/a", "p1", "p1").as_bytes()); // a repeat: no decision
        log.fed(4, applied("ns/a", "p2", "p1").as_bytes());
        let mut inner = log.inner.lock().unwrap();
        assert_eq!(inner.line_of(&state("ns/a", "p1", "p1")), Some(1));
        assert_eq!(inner.line_of(&state("ns/a", "p2", "p1")), Some(4));
        assert_eq!(inner.line_of(&state("ns/b", "p1", "p1")), Some(2));
        assert_eq!(inner.line_of(&state("ns/c", "p1", "p1")), None);
    }

    #[test]
    fn a_name_says_the_trigger_what_it_is_about_and_its_line() {
        assert_eq!(name(3, Some(9), &state("ns/a", "p2", "p1")), "#3 line 9: ns/a applied p2");
        let verdict = Trigger::Verdict(policy_core::Verdict {
            plan: "plan-2".into(),
            render: "r-3".into(),
            outcome: Outcome::Refused,
            newest: true,
            pinned: true,
            remembered: false,
            message: String::new(),
        });
        assert_eq!(
            name(1, None, &verdict),
            "#1 line ?: refused verdict on plan-2 (render r-3, newest, pinned)"
        );
    }
}
