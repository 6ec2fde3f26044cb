//! The sandbox around `haproxy -c`: what a check may do, prepared in the
//! parent, applied in the forked child with raw system calls only.
//!
//! Everything that allocates or reads files happens in the parent before
//! `fork`: the Landlock ruleset fd, the seccomp program, the limits, the
//! world's operations. The child then, in this order: (process group, set
//! by `Command::process_group(0)` before it) `fchdir`s to the check
//! directory's descriptor (the child needs no path string; with the sandbox
//! off too), and runs `ChildSetup::run`: parent-death signal, rlimits,
//! namespaces, the world (ids mapped, mounts made, root pivoted, the config
//! directory entered, the host name set: [`world`]), capability drop,
//! `no_new_privs`, Landlock, seccomp; then, held ([`Hold`]), it waits for
//! the word to go, lowers its CPU and address-space limits to the check's,
//! and `execve`s haproxy with an empty environment but for the operator's
//! `--check-env`. A failing step returns an error code that carries the layer
//! ([`spawn_failure`] reads it back), so the check says "sandbox setup
//! failed in layer 'landlock': …" and counts as could-not-run.

pub mod caps;
pub mod hold;
pub mod landlock;
pub mod loader;
pub mod namespaces;
pub mod network;
pub mod probe;
pub mod processes;
pub mod rlimits;
pub mod seccomp;
pub mod world;

pub use hold::{Go, Hold, Keeper};
pub use probe::Probe;

use rendergate_core::CheckOutcome;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;

/// How much sandbox a check must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Landlock and seccomp required; without them every check could not run.
    #[default]
    Strict,
    /// Whatever the host has; a warning names what is missing.
    BestEffort,
    /// Plain exec, the gate's environment inherited: for debugging.
    Off,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Strict => "strict",
            Mode::BestEffort => "best-effort",
            Mode::Off => "off",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        let modes = [Mode::Strict, Mode::BestEffort, Mode::Off];
        let unknown = || format!("unknown sandbox mode {s:?} (strict, best-effort, off)");
        modes.into_iter().find(|m| m.name() == s).ok_or_else(unknown)
    }
}

/// A check's first bound by default: `--check-memory-max`'s, so that a
/// check is one run, at the top (no address-space limit there: the memory
/// it touches is bounded instead, [`crate::resident`]). A lower first bound buys nothing a render cannot undo
/// (one that is refused under it runs again under the larger bound, and a
/// render can always make itself refused) and costs a refusal a second run
/// (twice bare's time, BENCHMARKS.md). For scale: a 10,000-backend render
/// (one server each) passes at 192 MiB of address space with haproxy 2.6
/// (peak RSS 125 MiB); a 1.5 GB `ring` or `tune.ssl.cachesize 4000000` need
/// more than 1 GiB.
pub const DEFAULT_MEMORY: u64 = rlimits::DEFAULT_MEMORY_MAX;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxOptions {
    pub mode: Mode,
    /// Address space limit of the check, in bytes.
    pub memory: u64,
    /// What the check's world holds besides the render.
    pub world: world::WorldOptions,
    /// HAProxy's environment (`--check-env`), in every mode; nothing else.
    pub env: Vec<(String, String)>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            mode: Mode::Strict,
            memory: DEFAULT_MEMORY,
            world: world::WorldOptions::default(),
            env: Vec::new(),
        }
    }
}

/// Whether checks get a world of their own (namespaces with mounts, the
/// sandbox on); otherwise the render is laid out in the config directory
/// itself ([`crate::config_dir`]), or, the sandbox off, in a fresh one.
pub fn gives_world(mode: Mode, probe: &Probe) -> bool {
    mode != Mode::Off && probe.unshare_flags() & libc::CLONE_NEWNS != 0
}

/// The layers which run, decided once per process (or per checker).
#[derive(Debug)]
pub struct Sandbox {
    opts: SandboxOptions,
    probe: Probe,
    /// Strict mode on a host without Landlock or seccomp: every check's reason.
    refusal: Option<String>,
    seccomp: Option<Arc<Vec<seccompiler::sock_filter>>>,
    grants: landlock::Grants,
    /// The root checks see, when the host gives user and mount namespaces.
    world: Option<Arc<world::World>>,
    /// The stock files laid under each render, in either world.
    stock: Arc<[world::StockFile]>,
}

