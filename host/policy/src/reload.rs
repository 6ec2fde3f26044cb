//! Hot reload of a policy component: watch the file (and SIGHUP), and swap
//! the live policy for a candidate that compiles and implements the world. A
//! candidate that does not never replaces the live policy. One that fails
//! some of a built-in set of sample triggers is taken with a warning and a
//! metric, as at start (docs/policies.md): where it fails at run time, the
//! seat's fallback decides. Decisions already running finish on the policy
//! they started with. The shadow policy (`--shadow-policy`) is reloaded the
//! same way by a reloader of its own ([`Role::Shadow`]).

use super::cache::ComponentCache;
use super::component::read_component;
use super::{
    ComponentPolicy, Fleet, LivePolicy, PodState, Policy, PolicyError, PolicyLimits, Trigger,
};
use crate::metrics::PolicyMetrics;
use policy_core::{Outcome, Verdict};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Which policy a reloader keeps current: it names the flag in errors, and
/// what the log and the reload metric say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `--policy`, whose decisions are applied.
    Live,
    /// `--shadow-policy`, whose decisions are only compared.
    Shadow,
}

impl Role {
    /// How the log calls it.
    fn what(self) -> &'static str {
        match self {
            Role::Live => "policy",
            Role::Shadow => "shadow policy",
        }
    }

    pub fn flag(self) -> &'static str {
        match self {
            Role::Live => "--policy",
            Role::Shadow => "--shadow-policy",
        }
    }
}

/// Watches one policy file and keeps the live policy up to date.
pub struct Reloader {
    role: Role,
    path: PathBuf,
    limits: PolicyLimits,
    cache: Option<ComponentCache>,
    live: LivePolicy,
    metrics: Arc<PolicyMetrics>,
    /// Digest of the content last tried (accepted or refused).
    seen: [u8; 32],
    /// Why the file could not be read at the last poll, said once.
    unreadable: Option<String>,
}

impl Reloader {
    /// Loads the policy at `path` (an error, which stops start-up, only if it
    /// does not compile or does not implement the world) and returns the
    /// reloader that will keep it current.
    pub fn start(
        path: PathBuf,
        limits: PolicyLimits,
        cache: Option<ComponentCache>,
        metrics: Arc<PolicyMetrics>,
    ) -> Result<(Reloader, LivePolicy), String> {
        Reloader::start_as(Role::Live, path, limits, cache, metrics)
    }

    /// [`Reloader::start`] for the policy of `role`.
    pub fn start_as(
        role: Role,
        path: PathBuf,
        limits: PolicyLimits,
        cache: Option<ComponentCache>,
        metrics: Arc<PolicyMetrics>,
    ) -> Result<(Reloader, LivePolicy), String> {
        let flag = role.flag();
        let bytes = read_component(&path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
        let vetted = load_vetted(&bytes, &limits, cache.as_ref())
            .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
        let policy = vetted.take(role, &path, &metrics);
        let live = LivePolicy::new(Arc::new(policy));
        let seen = Sha256::digest(&bytes).into();
        let reloader = Reloader {
            role,
            path,
            limits,
            cache,
            live: live.clone(),
            metrics,
            seen,
            unreadable: None,
        };
        Ok((reloader, live))
    }

    /// Tries the file once: `Ok(true)` if a new policy now decides,
    /// `Ok(false)` if the content did not change, `Err` if the candidate was
    /// refused (the live policy stays).
    pub fn poll(&mut self) -> Result<bool, String> {
        let bytes = match read_component(&self.path) {
            Ok(bytes) => bytes,
            Err(e) => {
                // Said once while it lasts (the moment of a rename, or a
                // FIFO put in the file's place), not at every poll.
                let e = format!("{}: {e}", self.path.display());
                if self.unreadable.as_ref() != Some(&e) {
                    let what = self.role.what();
                    tracing::error!("the {what} file cannot be read, the one in force stays: {e}");
                    self.unreadable = Some(e.clone());
                }
                return Err(e);
            }
        };
        self.unreadable = None;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        if digest == self.seen {
            return Ok(false);
        }
        self.seen = digest;
        match load_vetted(&bytes, &self.limits, self.cache.as_ref()) {
            Ok(vetted) => {
                let policy = vetted.take(self.role, &self.path, &self.metrics);
                // Logged once it decides and is counted, so whoever reads the
                // line may rely on both.
                let name = policy.name().to_owned();
                self.live.replace(Arc::new(policy));
                self.counted(true);
                let path = self.path.display();
                match self.role {
                    Role::Live => tracing::info!(policy = name, %path, "policy reloaded"),
                    Role::Shadow => tracing::info!(shadow = name, %path, "shadow reloaded"),
                }
                Ok(true)
            }
            Err(e) => {
                self.counted(false);
                let path = self.path.display();
                match self.role {
                    Role::Live => {
                        tracing::error!(%path, "policy reload refused, the live policy stays: {e}")
                    }
                    Role::Shadow => {
                        tracing::error!(%path, "shadow reload refused, the shadow in force stays: {e}")
                    }
                }
                Err(e)
            }
        }
    }

    fn counted(&self, accepted: bool) {
        match self.role {
            Role::Live => self.metrics.reloaded(accepted),
            Role::Shadow => self.metrics.shadow_reloaded(accepted),
        }
    }

    /// Polls every `interval` and on SIGHUP, until the task is dropped.
    pub async fn watch(mut self, interval: Duration) {
        let mut hangup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        // tokio's interval panics on a zero period; a millisecond is as often as is useful
        let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let hup = async {
                match hangup.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tick.tick() => {}
                _ = hup => tracing::info!("SIGHUP: checking the {} file", self.role.what()),
            }
            // Compiling is CPU work: off the async threads.
            let result = tokio::task::spawn_blocking(move || {
                let r = self.poll();
                (self, r)
            })
            .await;
            match result {
                Ok((me, _)) => self = me,
                Err(_) => return,
            }
        }
    }
}

