//! Running `haproxy -c` over one render: a fresh check directory, one child
//! process group, one deadline, and nothing left behind.
//!
//! Each check takes a check directory and a child made ahead for it
//! ([`super::standby`]): a fresh directory in this checker's subdirectory of
//! the private base directory ([`super::base`]), or, on a host without
//! namespaces, the config directory itself ([`super::config_dir`]), with the
//! child in its sandbox waiting before `execve`. The render is written into
//! the directory through its handle, under the check's deadline
//! ([`super::prepare`]); the child is given the word and becomes
//! `haproxy -dr -V -c -f haproxy.cfg`, a process group of its own, stopped
//! whole when the check ends for any reason: exit, deadline, or the future
//! being dropped ([`super::process`]; once dropped, the thread that started
//! it finishes the stop); what it said is read into a verdict
//! ([`super::verdict`]). The directory is removed after the group is dead,
//! after the answer, and before the next check starts HAProxy.
//! [`HaproxyChecker`]'s `run_once` is these steps, in order; `run` takes them
//! again, in a fresh directory under `--check-memory-max`, when the first run
//! may have hit `--check-memory`.
//!
//! Which binary runs is settled per check ([`super::identity`]), and so is
//! its sandbox: a binary replaced or installed while the gate runs is the one
//! the next check runs, and the answer is reported with the identity of the
//! binary that gave it.

use super::aftercare::{Aftercare, Leftover, Next};
use super::base::BaseDir;
use super::config_dir::ConfigDir;
pub use super::identity::Naming;
use super::identity::{Binary, BinaryIdentity};
use super::limits::RenderLimits;
use super::prepare::{self, InFlight, Job};
use super::process;
use super::sandbox::{self, Go, Sandbox, SandboxOptions};
use super::standby::{self, Armed, Order, Place, Standby};
use super::trial::{self, Trial};
use super::verdict::{self, Exit, Transcript};
use super::{CheckFuture, Checked, Checker};
use rendergate_core::CheckOutcome;
use rendergate_core::render::Render;
use sandbox::Probe;
use sandbox::world::StandInSources;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

/// How to run HAProxy.
#[derive(Clone, Debug)]
pub struct HaproxyOptions {
    /// The binary; a name without `/` is looked up on `PATH` again for every check.
    pub binary: PathBuf,
    /// Pass `-dr`: an unresolvable server name is a warning, not an error,
    /// so a DNS blip never reverts a fleet.
    pub dns_skip: bool,
    /// Where the base directory `rendergate-<euid>` (and in it every check
    /// directory) is made; the system temp directory if unset.
    pub work_dir: Option<PathBuf>,
    /// The longest verdict message. HAProxy's output is read whole, however
    /// long (the kind comes from every line); this bounds only what is shown.
    pub output_cap: usize,
    /// The sandbox around each check (strict by default).
    pub sandbox: SandboxOptions,
    /// The memory a check's run at the top of its bounds may touch
    /// (`--check-memory-max`): its second run, when its first, under
    /// `sandbox.memory` of address space, may have hit that bound; its only
    /// run when `sandbox.memory` is not below it ([`crate::resident`]).
    pub memory_max: u64,
    /// How big a render may be; a bigger one could not run.
    pub limits: RenderLimits,
    /// Make the next check's child once a check is over ([`crate::standby`],
    /// [`crate::aftercare`]), so that the next render waits only for its own
    /// files: on for a gate; off for one check (`rendergate check`).
    pub standby: bool,
    /// How the judge is named in each answer: by its content's hash for a
    /// gate, whose verdict memory keys on it; by its stamp for one check
    /// (`rendergate check`), which remembers nothing ([`Naming`]).
    pub naming: Naming,
    /// Once a standby is forked, give the gate's main-thread heap and stack
    /// their own pages at once (`MADV_POPULATE_WRITE`), so the next check
    /// does not fault them in on its way to the verdict (0.2 ms a check),
    /// at the price of that heap's size again while the standby is held.
    /// Off by default: a controller embedding the library keeps its memory
    /// (the fork's pages stay shared); on for `rendergate serve`.
    pub copy_ahead: bool,
}

impl Default for HaproxyOptions {
    fn default() -> Self {
        HaproxyOptions {
            binary: PathBuf::from("haproxy"),
            dns_skip: true,
            work_dir: None,
            output_cap: 64 * 1024,
            sandbox: SandboxOptions::default(),
            memory_max: sandbox::rlimits::DEFAULT_MEMORY_MAX,
            limits: RenderLimits::default(),
            standby: true,
            naming: Naming::Hash,
            copy_ahead: false,
        }
    }
}

/// The real checker: `haproxy -c` in a fresh directory per check.
#[derive(Debug)]
pub struct HaproxyChecker {
    opts: HaproxyOptions,
    /// The binary, found and named again for every check; when there is
    /// none, that check could not run.
    binary: BinaryIdentity,
    /// The world checks get, as last decided; swapped whole when checks
    /// stop being able to set up their sandbox and the worlds are tried
    /// again ([`HaproxyChecker::try_again`]).
    choice: Mutex<Arc<Choice>>,
    /// When the worlds were last tried again (at most once a [`RETRY_EVERY`]);
    /// `None` inside for a checker that never tries again: one given its
    /// probe ([`HaproxyChecker::with_probe`], layers forced absent), which a
    /// fresh probe of the host would overrule.
    retried: Option<Mutex<Option<std::time::Instant>>>,
    /// The sandbox of the binary last found, by its identity: a sandbox is
    /// made for one binary (it reads the binary's loader), so another binary
    /// gets a new one.
    sandbox: Mutex<Option<Made>>,
    /// `<work dir>/rendergate-<euid>` with this checker's subdirectory, or
    /// why it was refused (then every check could not run, saying so).
    /// Shared with the thread preparing a check directory, which may
    /// outlive a cancelled check by a file.
    base: Result<Arc<BaseDir>, String>,
    /// Threads preparing or removing a check directory, or making and
    /// holding a check's child: waited for when the checker goes, so that
    /// its directories, children and world go with it.
    in_flight: Arc<InFlight>,
    /// The next check's child, made ahead (in the config directory once the
    /// last check's render is emptied out of it); shared with the aftercare
    /// that makes it.
    standby: Arc<Mutex<Option<Standby>>>,
    /// What answered checks left, taken care of after their verdicts.
    aftercare: Arc<Aftercare>,
}

/// Which world checks get: the probe's layers, less the worlds that failed
/// their trial, and the config directory claimed where there is no root of
/// the check's own.
#[derive(Debug)]
struct Choice {
    probe: Probe,
    /// Where checks get no root of their own: the config directory claimed
    /// as every check's directory, or why it could not be (then every check
    /// could not run, saying so).
    config_dir: Option<Result<Arc<ConfigDir>, String>>,
    /// The worlds that failed their trial, and why ([`trial`]).
    tried: Tried,
}

/// The least time between two tries of the worlds after checks failed to
/// set up their sandbox (checks that could not run are retried sooner).
const RETRY_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The worlds that failed their trial at start-up ([`trial`]).
#[derive(Clone, Debug, Default)]
pub struct Tried {
    /// `root: chroot: EPERM`, one per world that failed, in the order tried.
    pub failed: Vec<String>,
    /// Why the config-directory world failed, when it did: then checks
    /// have no world.
    config_dir: Option<String>,
    /// A checker made for a trial: it says nothing (the one decided says
    /// it). It tries no world again either: [`HaproxyChecker::decided`]
    /// makes none that does.
    trial: bool,
}

/// Which world checks see on this host (docs/checking.md, "The check's world").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorldKind {
    /// A root of their own, in user and mount namespaces.
    Root,
    /// No namespaces: the render in `--config-dir` itself, the host's files as Landlock allows.
    ConfigDir,
    /// The sandbox off: a fresh temporary directory, the host as it is.
    Fresh,
    /// No namespaces and no usable config directory: every check could not run.
    None,
}

impl WorldKind {
    /// As written in the start-up line and in `hello`.
    pub fn name(self) -> &'static str {
        match self {
            WorldKind::Root => "root",
            WorldKind::ConfigDir => "config-dir",
            WorldKind::Fresh => "fresh",
            WorldKind::None => "none",
        }
    }
}