impl Sandbox {
    /// The sandbox for checks running `binary`, given this host's probe
    /// (tests pass one with layers forced absent); its world's root is
    /// mounted over `private`, the checker's own directory, in each child's
    /// mount namespace.
    pub fn with_probe(
        opts: SandboxOptions,
        binary: &Path,
        probe: Probe,
        private: Option<&Path>,
    ) -> Sandbox {
        let mut refusal = probe.strict_gap().filter(|_| opts.mode == Mode::Strict);
        // Resolving the binary's libraries once, for Landlock and the world.
        let closure = loader::closure(binary).ok();
        tracing::trace!(target: "rendergate::timing", "loader closure read");
        let mut grants = landlock::Grants::for_closure(binary, closure.as_ref());
        let mut world = None;
        if gives_world(opts.mode, &probe) {
            let closure = closure.unwrap_or_default();
            match private.map(|dir| world::World::build(dir, binary, &closure, &opts.world)) {
                Some(Ok(built)) => {
                    grants = grants.with_world(&built);
                    world = Some(Arc::new(built));
                }
                Some(Err(e)) => refusal = Some(format!("cannot build the check's world: {e}")),
                None => refusal = Some("the check's world has no private directory".into()),
            }
        }
        tracing::trace!(target: "rendergate::timing", "world planned");
        let mut stock: Arc<[world::StockFile]> = Arc::from(Vec::new());
        if let Some(world) = &world {
            stock = world.stock().into();
        } else if opts.mode != Mode::Off && refusal.is_none() {
            // the config-directory world: the host's own read-only parts
            grants = grants.with_host_parts(&opts.world);
            match world::stock_files(&opts.world) {
                Ok(files) => stock = files.into(),
                Err(e) => refusal = Some(format!("cannot read the stock files: {e}")),
            }
        }
        let mut seccomp = None;
        if opts.mode != Mode::Off && probe.seccomp.is_ok() {
            // in the world the network is its own loopback: connect reaches nothing else
            match seccomp::program(world.is_some()) {
                Ok(prog) => seccomp = Some(prog),
                Err(e) if opts.mode == Mode::Strict => refusal = refusal.or(Some(e)),
                Err(_) => {}
            }
        }
        Sandbox { grants, opts, probe, refusal, seccomp, world, stock }
    }

    /// The world checks see (`None` without namespaces or with the sandbox
    /// off); shared, as a check directory's preparation holds it.
    pub fn world(&self) -> Option<&Arc<world::World>> {
        self.world.as_ref()
    }

    pub fn mode(&self) -> Mode {
        self.opts.mode
    }

    /// The stock files laid under each render, the render's own winning.
    pub fn stock(&self) -> &Arc<[world::StockFile]> {
        &self.stock
    }

    pub fn options(&self) -> &SandboxOptions {
        &self.opts
    }

    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// In best-effort mode, what is missing (for the one warning).
    pub fn missing(&self) -> Vec<&'static str> {
        self.probe
            .layers(self.opts.mode)
            .into_iter()
            .filter(|(_, on)| !on)
            .map(|(n, _)| n)
            .collect()
    }

    /// Everything one check's child needs, made now in the parent.
    /// `check_dir`: the check directory's descriptor, which the child
    /// `fchdir`s to and Landlock grants from; it must stay open until
    /// `spawn` has returned. `limits`: the child's own.
    pub fn prepare<'a>(
        &self,
        check_dir: BorrowedFd<'a>,
        limits: rlimits::Limits,
    ) -> Result<Prepared<'a>, String> {
        let env = self.opts.env.clone();
        if self.opts.mode == Mode::Off {
            return Ok(Prepared { dir: check_dir, setup: None, ruleset: None, env, hold: None });
        }
        if let Some(refusal) = &self.refusal {
            return Err(refusal.clone());
        }
        let abi = self.probe.landlock.as_ref().ok().copied();
        let ruleset = abi
            .map(|abi| landlock::ruleset(abi, &self.grants, check_dir))
            .transpose()
            .map_err(|e| format!("sandbox setup failed in layer 'landlock': {e}"))?;
        let setup = ChildSetup {
            parent: rustix::process::getpid().as_raw_nonzero().get(),
            limits,
            unshare: self.probe.unshare_flags(),
            ruleset: ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
            seccomp: self.seccomp.clone(),
            world: self.world.clone(),
            abi: abi.unwrap_or(0),
            channel: -1,
            exposed: processes::Exposed::of_this_process(),
        };
        Ok(Prepared { dir: check_dir, setup: Some(setup), ruleset, env, hold: None })
    }
}