/// A candidate that compiles and implements the world, and how it did on the sample triggers.
pub struct Vetted {
    pub policy: ComponentPolicy,
    /// Each sample trigger it failed: what the sample is, and why.
    pub sample_failures: Vec<(&'static str, PolicyError)>,
}

impl Vetted {
    /// The policy, once its sample failures are logged and counted (a
    /// shadow's apart from the live policy's, whose alerts they must not fire).
    fn take(self, role: Role, path: &Path, metrics: &PolicyMetrics) -> ComponentPolicy {
        for (what, e) in &self.sample_failures {
            match role {
                Role::Live => metrics.sample_failed(&e.policy, &e.failure),
                Role::Shadow => metrics.shadow_sample_failed(&e.policy, &e.failure),
            }
            tracing::warn!(
                policy = e.policy,
                path = %path.display(),
                reason = e.failure.reason(),
                "the policy fails the sample trigger \"{what}\": {e}; it is in force anyway, the fallback decides where it fails"
            );
        }
        self.policy
    }
}

/// Compiles a candidate (an error if it does not compile or does not
/// implement the world) and runs it over the sample triggers.
pub fn load_vetted(
    bytes: &[u8],
    limits: &PolicyLimits,
    cache: Option<&ComponentCache>,
) -> Result<Vetted, String> {
    let policy =
        ComponentPolicy::from_bytes(bytes, limits.clone(), cache).map_err(|e| e.to_string())?;
    let sample_failures = sample_failures(&policy);
    Ok(Vetted { policy, sample_failures })
}

/// The sample triggers `policy` fails: what each is, and why. `serve` runs
/// them at load and `policy check` reports them.
pub fn sample_failures(policy: &dyn Policy) -> Vec<(&'static str, PolicyError)> {
    samples()
        .into_iter()
        .filter_map(|(what, trigger, fleet)| {
            policy.decide(&trigger, &fleet).err().map(|e| (what, e))
        })
        .collect()
}

/// A few triggers every policy should decide without failing.
fn samples() -> Vec<(&'static str, Trigger, Fleet)> {
    let pod = |name: &str, applied: &str, running: &str| PodState {
        pod: name.into(),
        applied_plan: Some(applied.into()),
        running_plan: Some(running.into()),
        baseline_plan: Some("plan-1".into()),
    };
    let fleet = Fleet {
        held: Default::default(),
        pods: vec![
            pod("ns/a", "plan-2", "plan-1"),
            pod("ns/b", "plan-2", "plan-2"),
            pod("ns/c", "plan-1", "plan-1"),
        ]
        .into(),
        passed_plans: vec!["plan-1".into()].into(),
        refused_plans: std::sync::Arc::from([]),
    };
    let verdict = |outcome| {
        Trigger::Verdict(Verdict {
            plan: "plan-2".into(),
            render: "r-2".into(),
            outcome,
            newest: true,
            pinned: false,
            remembered: false,
            message: String::new(),
        })
    };
    vec![
        ("pass", verdict(Outcome::Passed), fleet.clone()),
        ("refusal", verdict(Outcome::Refused), fleet.clone()),
        ("could not run", verdict(Outcome::Unavailable), fleet.clone()),
        ("applied", Trigger::Applied(pod("ns/c", "plan-1", "plan-1")), fleet.clone()),
        ("empty fleet", verdict(Outcome::Refused), Fleet::default()),
    ]
}