impl Choice {
    /// The choice the probe and the trials make, with the config directory
    /// claimed where checks get no root of their own.
    fn new(opts: &HaproxyOptions, probe: Probe, tried: Tried) -> Choice {
        let mode = opts.sandbox.mode;
        let config_dir = (mode != sandbox::Mode::Off && !sandbox::gives_world(mode, &probe)).then(
            || {
                let world = &opts.sandbox.world;
                if (world.accounts.is_some() || world.hostname.is_some() || world.hosts.is_some())
                    && !tried.trial
                {
                    tracing::warn!("no namespaces: --accounts, --check-hostname and --check-hosts cannot apply; haproxy sees the host's accounts, name and names");
                }
                if tried.config_dir.is_some() {
                    let failed = tried.failed.join("; ");
                    return Err(format!("no world for checks works on this host ({failed})"));
                }
                ConfigDir::claim(&world.config_dir).map(Arc::new).map_err(|e| {
                    let why = match tried.failed.as_slice() {
                        [] => "this host gives no namespaces for the check's world".to_owned(),
                        failed => format!("no root of the check's own works here ({})", failed.join("; ")),
                    };
                    format!("{why}, and --config-dir cannot hold the render: {e}")
                })
            },
        );
        if let Some(Err(e)) = &config_dir
            && !tried.trial
        {
            tracing::error!("{e}; every check will be could-not-run");
        }
        Choice { probe, config_dir, tried }
    }

    /// Which world checks see.
    fn kind(&self, mode: sandbox::Mode) -> WorldKind {
        match &self.config_dir {
            Some(Ok(_)) => WorldKind::ConfigDir,
            Some(Err(_)) => WorldKind::None,
            None if mode == sandbox::Mode::Off => WorldKind::Fresh,
            None => WorldKind::Root,
        }
    }
}

/// A sandbox made, for one binary, from the stand-ins' sources as they
/// were, in one choice of world (a new choice, after the worlds are tried
/// again, makes it anew).
#[derive(Debug)]
struct Made {
    judge: Arc<str>,
    sources: StandInSources,
    choice: Arc<Choice>,
    sandbox: Arc<Sandbox>,
}

/// What one check runs with: the binary as hashed, and the sandbox made for it.
struct Setup {
    binary: Arc<Binary>,
    sandbox: Arc<Sandbox>,
}

/// A check whose binary was replaced while it ran has no known judge; it is
/// run again, with the binary now in place, up to this many times in all.
const RUNS_PER_CHECK: usize = 3;

impl HaproxyChecker {
    /// Finds and hashes the binary now (again at every check), and decides
    /// the check's world by trying it ([`trial`]): root, then config-dir,
    /// then none. A missing binary is not an error here: the gate must
    /// still run and say "could not run" per check, until the binary is
    /// there (the world is then the one the probe gives, untried).
    pub fn new(opts: HaproxyOptions) -> Self {
        let probe = Probe::current().clone();
        if opts.sandbox.mode == sandbox::Mode::Off {
            return Self::with_probe(opts, probe);
        }
        let (probe, tried) = Self::try_worlds(&opts, probe);
        Self::decided(opts, probe, tried).trying_again()
    }

    /// As [`HaproxyChecker::new`] without the probe's trial children nor
    /// the worlds' trial: the strongest world, assumed ([`Probe::assumed`]).
    /// For one check that tries the world itself (`rendergate check DIR`
    /// probes and runs [`HaproxyChecker::new`]'s trial only when its check
    /// could not set up the sandbox).
    pub fn untried(opts: HaproxyOptions) -> Self {
        let disable = std::env::var(sandbox::probe::DISABLE_VAR).unwrap_or_default();
        Self::with_probe(opts, Probe::assumed(&disable)).trying_again()
    }

    /// This checker tries the worlds again, from a fresh probe of the host,
    /// when its checks stop being able to set up their sandbox.
    fn trying_again(mut self) -> Self {
        self.retried = Some(Mutex::new(None));
        self
    }

    /// As [`HaproxyChecker::untried`] with a given sandbox probe (tests force layers absent).
    pub fn with_probe(opts: HaproxyOptions, probe: Probe) -> Self {
        Self::decided(opts, probe, Tried::default())
    }

    /// Tries each world in turn, from the strongest the probe allows, until
    /// one judges [`trial::CONFIG`] (or tells nothing: no binary yet).
    fn try_worlds(opts: &HaproxyOptions, mut probe: Probe) -> (Probe, Tried) {
        let mut tried = Tried::default();
        loop {
            let opts = HaproxyOptions { standby: false, ..opts.clone() };
            let checker =
                Self::decided(opts, probe.clone(), Tried { trial: true, ..tried.clone() });
            let kind = checker.world_kind();
            if !matches!(kind, WorldKind::Root | WorldKind::ConfigDir) {
                return (probe, tried);
            }
            match checker.try_world() {
                Trial::Works => return (probe, tried),
                Trial::Untold(why) => {
                    tracing::warn!(
                        "the {} world could not be tried ({why}); the first check tells",
                        kind.name()
                    );
                    return (probe, tried);
                }
                Trial::Fails(why) => {
                    tracing::warn!("the {} world fails here ({why}); trying the next", kind.name());
                    tried.failed.push(format!("{}: {why}", kind.name()));
                    match kind {
                        WorldKind::Root => probe.root_world = Err(why),
                        _ => tried.config_dir = Some(why),
                    }
                }
            }
        }
    }

    /// Judges [`trial::CONFIG`] with this checker, on a thread and runtime
    /// of its own (the caller may be inside a runtime, or in none).
    fn try_world(&self) -> Trial {
        let render = Render::new("world-trial", "world-trial", trial::CONFIG, Vec::new());
        let judge = || -> CheckOutcome {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            match runtime {
                Ok(runtime) => runtime.block_on(async {
                    self.checked(&render, Instant::now() + trial::TIMEOUT).await.outcome
                }),
                Err(e) => unavailable(format!("no runtime for the world's trial: {e}")),
            }
        };
        let outcome = std::thread::scope(|scope| scope.spawn(judge).join());
        match outcome {
            Ok(outcome) => trial::read(&outcome),
            Err(_) => Trial::Untold("the world's trial panicked".into()),
        }
    }

    /// The checker for a world decided: the probe's, less what `tried` failed.
    fn decided(opts: HaproxyOptions, probe: Probe, tried: Tried) -> Self {
        let work_dir = opts.work_dir.clone().unwrap_or_else(std::env::temp_dir);
        let base = BaseDir::open(&work_dir).map(Arc::new);
        if let Err(problem) = &base
            && !tried.trial
        {
            tracing::error!("{problem}; every check will be could-not-run");
        }
        let checker = HaproxyChecker {
            binary: BinaryIdentity::new(&opts.binary, opts.naming),
            choice: Mutex::new(Arc::new(Choice::new(&opts, probe, tried))),
            opts,
            retried: None,
            sandbox: Mutex::default(),
            base,
            in_flight: Arc::default(),
            standby: Arc::default(),
            aftercare: Arc::default(),
        };
        // The first check need not hash the binary nor read its loader, nor
        // wait for its child, when there is a runtime to watch it from.
        if let Ok(setup) = checker.setup()
            && tokio::runtime::Handle::try_current().is_ok()
            && let Some(make) = checker.next_standby(&setup)
        {
            make();
        }
        checker
    }

    /// The binary found now and its sandbox, made anew when the binary changed.
    fn setup(&self) -> Result<Setup, String> {
        let binary = self.binary.current()?;
        // a world's stand-ins follow their sources: a changed account or
        // host name makes the sandbox anew (a few stats a check)
        let sources = match self.opts.sandbox.mode {
            sandbox::Mode::Off => StandInSources::default(),
            _ => sandbox::world::stand_in_sources(&self.opts.sandbox.world),
        };
        let choice = self.choice();
        let mut made = self.sandbox.lock().unwrap_or_else(PoisonError::into_inner);
        let current = made.as_ref().filter(|m| {
            m.judge == binary.identity && m.sources == sources && Arc::ptr_eq(&m.choice, &choice)
        });
        let sandbox = match current {
            Some(made) => made.sandbox.clone(),
            None => {
                let (mut opts, probe) = (self.opts.sandbox.clone(), choice.probe.clone());
                opts.world.render_room = self.opts.limits;
                let private = self.base.as_ref().ok().map(|base| base.own_path());
                let sandbox = Arc::new(Sandbox::with_probe(opts, &binary.path, probe, private));
                let judge = binary.identity.clone();
                *made = Some(Made { judge, sources, choice, sandbox: sandbox.clone() });
                sandbox
            }
        };
        Ok(Setup { binary, sandbox })
    }

    /// The sandbox checks of the binary found now run in (`None` when there
    /// is no binary to run).
    pub fn sandbox(&self) -> Option<Arc<Sandbox>> {
        self.setup().ok().map(|setup| setup.sandbox)
    }