/// One check's sandbox, ready to be put on a command. Keep it alive until
/// `spawn` has returned: it owns the Landlock ruleset fd the child uses, and
/// borrows the check directory's descriptor the child `fchdir`s to.
pub struct Prepared<'a> {
    dir: BorrowedFd<'a>,
    setup: Option<ChildSetup>,
    ruleset: Option<OwnedFd>,
    /// HAProxy's whole environment.
    env: Vec<(String, String)>,
    /// Where the child waits for the word to go, last before `execve`.
    hold: Option<Hold>,
}

impl Prepared<'_> {
    /// The Landlock ruleset the child's setup names by number, for a caller
    /// that must keep it open until `spawn` returns without keeping `self`.
    pub fn into_ruleset(self) -> Option<OwnedFd> {
        self.ruleset
    }

    /// Where a child with a world of its own hands the gate what it made:
    /// `channel`, the child's end of a [`network::hand_over_channel`], open
    /// until `spawn` returns. Its resolver socket, where it has a network
    /// of its own ([`network::hand_over_resolver`], [`Prepared::resolves`]);
    /// its render's own tmpfs, for the gate to write the render into rather
    /// than the check directory bound there, so that the check sees no host
    /// path of it ([`Prepared::hands_render`]).
    pub fn with_channel(mut self, channel: RawFd) -> Self {
        if let Some(setup) = self.setup.as_mut().filter(|setup| setup.world.is_some()) {
            setup.channel = channel;
        }
        self
    }

    /// Whether the child hands over a resolver socket.
    pub fn resolves(&self) -> bool {
        self.setup.as_ref().is_some_and(|setup| setup.resolver() >= 0)
    }

    /// Whether the child makes a PID namespace of its own: it is then the
    /// reaper ([`processes`]), and the end of its word's pipe stops it.
    pub fn own_processes(&self) -> bool {
        self.setup.as_ref().is_some_and(|setup| setup.unshare & libc::CLONE_NEWPID != 0)
    }

    /// Whether the child hands over its render's tmpfs.
    pub fn hands_render(&self) -> bool {
        self.setup.as_ref().is_some_and(|setup| setup.channel >= 0)
    }

    /// The child, its sandbox made, waits at `hold` for the word to go
    /// before `execve` (a check's child made ahead, [`crate::standby`]).
    pub fn held(mut self, hold: Hold) -> Self {
        self.hold = Some(hold);
        self
    }

    /// Puts the sandbox on `cmd`: the environment (`--check-env` only) and
    /// the child setup. With the sandbox off, the child only `fchdir`s to
    /// the check directory (otherwise a plain exec). A held child
    /// ([`Hold`]) `execve`s itself after its word; its `spawn` returns once
    /// it waits at the hold.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        cmd.env_clear().envs(self.env.iter().map(|(k, v)| (k, v)));
        // the init's and the keeper's stack, mapped before the fork
        processes::map_clone_stack();
        let (dir, setup, hold) = (self.dir.as_raw_fd(), self.setup.clone(), self.hold.clone());
        // SAFETY: `enter`, `ChildSetup::run` and `Hold`'s steps make only
        // async-signal-safe raw system calls on descriptors the caller keeps
        // open until `spawn` returns, and touch only memory prepared before
        // the fork.
        unsafe {
            cmd.pre_exec(move || {
                enter(dir)?;
                match (&setup, &hold) {
                    (Some(setup), _) => setup.run(hold.as_ref())?,
                    (None, Some(hold)) => hold.keeper.spawn()?,
                    (None, None) => {}
                }
                // limits are lowered at the word only where the sandbox sets them
                hold.as_ref().map_or(Ok(()), |hold| hold.run(setup.is_some()))
            });
        }
    }
}

/// The steps of the child, by number in the error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    DeathSignal = 1,
    Rlimits = 2,
    Namespaces = 3,
    Capabilities = 4,
    NoNewPrivs = 5,
    Landlock = 6,
    Seccomp = 7,
    /// The `fchdir` to the check directory (first, and also without a sandbox).
    CheckDirectory = 8,
    /// The check's world: ids, mounts, root, host name, in the new namespaces.
    World = 9,
    /// A child made ahead, at its hold ([`Hold`]): closing what it inherited.
    Hold = 10,
}

impl Layer {
    /// Every layer, by name.
    const ALL: [(Layer, &'static str); 10] = [
        (Layer::CheckDirectory, "check-directory"),
        (Layer::DeathSignal, "parent-death-signal"),
        (Layer::Rlimits, "rlimits"),
        (Layer::Namespaces, "namespaces"),
        (Layer::World, "world"),
        (Layer::Capabilities, "capabilities"),
        (Layer::NoNewPrivs, "no_new_privs"),
        (Layer::Landlock, "landlock"),
        (Layer::Seccomp, "seccomp"),
        (Layer::Hold, "hold"),
    ];
}

/// The child's error codes are `layer << 24 | op << 14 | step << 10 |
/// errno`: std hands the raw code of a `pre_exec` error back to `spawn`'s
/// caller unchanged, errnos stay below 2^10, a layer's step ([`world::Step`])
/// below 2^4, and `op` is the failed world operation's index + 1 (0: none).
const LAYER_SHIFT: i32 = 24;
const OP_SHIFT: i32 = 14;
const STEP_SHIFT: i32 = 10;

/// This thread's errno, after a raw system call failed (reading it
/// allocates nothing: safe in a forked child).
pub(crate) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// 0 or the errno of `result`, as the child's steps report it.
pub(crate) fn errno_of(result: rustix::io::Result<()>) -> i32 {
    result.map_or_else(|e| e.raw_os_error(), |()| 0)
}

pub(crate) fn tagged(layer: Layer, errno: i32) -> io::Error {
    tagged_step(layer, 0, None, errno)
}

/// As [`tagged`], naming the layer's step that failed (0: none), and the
/// world's operation.
fn tagged_step(layer: Layer, step: i32, op: Option<usize>, errno: i32) -> io::Error {
    // an index past the field's room names no operation rather than a wrong one
    let room = (1 << (LAYER_SHIFT - OP_SHIFT)) - 1;
    let op = op.map(|i| i + 1).filter(|&i| i <= room).map_or(0, |i| i as i32);
    io::Error::from_raw_os_error(
        ((layer as i32) << LAYER_SHIFT)
            | (op << OP_SHIFT)
            | ((step & 0xf) << STEP_SHIFT)
            | (errno & ((1 << STEP_SHIFT) - 1)),
    )
}

/// The operator's message for a failed `spawn`, when a sandbox layer
/// failed: in the world, the operation that failed (`world`'s).
pub fn spawn_failure(e: &io::Error, world: Option<&world::World>) -> Option<String> {
    let code = e.raw_os_error()?;
    let (layer, name) = Layer::ALL.into_iter().find(|(l, _)| *l as i32 == code >> LAYER_SHIFT)?;
    let errno = code & ((1 << STEP_SHIFT) - 1);
    let step = (code >> STEP_SHIFT) & 0xf;
    let op = (code >> OP_SHIFT) & ((1 << (LAYER_SHIFT - OP_SHIFT)) - 1);
    if layer == Layer::CheckDirectory {
        // not a sandbox layer: it happens with the sandbox off too
        return Some(format!(
            "cannot enter the check directory: {} ({})",
            io::Error::from_raw_os_error(errno),
            probe::errno_name(errno)
        ));
    }
    let op = world.zip(op.checked_sub(1)).and_then(|(w, i)| w.describe(i as usize));
    let at = match (world::Step::ALL.into_iter().find(|(s, _)| *s as i32 == step), op) {
        (Some((_, step)), Some(op)) if layer == Layer::World => format!(" at {step} ({op})"),
        (Some((_, step)), None) if layer == Layer::World => format!(" at {step}"),
        _ => String::new(),
    };
    Some(format!(
        "sandbox setup failed in layer '{name}'{at}: {} ({})",
        io::Error::from_raw_os_error(errno),
        probe::errno_name(errno)
    ))
}

/// What the child does between `fork` and `execve`: plain values only.
#[derive(Clone, Debug)]
struct ChildSetup {
    parent: libc::pid_t,
    limits: rlimits::Limits,
    unshare: libc::c_int,
    /// -1: no Landlock.
    ruleset: RawFd,
    seccomp: Option<Arc<Vec<seccompiler::sock_filter>>>,
    /// Entered in the new namespaces, which make a mount namespace where a
    /// world is given ([`gives_world`]).
    world: Option<Arc<world::World>>,
    /// The Landlock ABI (0: none), for the scratch `/tmp`'s rule.
    abi: u32,
    /// The child's end of its [`network::hand_over_channel`] (-1: none, and
    /// the check directory is bound instead of the render's own tmpfs):
    /// the render's tmpfs is handed over there, and, in a network of its
    /// own, the resolver socket.
    channel: RawFd,
    /// The gate's command line and environment, blanked in a PID namespace.
    exposed: processes::Exposed,
}

impl ChildSetup {
    /// Where the resolver socket is handed over: the channel, in a
    /// network of its own (-1: none). An integer test, safe in the child.
    fn resolver(&self) -> RawFd {
        if self.unshare & libc::CLONE_NEWNET != 0 { self.channel } else { -1 }
    }