    /// The start-up line saying which sandbox layers checks get, and which world.
    pub fn sandbox_report(&self) -> String {
        let choice = self.choice();
        let mode = self.opts.sandbox.mode;
        let mut line = format!("{} world={}", choice.probe.report(mode), choice.kind(mode).name());
        if !choice.tried.failed.is_empty() {
            line.push_str(&format!(" ({})", choice.tried.failed.join("; ")));
        }
        line
    }

    /// The world as last decided.
    fn choice(&self) -> Arc<Choice> {
        self.choice.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Which world checks see.
    pub fn world_kind(&self) -> WorldKind {
        self.choice().kind(self.opts.sandbox.mode)
    }

    /// Why checks have no world, when they have none.
    pub fn world_refusal(&self) -> Option<String> {
        self.choice().config_dir.as_ref().and_then(|c| c.as_ref().err()).cloned()
    }

    /// The sandbox mode checks run in (`--sandbox`, `--no-sandbox`).
    pub fn sandbox_mode(&self) -> crate::sandbox::Mode {
        self.opts.sandbox.mode
    }

    /// Each layer and whether checks get it (the `rendergate_sandbox_layer` gauge).
    pub fn sandbox_layers(&self) -> Vec<(&'static str, bool)> {
        self.choice().probe.layers(self.opts.sandbox.mode)
    }

    /// The binary a check runs now, when there is one.
    pub fn binary(&self) -> Option<PathBuf> {
        self.binary.current().ok().map(|binary| binary.path.clone())
    }

    /// Runs the check with the binary found now, and answers with its
    /// identity. The binary is looked at again once the check is over: if
    /// its path no longer holds the file that was hashed, nobody knows which
    /// of the two answered, and the check runs again.
    async fn checked(&self, render: &Render, deadline: Instant) -> Checked {
        for _ in 0..RUNS_PER_CHECK {
            // at most twice: the assumed world, then the probe's (untried)
            let (setup, outcome) = loop {
                let setup = match self.setup() {
                    Ok(setup) => setup,
                    Err(problem) => {
                        let outcome = unavailable(problem);
                        return Checked { outcome, judge: self.binary.missing() };
                    }
                };
                let outcome = self.run(&setup, render, deadline).await;
                if !self.try_again(&outcome).await {
                    break (setup, outcome);
                }
            };
            // the binary judged is the one of the last run
            if setup.binary.unchanged() {
                return Checked { outcome, judge: setup.binary.identity.clone() };
            }
            tracing::info!(binary = %setup.binary.path.display(), "the haproxy binary changed during the check; checking again");
        }
        let outcome = unavailable(format!(
            "the haproxy binary kept changing during the check ({RUNS_PER_CHECK} runs)"
        ));
        Checked { outcome, judge: self.binary.identity() }
    }

    /// After a check that could not set up its sandbox (or had no world):
    /// the worlds are tried again, from a fresh probe of this host, at most
    /// once a [`RETRY_EVERY`], and the choice swapped whole; `true` when
    /// there is a world to judge in again. The config directory is let go
    /// first, so that its trial (and the new choice) may claim it.
    async fn try_again(&self, outcome: &CheckOutcome) -> bool {
        let CheckOutcome::Unavailable { reason } = outcome else { return false };
        let Some(retried) = &self.retried else { return false };
        if self.opts.sandbox.mode == sandbox::Mode::Off || !trial::holds_every_check(reason) {
            return false;
        }
        {
            let mut retried = retried.lock().unwrap_or_else(PoisonError::into_inner);
            if retried.is_some_and(|at| at.elapsed() < RETRY_EVERY) {
                return false;
            }
            *retried = Some(std::time::Instant::now());
        }
        let before = self.world_kind();
        if self.choice().probe.assumed {
            // One check assumed the strongest world: now the host's probe,
            // untried, as the world to judge in; should it fail too, the
            // worlds are tried in turn.
            let disable = std::env::var(sandbox::probe::DISABLE_VAR).unwrap_or_default();
            let probe = tokio::task::spawn_blocking(move || Probe::detect(&disable)).await;
            let Ok(probe) = probe else { return false };
            let choice = Choice::new(&self.opts, probe, Tried::default());
            *self.choice.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(choice);
            *retried.lock().unwrap_or_else(PoisonError::into_inner) = None;
            tracing::info!(
                "the strongest world could not be set up ({}); the host's probe gives: {}",
                trial::short(reason),
                self.sandbox_report()
            );
            return !matches!(self.world_kind(), WorldKind::None);
        }
        {
            let mut choice = self.choice.lock().unwrap_or_else(PoisonError::into_inner);
            let probe = choice.probe.clone();
            let config_dir = Some(Err("the worlds are being tried again".to_owned()));
            *choice = Arc::new(Choice { probe, config_dir, tried: Tried::default() });
        }
        drop(self.standby.lock().unwrap_or_else(PoisonError::into_inner).take());
        let opts = self.opts.clone();
        let tried = tokio::task::spawn_blocking(move || {
            let probe =
                Probe::detect(&std::env::var(sandbox::probe::DISABLE_VAR).unwrap_or_default());
            let (probe, tried) = Self::try_worlds(&opts, probe);
            Choice::new(&opts, probe, tried)
        })
        .await;
        let choice = tried.unwrap_or_else(|e| {
            let probe = self.choice().probe.clone();
            let config_dir = Some(Err(format!("the worlds could not be tried again: {e}")));
            Choice { probe, config_dir, tried: Tried::default() }
        });
        // a sandbox made while the worlds were tried (from the old probe) is
        // not the new choice's: the next check makes its own, and a standby
        // made in the old one is no longer fresh for it
        *self.choice.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(choice);
        let after = self.world_kind();
        tracing::warn!(
            "checks could not set up their sandbox ({}); the worlds were tried again: {}",
            trial::short(reason),
            self.sandbox_report()
        );
        tracing::debug!(before = before.name(), after = after.name(), "world");
        !matches!(after, WorldKind::None)
    }

    /// The check: a run of `haproxy -c` under `--check-memory` and the
    /// first file-size bound, and when that run may have hit either, a
    /// second under `--check-memory-max` and the larger file-size bound to
    /// tell, by the same deadline ([`verdict::needs_second_run`],
    /// [`verdict::settle`], [`verdict::settle_file_size`]). The message is
    /// held to the output cap.
    async fn run(&self, setup: &Setup, render: &Render, deadline: Instant) -> CheckOutcome {
        // the address-space bounds, neither above what this process may give a child
        let ceiling = sandbox::rlimits::address_space_ceiling();
        let bounds = verdict::MemoryBounds {
            first: self.opts.sandbox.memory.min(ceiling),
            second: self.opts.memory_max.min(ceiling),
        };
        // without the sandbox there is no bound; at or below the first, no second run
        let sandboxed = self.opts.sandbox.mode != sandbox::Mode::Off;
        let measures = sandboxed && bounds.second > bounds.first;
        let top = RunBounds::top(self.opts.memory_max, sandboxed);
        // a first run below the top: `--check-memory` of address space
        let below = RunBounds { address_space: bounds.first, resident: None, ..top };
        let first = if measures { below } else { top };
        // the larger file-size bound, for a run after one that may have hit a bound
        let file_size = sandbox::rlimits::FILE_SIZE_MAX.min(sandbox::rlimits::file_size_ceiling());
        let larger_files = RunBounds { file_size, ..top };
        let outcome = match self.run_once(setup, render, deadline, first).await {
            // the file-size bound, measured as the address space is
            Ok((outcome, Exit::Signal(libc::SIGXFSZ))) if sandboxed => {
                let second = self.run_once(setup, render, deadline, larger_files).await;
                let bounds = (first.file_size, larger_files.file_size);
                verdict::settle_file_size(outcome, second.map(|(outcome, _)| outcome), bounds)
            }
            Ok((outcome, exit)) if measures && verdict::needs_second_run(&outcome, exit) => {
                let second = self.run_once(setup, render, deadline, larger_files).await;
                verdict::settle(outcome, second.map(|(outcome, _)| outcome), bounds)
            }
            Ok((outcome, _)) => outcome,
            Err(reason) => unavailable(reason),
        };
        cap_message(outcome, self.opts.output_cap)
    }

    /// One run of `haproxy -c` over `render` in a fresh check directory
    /// (a second run must not see what the first wrote), under `bounds`,
    /// step by step. Any step that fails is why it could not run.
    async fn run_once(
        &self,
        setup: &Setup,
        render: &Render,
        deadline: Instant,
        bounds: RunBounds,
    ) -> Result<(CheckOutcome, Exit), String> {
        let started = Instant::now();
        // what an earlier check left goes now, and its next child is not made
        self.aftercare.hurry();
        let Armed { dir, launch } = self.armed(setup, deadline).await?;
        tracing::trace!(target: "rendergate::timing", "check directory and child ready");
        // the render laid out in it, off the runtime and by the deadline
        let job = Job {
            render: render.clone(),
            dir,
            limits: self.opts.limits,
            binary: setup.binary.path.clone(),
            config_dir: self.opts.sandbox.world.config_dir.clone(),
            stock: setup.sandbox.stock().clone(),
            in_flight: self.in_flight.clone(),
        };
        let dir = prepare::prepare(job, deadline).await?;
        tracing::trace!(target: "rendergate::timing", "render written");
        // `haproxy -c` in it, from the word to its child (under `bounds`) to
        // the end of its output, read as it arrives, with the thread that
        // started it (let go after the verdict). Its process group is dead
        // once this is over; dropped, it is stopped, and its thread kills
        // the group once the reaper has left.
        let ran = async {
            let time_left = deadline.saturating_duration_since(Instant::now());
            let word = Go {
                cpu_seconds: sandbox::rlimits::cpu_seconds(time_left.min(standby::ARMED_CPU)),
                memory: bounds.address_space,
                file_size: bounds.file_size,
            };
            // nothing of an earlier check is left when this one starts
            let earlier = tokio::time::timeout_at(deadline, self.aftercare.gone()).await;
            earlier.map_err(
                |_| "the check timed out while an earlier check's directory was removed",
            )?;
            let running = launch.go(word, deadline).await.map_err(|reason: String| {
                verdict::sanitise(&reason, dir.hidden(), &setup.binary.path)
            })?;
            let ctx = verdict::Context {
                config: render.config(),
                check_dir: dir.hidden(),
                haproxy_path: &setup.binary.path,
            };
            // Every line is classified as it arrives; only the excerpt is kept.
            let mut transcript = Transcript::new(ctx);
            let (exit, starter) = process::collect_output(
                running,
                &mut transcript,
                deadline,
                started,
                bounds.resident,
            )
            .await?;
            // what HAProxy said, read into a verdict: the file-size limit named when it killed
            let mut outcome = transcript.finish(exit);
            if self.opts.sandbox.mode != sandbox::Mode::Off {
                outcome = sandbox::explain_file_size(outcome, bounds.file_size);
            }
            Ok((outcome, exit, starter))
        };
        let (ran, starter) = match ran.await {
            Ok((outcome, exit, starter)) => (room_judged(outcome, exit, &dir), Some(starter)),
            Err(reason) => (Err(reason), None),
        };
        tracing::trace!(target: "rendergate::timing", "haproxy exited");
        // After the process group is dead (collect_output's guards), and after
        // the answer; dropped mid-check instead, the directory goes with the
        // future.
        self.aftercare.leave(Leftover { dir, starter }, &self.in_flight, self.next_standby(setup));
        ran
    }

    /// This check's child and its empty directory: the standby made ahead
    /// for this binary, else one made now.
    async fn armed(&self, setup: &Setup, deadline: Instant) -> Result<Armed, String> {
        let ahead = self.standby.lock().unwrap_or_else(PoisonError::into_inner).take();
        // made ahead for this binary and sandbox (dropped when the world changes)
        let fresh = |s: &Standby| s.fresh_for(&setup.binary.identity, &setup.sandbox);
        let standby = match ahead.filter(fresh) {
            Some(standby) => standby,
            None => Standby::arm(
                setup.binary.identity.clone(),
                self.place(deadline).await?,
                self.order(setup, false),
            )?,
        };
        standby.ready(deadline).await
    }

    /// Once the directories of checks that answered are gone (removed a
    /// moment after the answer, or before the next check starts HAProxy).
    pub async fn removed(&self) {
        self.aftercare.gone().await;
    }

    /// The directory the next check's child is made over, once it is made
    /// (`None` without one): empty until its check comes.
    pub async fn standby_dir(&self) -> Option<PathBuf> {
        let mut standby = self.standby.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        let dir = standby.settle().await.map(std::path::Path::to_path_buf);
        self.standby.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(standby);
        dir
    }

    /// What makes the next check's child, after a check's leftovers
    /// ([`standby`], [`aftercare`](crate::aftercare); a gate's checker with
    /// a directory of its own to make it in).
    fn next_standby(&self, setup: &Setup) -> Option<Next> {
        if !self.opts.standby {
            return None;
        }
        // in the config directory once the check's render is gone from it
        // (the aftercare empties it first), else a fresh directory
        let config_dir = self.choice().config_dir.clone().transpose().ok()?;
        let base = self.base.clone().ok()?;
        let (judge, order) = (setup.binary.identity.clone(), self.order(setup, true));
        let slot = self.standby.clone();
        Some(Box::new(move || {
            let place = match config_dir {
                Some(config_dir) => match config_dir.try_free() {
                    Some(permit) => Place::ConfigDir(config_dir, permit),
                    None => return, // a check holds it: that check makes its own
                },
                None => Place::Fresh(base),
            };
            match Standby::arm(judge, place, order) {
                Ok(standby) => *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(standby),
                Err(e) => tracing::debug!("the next check's child is made when it comes: {e}"),
            }
        }))
    }

    /// What a check's child is made of; `ahead` of its check, or for one
    /// that waits.
    fn order(&self, setup: &Setup, ahead: bool) -> Order {
        Order {
            sandbox: setup.sandbox.clone(),
            binary: setup.binary.path.clone(),
            dns_skip: self.opts.dns_skip,
            // the word lowers it to the run's own bound
            memory: RunBounds::top(self.opts.memory_max, true).address_space,
            in_flight: self.in_flight.clone(),
            copy_ahead: ahead && self.opts.copy_ahead,
        }
    }

    /// Where a check directory is made now: the checker's own directory, or
    /// the config directory once no other check holds it.
    async fn place(&self, deadline: Instant) -> Result<Place, String> {
        match &self.choice().config_dir {
            None => Ok(Place::Fresh(self.base.clone()?)),
            Some(Err(why)) => Err(why.clone()),
            Some(Ok(config_dir)) => {
                // one check at a time in it; another may hold it (a second run)
                let free = tokio::time::timeout_at(deadline, config_dir.free()).await;
                let permit = free.map_err(|_| {
                    "the check timed out waiting for the config directory, in use by another check"
                        .to_owned()
                })?;
                Ok(Place::ConfigDir(config_dir.clone(), permit))
            }
        }
    }
}

/// A run that did not pass while its render's own tmpfs is full may have
/// been refused for the room, not for the render (bare writes on a disk):
/// it is not judged. (The room holds the largest render and the largest
/// file a check may write, so only a render that writes many files gets
/// here.)
fn room_judged(
    outcome: CheckOutcome,
    exit: Exit,
    dir: &super::base::CheckDir,
) -> Result<(CheckOutcome, Exit), String> {
    match dir.room_filled() {
        Some(size) if !matches!(outcome, CheckOutcome::Passed { .. }) => Err(format!(
            "haproxy -c filled the room of its config directory, {} MiB (the render's limit, --max-render-size, with room for what it writes), so the render is not judged",
            size >> 20
        )),
        _ => Ok((outcome, exit)),
    }
}

/// The bounds one run of a check is under.
#[derive(Clone, Copy, Debug)]
struct RunBounds {
    /// Its address space (`RLIMIT_AS`).
    address_space: u64,
    /// The memory its processes may touch, read as it runs (`None`: not read).
    resident: Option<u64>,
    /// The largest file it may write (`RLIMIT_FSIZE`).
    file_size: u64,
}

impl RunBounds {
    /// A run at the top: `memory_max` (`--check-memory-max`) of memory
    /// touched, when sandboxed, and only a backstop of address space, four
    /// times that (HAProxy reserves what it never touches), held to this
    /// process's own ([`crate::resident`]); the first file-size bound,
    /// neither above this process's own.
    fn top(memory_max: u64, sandboxed: bool) -> RunBounds {
        let backstop = memory_max.saturating_mul(crate::resident::BACKSTOP_FACTOR);
        RunBounds {
            address_space: backstop.min(sandbox::rlimits::address_space_ceiling()),
            resident: sandboxed.then_some(memory_max),
            file_size: sandbox::rlimits::FILE_SIZE.min(sandbox::rlimits::file_size_ceiling()),
        }
    }
}

/// How long a dropped checker waits for a thread still writing or removing
/// one of its check directories (it stops at its next file once its check is
/// gone; removing what it wrote is what takes time).
const IN_FLIGHT_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

impl Drop for HaproxyChecker {
    /// No check can be running (checks borrow the checker), but a thread
    /// may still be removing what one wrote: the process may exit right
    /// after (on a signal, without waiting for the runtime's threads).
    fn drop(&mut self) {
        // what checks left goes now, and nothing more is made
        self.aftercare.close();
        // a child made ahead ends at its hold; its directory goes with it
        drop(self.standby.lock().unwrap_or_else(PoisonError::into_inner).take());
        if !self.in_flight.wait_idle(IN_FLIGHT_GRACE) {
            tracing::warn!(
                "a check directory was still being removed after {IN_FLIGHT_GRACE:?}; leaving it"
            );
        }
    }
}

impl Checker for HaproxyChecker {
    fn identity(&self) -> Arc<str> {
        self.binary.identity()
    }