    /// Runs in the forked child, in the check directory already ([`enter`]):
    /// raw system calls only, no allocation. A held child makes its keeper
    /// last before seccomp, which refuses it.
    fn run(&self, hold: Option<&Hold>) -> io::Result<()> {
        let step = |layer: Layer, errno: i32| {
            if errno == 0 { Ok(()) } else { Err(tagged(layer, errno)) }
        };
        // Die with the gate. PDEATHSIG fires when the forking *thread* ends:
        // checks are spawned from a standby's own thread, which stays until
        // the check is over ([`crate::standby`]).
        let signal = Some(rustix::process::Signal::KILL);
        let armed = rustix::process::set_parent_process_death_signal(signal);
        step(Layer::DeathSignal, errno_of(armed))?;
        // the gate died before the signal was armed
        if rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != Some(self.parent) {
            return step(Layer::DeathSignal, libc::ESRCH);
        }
        step(Layer::Rlimits, self.limits.apply())?;
        step(Layer::Namespaces, namespaces::unshare(self.unshare))?;
        let own_processes = self.unshare & libc::CLONE_NEWPID != 0;
        if own_processes {
            // from here on, haproxy's process, in the new PID namespace
            processes::split(self.exposed, hold.map_or(-1, |hold| hold.word))?;
        }
        if let Some(world) = &self.world {
            let own_users = self.unshare & libc::CLONE_NEWUSER != 0;
            world
                .enter(own_users, own_processes, self.resolver(), self.channel)
                .map_err(|(at, op, errno)| tagged_step(Layer::World, at as i32, op, errno))?;
        }
        step(Layer::Capabilities, caps::drop_all())?;
        step(Layer::NoNewPrivs, errno_of(rustix::thread::set_no_new_privs(true)))?;
        if self.ruleset >= 0 {
            if let Some(world) = &self.world {
                // the world's root, the scratch /tmp and the own /proc exist
                // only now, in the new root
                let render = (self.channel >= 0).then(|| world.render_inside());
                step(Layer::Landlock, landlock::grant_world(self.ruleset, self.abi, render))?;
            }
            step(Layer::Landlock, landlock::restrict_self(self.ruleset))?;
        }
        // Last of what opens descriptors (the world, Landlock's grants).
        step(Layer::Rlimits, self.limits.apply_open_files())?;
        if let Some(hold) = hold {
            // The keeper shares this memory, a copy of the gate's, and is
            // a process of the check's own /proc: not dumpable, so HAProxy
            // (no capability) cannot open its `mem` or `environ`. `execve`
            // gives HAProxy's own memory back the usual dumpable flag.
            let not_dumpable = rustix::process::DumpableBehavior::NotDumpable;
            step(Layer::Hold, errno_of(rustix::process::set_dumpable_behavior(not_dumpable)))?;
            hold.keeper.spawn()?;
        }
        if let Some(prog) = &self.seccomp {
            step(Layer::Seccomp, seccomp::install(prog))?;
        }
        Ok(())
    }
}

/// In the child, first: `fchdir` to the check directory (a close-on-exec
/// descriptor, still open before `execve`) by its descriptor, no path
/// string to resolve. One raw system call.
fn enter(dir: RawFd) -> io::Result<()> {
    // SAFETY: the parent keeps the descriptor open until `spawn` returns.
    let dir = unsafe { BorrowedFd::borrow_raw(dir) };
    rustix::process::fchdir(dir).map_err(|e| tagged(Layer::CheckDirectory, e.raw_os_error()))
}

/// A check killed by SIGXFSZ wrote a file past its file-size bound
/// (`file_size`, [`rlimits::FILE_SIZE`] or [`rlimits::FILE_SIZE_MAX`]):
/// said in those words (it stays could-not-run).
pub fn explain_file_size(outcome: CheckOutcome, file_size: u64) -> CheckOutcome {
    const KILLED: &str = "haproxy was killed by signal 25";
    const NAMED: &str = " (SIGXFSZ: the check's file size limit)";
    let CheckOutcome::Unavailable { reason } = &outcome else { return outcome };
    let Some(rest) = reason.strip_prefix(KILLED) else { return outcome };
    let reason = format!(
        "haproxy -c wrote a file past the check's limit of {} MiB (SIGXFSZ){}",
        file_size >> 20,
        rest.strip_prefix(NAMED).unwrap_or(rest)
    );
    CheckOutcome::Unavailable { reason }
}

#[cfg(test)]
mod tests;