    fn check<'a>(&'a self, render: &'a Render, deadline: Instant) -> CheckFuture<'a> {
        Box::pin(self.checked(render, deadline))
    }
}

fn unavailable(reason: String) -> CheckOutcome {
    CheckOutcome::Unavailable { reason }
}

/// The message built around alerts (context lines, config excerpts) can
/// outgrow the output it came from: it is held to the same cap.
fn cap_message(outcome: CheckOutcome, cap: usize) -> CheckOutcome {
    outcome.map_message(|mut text| {
        if text.len() > cap {
            text.truncate(verdict::char_floor(&text, cap));
            text.push_str(&format!("\n(the message was cut at {cap} bytes)"));
        }
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use FileKind::{General, Map};
    use rendergate_core::render::{FileKind, RenderFile};
    use std::path::Path;
    use std::time::Duration;

    // a config valid on every supported HAProxy
    use crate::trial::CONFIG as VALID;

    /// A pass without a remark.
    const PASSED: CheckOutcome = CheckOutcome::Passed { message: String::new() };

    impl HaproxyChecker {
        /// Where this checker's check directories are made
        /// (`<work dir>/rendergate-<euid>/<random>`), unless the base
        /// directory was refused.
        fn check_dirs(&self) -> Option<&Path> {
            self.base.as_ref().ok().map(|base| base.own_path())
        }
    }

    /// A checker without the sandbox (stand-in scripts need /bin/sh: they
    /// run unsandboxed; sandbox/tests.rs runs the real one), its check
    /// directories under `work`.
    fn unsandboxed(work: &Path, options: HaproxyOptions) -> HaproxyChecker {
        HaproxyChecker::new(HaproxyOptions {
            work_dir: Some(work.to_path_buf()),
            sandbox: SandboxOptions { mode: sandbox::Mode::Off, ..SandboxOptions::default() },
            ..options
        })
    }

    /// `checker`'s check of [`VALID`].
    async fn valid(checker: &HaproxyChecker) -> Checked {
        checker.check(&render(VALID, vec![]), Instant::now() + Duration::from_secs(20)).await
    }

    struct Fixture {
        work: tempfile::TempDir,
        checker: HaproxyChecker,
    }

    fn fixture(binary: impl Into<PathBuf>) -> Fixture {
        fixture_with(HaproxyOptions { binary: binary.into(), ..Default::default() })
    }

    /// A fixture whose checker has `options`, in a work directory of its own.
    fn fixture_with(options: HaproxyOptions) -> Fixture {
        let work = tempfile::tempdir().unwrap();
        let checker = unsandboxed(work.path(), options);
        Fixture { work, checker }
    }

    impl Fixture {
        async fn check(&self, render: &Render) -> CheckOutcome {
            self.check_within(render, Duration::from_secs(20)).await
        }

        async fn check_within(&self, render: &Render, within: Duration) -> CheckOutcome {
            self.checker.check(render, Instant::now() + within).await.outcome
        }

        /// Whether the leftovers are gone within 5 s (a check directory
        /// given up on is removed by the thread that was writing it).
        async fn gone_soon(&self) -> bool {
            within(250, async || self.leftovers().await.is_empty()).await
        }

        /// Everything under the work directory but the base directory,
        /// this checker's (otherwise empty) subdirectory in it, and the
        /// next check's directory, made ahead, while it holds only its
        /// empty haproxy.cfg.
        async fn leftovers(&self) -> Vec<PathBuf> {
            let own = self.checker.check_dirs().expect("the base directory was made");
            self.checker.removed().await;
            let standby = self.checker.standby_dir().await;
            let mut keep = vec![own.parent().unwrap(), own];
            // made ahead: an empty haproxy.cfg alone
            let config = standby.as_ref().map(|dir| dir.join(crate::layout::CONFIG_NAME));
            let made_ahead = |dir: &&Path| {
                tree(dir) == config.iter().cloned().collect::<Vec<_>>()
                    && std::fs::metadata(config.as_ref().unwrap()).is_ok_and(|m| m.len() == 0)
            };
            if let Some(dir) = standby.as_deref().filter(made_ahead) {
                keep.extend([dir, config.as_deref().unwrap()]);
            }
            // the host view's stand-ins live as long as the checker
            let view = own.join("host-view");
            tree(self.work.path())
                .into_iter()
                .filter(|p| !keep.contains(&p.as_path()) && !p.starts_with(&view))
                .collect()
        }
    }

    /// Everything under `dir`; what vanishes while it is walked (a check
    /// directory being removed) is left out.
    fn tree(dir: &Path) -> Vec<PathBuf> {
        let mut all = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
                all.extend(tree(&p));
            }
            all.push(p);
        }
        all
    }

    fn euid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    fn render(config: &str, files: Vec<RenderFile>) -> Render {
        Render::new("plan", "r1", config, files)
    }

    fn file(kind: FileKind, path: impl Into<String>, content: impl Into<Vec<u8>>) -> RenderFile {
        RenderFile { kind, path: path.into(), content: content.into() }
    }

    /// A stand-in binary: a shell script written into its own directory.
    /// A child shell writes it: a write descriptor open in this (threaded)
    /// test process could leak into another test's fork and make exec fail
    /// with "Text file busy".
    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("fake-haproxy");
        let status = std::process::Command::new("/bin/sh")
            .args(["-c", r#"printf '#!/bin/sh\n%s\n' "$2" > "$1" && chmod 755 "$1""#, "sh"])
            .arg(&path)
            .arg(body)
            .status()
            .unwrap();
        assert!(status.success());
        path
    }

    /// Whether `pid` is still a live (not zombie) process.
    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
            !matches!(state, Some('Z' | 'X'))
        })
    }

    async fn wait_dead(pid: i32) -> bool {
        within(100, async || !alive(pid)).await
    }

    /// Whether `done` comes true within `tries` looks, 20 ms apart.
    async fn within(tries: usize, done: impl AsyncFn() -> bool) -> bool {
        for _ in 0..tries {
            if done().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    fn sha256(path: &Path) -> String {
        use sha2::Digest;
        rendergate_core::hex::hex(&sha2::Sha256::digest(std::fs::read(path).unwrap()))
    }

    #[tokio::test]
    async fn identity_names_the_resolved_binary_and_its_hash() {
        let f = fixture("haproxy");
        let binary = f.checker.binary().expect("haproxy on PATH");
        assert!(binary.is_absolute(), "{}", binary.display());
        let expected = format!("{} sha256:{}", binary.display(), sha256(&binary));
        assert_eq!(*f.checker.identity(), *expected);
        assert_eq!(f.checker.identity().len(), binary.as_os_str().len() + 8 + 64);
        let checked = valid(&f.checker).await;
        assert_eq!(*checked.judge, *expected);
    }

    #[tokio::test]
    async fn a_binary_replaced_after_start_judges_the_next_check_under_its_own_identity() {
        let tools = tempfile::tempdir().unwrap();
        let path = script(tools.path(), "exit 0");
        let f = fixture(&path);
        let first = f.checker.identity();
        assert_eq!(*first, format!("{} sha256:{}", path.display(), sha256(&path)));
        let checked = valid(&f.checker).await;
        assert_eq!(checked, Checked { outcome: PASSED, judge: first.clone() });

        script(tools.path(), "echo '[ALERT] (1) : config : refused by the new binary'\nexit 1");
        let second = f.checker.identity();
        assert_ne!(second, first);
        assert_eq!(*second, format!("{} sha256:{}", path.display(), sha256(&path)));
        let checked = valid(&f.checker).await;
        assert_eq!(checked.judge, second);
        assert_eq!(checked.outcome.label(), "refused", "{checked:?}");
    }

    #[tokio::test]
    async fn a_binary_installed_after_start_runs_at_the_next_check_and_one_removed_could_not_run() {
        let tools = tempfile::tempdir().unwrap();
        let path = tools.path().join("fake-haproxy");
        let f = fixture(&path);
        let not_found = format!("haproxy binary not found: {}", path.display());
        assert_eq!(*f.checker.identity(), format!("{} missing", path.display()));
        assert!(f.checker.sandbox().is_none());
        let checked = valid(&f.checker).await;
        let CheckOutcome::Unavailable { reason } = &checked.outcome else { panic!("{checked:?}") };
        assert!(reason.starts_with(&not_found), "{reason}");
        assert_eq!(*checked.judge, format!("{} missing", path.display()));

        script(tools.path(), "exit 0");
        assert!(f.checker.sandbox().is_some(), "a sandbox is made for the binary once it is there");
        let checked = valid(&f.checker).await;
        assert_eq!(checked.outcome, PASSED);
        assert_eq!(*checked.judge, format!("{} sha256:{}", path.display(), sha256(&path)));

        std::fs::remove_file(&path).unwrap();
        let out = f.check(&render(VALID, vec![])).await;
        let CheckOutcome::Unavailable { reason } = &out else { panic!("{out:?}") };
        assert!(reason.starts_with(&not_found), "{reason}");
    }

    #[tokio::test]
    async fn a_binary_replaced_during_the_check_is_run_again_and_named() {
        // the first binary puts the second in its own place while it runs:
        // its answer could be either's, so the check runs again, and the
        // answer is the second's, under the second's identity
        let tools = tempfile::tempdir().unwrap();
        let next_dir = tempfile::tempdir().unwrap();
        let next = script(
            next_dir.path(),
            "echo '[ALERT] (1) : config : refused by the second binary'\nexit 1",
        );
        let path = script(tools.path(), &format!("mv {} \"$0\"\nexit 0", next.display()));
        let f = fixture(&path);
        let first = f.checker.identity();
        let checked = valid(&f.checker).await;
        assert!(!next.exists(), "the first binary ran");
        assert_ne!(checked.judge, first);
        assert_eq!(*checked.judge, format!("{} sha256:{}", path.display(), sha256(&path)));
        assert_eq!(checked.outcome.label(), "refused", "{checked:?}");
        assert!(checked.outcome.message().contains("refused by the second binary"), "{checked:?}");

        // one that replaces itself at every run never gets a judge
        let copy = next_dir.path().join("copy");
        let restless = format!(
            "cp \"$0\" {copy}\necho \"# $$\" >> {copy}\nmv {copy} \"$0\"\nexit 0",
            copy = copy.display()
        );
        script(tools.path(), &restless);
        let checked = valid(&f.checker).await;
        assert_eq!(
            checked.outcome,
            unavailable("the haproxy binary kept changing during the check (3 runs)".into())
        );
    }

    #[tokio::test]
    async fn an_invalid_config_is_refused_readably() {
        let f = fixture("haproxy");
        let config = format!("{VALID}  bogus-keyword here\n");
        let out = f.check(&render(&config, vec![])).await;
        let CheckOutcome::Refused { message } = out else { panic!("{out:?}") };
        assert!(message.contains("→ [ALERT]"), "{message}");
        assert!(message.contains("[haproxy.cfg:9]"), "{message}");
        assert!(message.contains("  Config context:"), "{message}");
        assert!(message.contains("  →    9    bogus-keyword here"), "{message}");
        assert!(message.contains("path to executable is haproxy"), "{message}");
        assert!(!message.contains(&f.work.path().display().to_string()), "{message}");
        assert!(!message.contains(&format!("rendergate-{}", euid())), "{message}");
        assert!(!message.contains("/usr/sbin"), "{message}");
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
    }

    #[tokio::test]
    async fn no_listener_passes_with_a_remark() {
        let f = fixture("haproxy");
        let out = f.check(&render("global\ndefaults\n  mode http\n", vec![])).await;
        assert_eq!(
            out,
            CheckOutcome::Passed {
                message: "valid, but HAProxy would not start it: no listener (exit 2)".into()
            }
        );
    }

    #[tokio::test]
    async fn map_files_are_found_at_their_place_in_the_check_directory() {
        let f = fixture("haproxy");
        let config = VALID.to_owned()
            + "  http-request set-header X-Backend %[req.hdr(host),lower,map(maps/hosts.map,none)]\n";
        let map = file(Map, "maps/hosts.map", "example.com b1\n");
        let out = f.check(&render(&config, vec![map])).await;
        assert_eq!(out, PASSED);
        // the same config without the file: HAProxy cannot open the map
        let out = f.check(&render(&config, vec![])).await;
        let CheckOutcome::Refused { message } = out else { panic!("{out:?}") };
        assert!(message.contains("maps/hosts.map"), "{message}");
        assert!(!message.contains(&format!("rendergate-{}", euid())), "{message}");
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
    }

    #[tokio::test]
    async fn a_missing_binary_is_unavailable_for_every_check() {
        let f = fixture("/nonexistent/haproxy");
        assert_eq!(*f.checker.identity(), *"/nonexistent/haproxy missing");
        let out = f.check(&render(VALID, vec![])).await;
        let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
        assert!(reason.starts_with("haproxy binary not found: /nonexistent/haproxy"), "{reason}");

        let f = fixture("no-such-haproxy-binary");
        assert_eq!(*f.checker.identity(), *"no-such-haproxy-binary missing");
        let out = f.check(&render(VALID, vec![])).await;
        assert_eq!(
            out,
            unavailable("haproxy binary not found: no no-such-haproxy-binary on PATH".into())
        );
        assert!(f.leftovers().await.is_empty());
    }

    #[tokio::test]
    async fn a_traversal_path_is_unavailable_and_writes_nothing() {
        let f = fixture("haproxy");
        // the check directory would be work/rendergate-<euid>/<random>/check.<n>.<nanos>,
        // so ../../x would land in the base directory
        let escape_target = f.checker.check_dirs().unwrap().parent().unwrap().join("x");
        let files = vec![file(Map, "maps/ok.map", "a b\n"), file(General, "../../x", "pwned")];
        let out = f.check(&render(VALID, files)).await;
        assert_eq!(
            out,
            unavailable(r#"render file path "../../x" escapes the check directory"#.into())
        );
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
        assert!(!escape_target.exists());
    }

    #[tokio::test]
    async fn a_deadline_that_has_nearly_passed_times_out() {
        let f = fixture("haproxy");
        let out = f.check_within(&render(VALID, vec![]), Duration::from_millis(1)).await;
        let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
        // in haproxy, or still preparing its directory
        assert!(
            reason.starts_with("haproxy -c timed out after")
                || reason.starts_with("the check timed out after"),
            "{reason}"
        );
        assert!(f.gone_soon().await, "{:?}", f.leftovers().await);
    }

    #[tokio::test]
    async fn the_next_check_starts_once_the_last_ones_directory_is_gone() {
        // a first check with many files, whose directory takes a while to
        // remove, then at once a second, which looks for the first's
        let tools = tempfile::tempdir().unwrap();
        let record = tools.path().join("seen");
        let f = roomy(script(
            tools.path(),
            &format!(
                "if [ -e {record}.first ]; then
  if [ -e \"$(cat {record}.first)\" ]; then echo there > {record}; else echo gone > {record}; fi
else pwd > {record}.first; fi
exit 0",
                record = record.display()
            ),
        ));
        let files = (0..3000).map(|i| file(Map, format!("maps/{i}.map"), "k v\n")).collect();
        assert_eq!(f.check(&render(VALID, files)).await.label(), "pass");
        assert_eq!(f.check(&render(VALID, vec![])).await.label(), "pass");
        assert_eq!(std::fs::read_to_string(&record).unwrap(), "gone\n");
    }

    /// A fixture whose renders may have a million files.
    fn roomy(binary: impl Into<PathBuf>) -> Fixture {
        let limits = RenderLimits { files: 1_000_000, ..RenderLimits::default() };
        fixture_with(HaproxyOptions { binary: binary.into(), limits, ..Default::default() })
    }

    /// `n` small files in 100 directories.
    fn many_files(n: usize) -> Vec<RenderFile> {
        (0..n).map(|i| file(General, format!("d{}/f{i}", i % 100), "x")).collect()
    }

    #[tokio::test]
    async fn a_render_past_a_limit_could_not_run_and_writes_nothing() {
        let limits = RenderLimits { files: 2, bytes: 1000 };
        let f = fixture_with(HaproxyOptions { limits, ..Default::default() });
        assert_eq!(f.check(&render(VALID, many_files(2))).await.label(), "pass");
        let out = f.check(&render(VALID, many_files(3))).await;
        assert_eq!(
            out,
            unavailable("the render has 3 files, more than --max-render-files 2".into())
        );
        let big = vec![file(Map, "a.map", "k v\n".repeat(250))];
        let out = f.check(&render(VALID, big)).await;
        let bytes = VALID.len() + 1000;
        assert_eq!(
            out,
            unavailable(format!("the render has {bytes} bytes, more than --max-render-size 1000"))
        );
        let deep = vec![file(General, vec!["a"; 33].join("/"), Vec::new())];
        let out = f.check(&render(VALID, deep)).await;
        let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
        assert!(
            reason.ends_with("lands 33 components deep, more than the 32 a render path may have"),
            "{reason}"
        );
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
    }

    #[tokio::test]
    async fn preparing_stops_at_the_deadline_off_the_runtime_and_removes_what_it_wrote() {
        let f = roomy("haproxy");
        let r = render(VALID, many_files(200_000));
        // a tick on the runtime's own thread: never held up by the writing
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let ticking = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                ticking.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let started = std::time::Instant::now();
        let out = f.check_within(&r, Duration::from_secs(2)).await;
        let took = started.elapsed();
        ticker.abort();
        let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
        assert!(
            reason.starts_with("the check timed out after ")
                && reason.contains("s while preparing"),
            "{reason}"
        );
        assert!(reason.ends_with(" of 200000 files written)"), "{reason}");
        assert!(took < Duration::from_millis(3000), "{took:?}");
        // this test's runtime has one thread: it ticked while the files were written
        assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) >= 100, "{ticks:?}");
        assert!(f.gone_soon().await, "{:?}", f.leftovers().await.len());
    }

    /// Runs a check of a million files until its directory holds a
    /// thousand, then drops it.
    async fn until_a_thousand_files_are_written(f: &Fixture) {
        let r = render(VALID, many_files(1_000_000));
        let check = f.checker.check(&r, Instant::now() + Duration::from_secs(600));
        let writing = async {
            while f.leftovers().await.len() < 1000 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            out = check => panic!("{out:?}"),
            () = writing => {}
        }
    }

    #[tokio::test]
    async fn a_dropped_checker_waits_until_the_directory_being_written_is_gone() {
        // as `serve` and `check` end on a signal: the check dropped, then the
        // checker, then the process exits without waiting for any thread
        let f = roomy("haproxy");
        until_a_thousand_files_are_written(&f).await;
        let Fixture { work, checker } = f;
        drop(checker);
        assert!(tree(work.path()).is_empty(), "{} left", tree(work.path()).len());
    }

    #[tokio::test]
    async fn dropping_the_check_while_it_prepares_stops_the_writing_and_removes_it() {
        let f = roomy("haproxy");
        until_a_thousand_files_are_written(&f).await;
        // Writing all of it takes far longer than this: the thread stopped.
        assert!(f.gone_soon().await, "{:?}", f.leftovers().await.len());
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group() {
        let tools = tempfile::tempdir().unwrap();
        let pidfile = tools.path().join("bg.pid");
        let f = fixture(script(
            tools.path(),
            &format!("sleep 300 &\necho $! > {}\nwait", pidfile.display()),
        ));
        let started = std::time::Instant::now();
        let out = f.check_within(&render(VALID, vec![]), Duration::from_millis(500)).await;
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
        assert!(
            reason.starts_with("haproxy -c timed out after 4")
                || reason.starts_with("haproxy -c timed out after 500"),
            "{reason}"
        );
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert!(wait_dead(pid).await, "background sleep {pid} survived the timeout");
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
    }

    #[tokio::test]
    async fn background_processes_do_not_outlive_a_finished_check() {
        let tools = tempfile::tempdir().unwrap();
        let pidfile = tools.path().join("bg.pid");
        // exits at once, leaving a child holding the output pipe
        let f = fixture(script(
            tools.path(),
            &format!("sleep 300 &\necho $! > {}\nexit 0", pidfile.display()),
        ));
        let started = std::time::Instant::now();
        let out = f.check(&render(VALID, vec![])).await;
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        assert_eq!(out, PASSED);
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert!(wait_dead(pid).await, "background sleep {pid} outlived the check");
    }

    /// Whether any process is left in process group `pgid` within 5 s
    /// (zombies included: a process not reaped is left too).
    async fn group_gone(pgid: i32) -> bool {
        within(250, async || {
            !std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                stat.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split(' ').nth(2)?.parse::<i32>().ok())
                    == Some(pgid)
            })
        })
        .await
    }

    #[tokio::test]
    async fn every_process_of_a_check_is_reaped_after_it() {
        // the child, haproxy (here a script) and its keeper share a group
        let tools = tempfile::tempdir().unwrap();
        let pidfile = tools.path().join("haproxy.pid");
        let f = fixture(script(tools.path(), &format!("echo $$ > {}\nexit 0", pidfile.display())));
        assert_eq!(f.check(&render(VALID, vec![])).await.label(), "pass");
        let pgid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        f.checker.removed().await;
        assert!(group_gone(pgid).await, "a process of check {pgid} was left, or not reaped");
    }

    #[tokio::test]
    async fn dropping_the_check_kills_the_group_and_removes_the_directory() {
        let tools = tempfile::tempdir().unwrap();
        let pidfile = tools.path().join("bg.pid");
        let f = fixture(script(
            tools.path(),
            &format!("sleep 300 &\necho $! > {}\nwait", pidfile.display()),
        ));
        let r = render(VALID, vec![]);
        let fut = f.checker.check(&r, Instant::now() + Duration::from_secs(60));
        // let it start, then drop it mid-check
        assert!(tokio::time::timeout(Duration::from_millis(500), fut).await.is_err());
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert!(wait_dead(pid).await, "background sleep {pid} survived cancellation");
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
    }

    #[tokio::test]
    async fn the_check_runs_in_the_check_directory_with_the_expected_arguments() {
        let tools = tempfile::tempdir().unwrap();
        let record = tools.path().join("record");
        let binary = script(
            tools.path(),
            &format!(
                "{{ echo \"$@\"; pwd; ls -R; cat haproxy.cfg; }} > {}\nexit 0",
                record.display()
            ),
        );
        let f = fixture(&binary);
        let files = vec![file(Map, "/etc/haproxy/maps/a.map", "k v\n")];
        let out = f.check(&render("global\n  default-path origin /etc/haproxy\n", files)).await;
        assert_eq!(out, PASSED);
        let seen = std::fs::read_to_string(&record).unwrap();
        let mut lines = seen.lines();
        assert_eq!(lines.next(), Some("-dr -V -c -f haproxy.cfg"));
        let cwd = lines.next().unwrap();
        let work = std::fs::canonicalize(f.work.path()).unwrap();
        let own = format!("{}/rendergate-{}/", work.display(), euid());
        assert!(cwd.starts_with(&own), "{seen}");
        assert_eq!(Path::new(cwd).parent(), f.checker.check_dirs(), "{seen}");
        assert!(seen.contains("maps:\na.map"), "{seen}");
        // the config as sent: never rewritten
        assert!(seen.contains("  default-path origin /etc/haproxy\n"), "{seen}");

        let options =
            HaproxyOptions { binary: binary.clone(), dns_skip: false, ..Default::default() };
        let checker = unsandboxed(f.work.path(), options);
        checker.check(&render("global\n", vec![]), Instant::now() + Duration::from_secs(20)).await;
        let seen = std::fs::read_to_string(&record).unwrap();
        assert_eq!(seen.lines().next(), Some("-V -c -f haproxy.cfg"));
        drop(checker); // its own subdirectory goes with it
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
    }

    #[tokio::test]
    async fn stdout_and_stderr_keep_their_order_and_output_is_capped() {
        let tools = tempfile::tempdir().unwrap();
        let f = fixture(script(
            tools.path(),
            "echo '[NOTICE] one'\necho '[ALERT] two' >&2\necho '[NOTICE] three'\nexit 1",
        ));
        let out = f.check(&render(VALID, vec![])).await;
        assert_eq!(
            out,
            CheckOutcome::Refused {
                message: "  [NOTICE] one\n→ [ALERT] two\n  [NOTICE] three".into()
            }
        );

        // 200 KiB of output: nothing blocks, the reason quotes a bounded head
        let f = fixture(script(tools.path(), "head -c 204800 /dev/zero | tr '\\0' 'x'\nexit 1"));
        let out = f.check(&render(VALID, vec![])).await;
        let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
        assert!(
            reason.starts_with("haproxy -c exited 1 without judging the config: xxx"),
            "{}",
            &reason[..80]
        );
        assert!(reason.len() < 4096 && reason.ends_with(" more bytes)"), "{}", reason.len());

        // 8 MiB of warnings with the alert at the very end: refused, as bare haproxy -c says
        let f = fixture(script(
            tools.path(),
            "yes '[WARNING]  (1) : config : missing timeouts for backend.' | head -c 8388608\necho\necho '[ALERT]    (1) : config : unable to find required use_backend'\nexit 1",
        ));
        let out = f.check(&render(VALID, vec![])).await;
        let CheckOutcome::Refused { message } = out else { panic!("{out:?}") };
        assert!(
            message.contains("→ [ALERT]    (1) : config : unable to find required use_backend"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_signal_is_unavailable() {
        let tools = tempfile::tempdir().unwrap();
        let f = fixture(script(tools.path(), "kill -SEGV $$"));
        let out = f.check(&render(VALID, vec![])).await;
        assert_eq!(out, unavailable("haproxy was killed by signal 11 (SIGSEGV)".into()));
    }

    #[tokio::test]
    async fn a_sandbox_made_while_the_worlds_are_tried_again_is_not_kept() {
        let work = tempfile::tempdir().unwrap();
        let options = HaproxyOptions { work_dir: Some(work.path().into()), ..Default::default() };
        let checker = HaproxyChecker::new(options);
        let reason = "sandbox setup failed in layer 'world' at mount: Operation not permitted";
        let failed = CheckOutcome::Unavailable { reason: reason.into() };
        let mut retry = Box::pin(checker.try_again(&failed));
        // one poll: the worlds are being tried on a blocking thread
        assert!(tokio::time::timeout(Duration::ZERO, &mut retry).await.is_err());
        // a check that comes meanwhile makes its sandbox from the old probe
        let meanwhile = checker.setup().unwrap().sandbox;
        retry.await;
        let after = checker.setup().unwrap().sandbox;
        assert!(!Arc::ptr_eq(&meanwhile, &after), "the old probe's sandbox was kept");
    }

    #[tokio::test]
    async fn an_unwritable_work_dir_is_unavailable() {
        let work = tempfile::tempdir().unwrap();
        let checker = HaproxyChecker::new(HaproxyOptions {
            work_dir: Some(work.path().join("does-not-exist")),
            ..HaproxyOptions::default()
        });
        let out = valid(&checker).await.outcome;
        let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
        assert!(reason.starts_with("cannot create a check directory in "), "{reason}");
    }

    #[tokio::test]
    async fn the_base_directory_is_private_and_goes_with_the_checker() {
        let f = fixture("haproxy");
        let base =
            std::fs::canonicalize(f.work.path()).unwrap().join(format!("rendergate-{}", euid()));
        let meta = std::fs::symlink_metadata(&base).unwrap();
        assert!(meta.is_dir());
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777, 0o700);
        let own = f.checker.check_dirs().unwrap().to_path_buf();
        assert_eq!(own.parent(), Some(base.as_path()));
        // locked: named without the pid (it shows in a check's mountinfo)
        let name = own.file_name().unwrap().to_str().unwrap();
        assert!(name.len() == 16 && name.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
        assert_eq!(f.check(&render(VALID, vec![])).await, PASSED);
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
        // a clean exit leaves nothing in the work directory
        let Fixture { work, checker } = f;
        drop(checker);
        assert!(tree(work.path()).is_empty(), "{:?}", tree(work.path()));
    }

    #[tokio::test]
    async fn a_refused_base_directory_makes_every_check_could_not_run() {
        let work = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let base =
            std::fs::canonicalize(work.path()).unwrap().join(format!("rendergate-{}", euid()));
        std::os::unix::fs::symlink(elsewhere.path(), &base).unwrap();
        let checker = |work: &Path| unsandboxed(work, HaproxyOptions::default());
        let c = checker(work.path());
        assert_eq!(c.check_dirs(), None);
        for _ in 0..2 {
            let out = valid(&c).await.outcome;
            let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
            assert_eq!(
                reason,
                format!(
                    "cannot create a check directory in {}: {} is a symlink; refusing it (remove it, or run with another TMPDIR or work directory)",
                    work.path().display(),
                    base.display()
                )
            );
        }
        drop(c);
        assert!(tree(elsewhere.path()).is_empty());
        assert!(std::fs::symlink_metadata(&base).unwrap().file_type().is_symlink());

        // a real directory of another user (root can give it away)
        std::fs::remove_file(&base).unwrap();
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&base)
            .unwrap();
        if std::os::unix::fs::chown(&base, Some(65534), Some(65534)).is_err() {
            crate::needs::missing("root, to give the base directory away", "that half");
            return;
        }
        let c = checker(work.path());
        let out = valid(&c).await.outcome;
        let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
        assert!(
            reason.contains(&format!(
                "{} is owned by uid 65534, not by this process's uid",
                base.display()
            )),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn start_up_wipes_a_dead_runs_directories_and_keeps_a_live_ones() {
        let f = fixture("haproxy");
        let own = f.checker.check_dirs().unwrap().to_path_buf();
        let base = own.parent().unwrap().to_path_buf();
        // what a crashed run leaves: its subdirectory, a check directory, a secret
        let dead = {
            let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            base.join(format!("{pid}.00000000deadbeef"))
        };
        std::fs::create_dir_all(dead.join("0f0e0d0c-check")).unwrap();
        std::fs::write(dead.join("0f0e0d0c-check/haproxy.cfg"), "global\n").unwrap();
        // a check of the live checker is running meanwhile
        std::fs::write(own.join("in-flight"), "x").unwrap();

        let second = unsandboxed(f.work.path(), HaproxyOptions::default());
        assert!(!dead.exists(), "a dead run's directory survived start-up");
        assert!(own.join("in-flight").exists(), "a live checker's directory was wiped");
        let mut names: Vec<_> =
            std::fs::read_dir(&base).unwrap().map(|e| e.unwrap().path()).collect();
        names.sort();
        let mut expected = vec![own.clone(), second.check_dirs().unwrap().to_path_buf()];
        expected.sort();
        assert_eq!(names, expected);
        // both check, side by side
        assert_eq!(valid(&second).await.outcome.label(), "pass");
        drop(second);
        assert!(base.exists(), "the base went while a checker still uses it");
        std::fs::remove_file(own.join("in-flight")).unwrap();
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
    }

    #[tokio::test]
    async fn a_check_directory_lives_exactly_as_long_as_its_check() {
        let tools = tempfile::tempdir().unwrap();
        let record = tools.path().join("cwd");
        let pidfile = tools.path().join("bg.pid");
        // finished: the directory it ran in is gone afterwards
        let f = fixture(script(
            tools.path(),
            &format!("pwd > {0}\nls -l >> {0}\nexit 0", record.display()),
        ));
        let files = vec![file(Map, "maps/a.map", "k v\n")];
        assert_eq!(f.check(&render(VALID, files.clone())).await.label(), "pass");
        let seen = std::fs::read_to_string(&record).unwrap();
        let cwd = PathBuf::from(seen.lines().next().unwrap());
        assert_eq!(cwd.parent(), f.checker.check_dirs(), "{seen}");
        assert!(seen.contains("haproxy.cfg") && seen.contains("maps"), "{seen}");
        // removed after the answer, before the next check starts
        f.checker.removed().await;
        assert!(!cwd.exists());
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);

        // cancelled: dropped mid-check, the directory goes with the future,
        // and the whole group is killed
        let body = format!(
            "pwd > {}\nsleep 300 &\necho $! > {}\nwait",
            record.display(),
            pidfile.display()
        );
        let f = fixture(script(tools.path(), &body));
        let r = render(VALID, files);
        let fut = f.checker.check(&r, Instant::now() + Duration::from_secs(60));
        assert!(tokio::time::timeout(Duration::from_millis(500), fut).await.is_err());
        let cwd = PathBuf::from(std::fs::read_to_string(&record).unwrap().trim());
        assert_eq!(cwd.parent(), f.checker.check_dirs());
        assert!(!cwd.exists(), "{} outlived its cancelled check", cwd.display());
        assert!(f.leftovers().await.is_empty(), "{:?}", f.leftovers().await);
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert!(wait_dead(pid).await, "background sleep {pid} survived cancellation");
    }
}
