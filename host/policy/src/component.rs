//! The wasmtime host for policy components: one [`Engine`] per memory limit
//! (reservations sized from it, so it runs under `ulimit -v`), a component
//! compiled once per load with its `InstancePre` kept, and a fresh [`Store`]
//! per decision, so nothing leaks from one decision to the next.
//!
//! Each decision runs under limits: a wall-clock deadline, fuel, linear
//! memory, and a cap on the returned decision. Each failure is a typed
//! [`PolicyFailure`]. WASI is linked only because `wasm32-wasip2` guests
//! import it: no files, no environment, no arguments, no network, an empty
//! stdin; stdout and stderr are captured, bounded, and logged ([`super::stdio`]).
//!
//! Guests run on wasmtime's async path, on a current-thread tokio runtime of
//! the calling thread's own (never the gate's): WASI's host calls are async
//! in wasmtime-wasi, and only the async path lets the deadline cut one short.
//! Epoch interruption stops wasm code that spins; a timeout around the call
//! stops a guest waiting in a host call (a sleep, a poll). See
//! docs/policies.md, "Limits".

use super::cache::ComponentCache;
use super::epoch::{EPOCH_TICK, EpochTicker};
use super::stdio::GuestOutput;
use super::{Decision, Fleet, Policy, PolicyError, PolicyFailure, Trigger};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, ResourceLimiter, Store,
};
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

mod bindings {
    // Borrowed parameter types: the fleet is lowered straight from the
    // host's own strings, with no copy per pod and string.
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "policy",
        ownership: Borrowing { duplicate_if_necessary: true },
        exports: { default: async },
    });
}
use bindings::rendergate::policy::types as wit;

/// The most linear memory any policy may be given (`--policy-memory` above it is refused).
pub const MAX_POLICY_MEMORY: usize = 1 << 30;
/// The interface name a policy must export, for messages.
pub const WORLD: &str = "rendergate:policy/policy@0.1.0";

/// Limits on one decision.
#[derive(Clone, Debug)]
pub struct PolicyLimits {
    /// Wall-clock bound on one decision.
    pub deadline: Duration,
    /// Wasm fuel per decision (deterministic instruction budget).
    pub fuel: u64,
    /// Linear memory a guest may grow to.
    pub memory: usize,
    /// Bytes of strings a returned decision may carry.
    pub decision_cap: usize,
}

impl Default for PolicyLimits {
    fn default() -> Self {
        PolicyLimits {
            deadline: Duration::from_millis(50),
            // Measured (benches/policy.rs): scoped-revert burns 11.5 M fuel
            // deciding a refusal over 10,000 pods (30.9 M before the guests'
            // bump allocator); ample headroom for heavier policies.
            fuel: 400_000_000,
            memory: 32 << 20,
            decision_cap: 4 << 20,
        }
    }
}

/// A WebAssembly page: memory reservations are whole pages.
const WASM_PAGE: usize = 64 * 1024;
/// The unmapped region after (and before) each linear memory. Memories are
/// reserved only as large as the policy's memory limit, not 4 GiB, so
/// compiled code bounds-checks every access anyway; the guard only lets it
/// fold small constant offsets into one check. Wasmtime's 32 MiB default
/// would double the address space of a 32 MiB policy for nothing.
const MEMORY_GUARD: u64 = 2 << 20;
/// How the instance pool is sized (docs/operations.md, "Address space").
/// Each decision instantiates the policy in a fresh store and drops it after,
/// so what is live at once is the serving policy, a hot-reload candidate
/// being vetted, and `policy check`/`test` or benchmarks in the same process.
/// The pool holds 16 of the largest components we know at once, a component
/// built from Python (componentize-py), and more of smaller ones. Measured
/// (wasmparser over the component): a componentize-py component instantiates
/// 14 core modules (libpython, libc, the WASI adapter, shims), defines one
/// memory (its libraries share it) and two tables; a Rust `wasm32-wasip2`
/// guest instantiates 3 core modules, with one memory and two tables.
const LIVE_PYTHON_COMPONENTS: u32 = 16;
/// Core instances: 16 Python components × 14, rounded up to 16 each (256).
/// With the old 64, only four Python components could be live.
const POOL_CORE_INSTANCES: u32 = LIVE_PYTHON_COMPONENTS * 16;
/// Component instances of any kind live at once: twice the Python count, so
/// smaller guests have room.
const POOL_COMPONENTS: u32 = 2 * LIVE_PYTHON_COMPONENTS;
/// One memory per live component (what both kinds define); each is a slot
/// of the memory limit plus a guard, so this sets the pool's address space.
const POOL_MEMORIES: u32 = POOL_COMPONENTS;
/// Two tables per live component.
const POOL_TABLES: u32 = 2 * POOL_COMPONENTS;
/// What one component may take of the pool: a larger component than any we
/// measured still loads, with fewer of it live at once.
const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 64;
const MAX_MEMORIES_PER_COMPONENT: u32 = 4;
const MAX_TABLES_PER_COMPONENT: u32 = 8;
/// Elements a table may have: the same bound `MemoryLimit` puts on growth.
const TABLE_ELEMENTS: usize = 100_000;

/// The engine for policies whose memory limit is `memory` bytes: one per
/// limit in the process (`serve` has one limit), since reservations are
/// sized from it. Its epoch advances while a component of it is loaded
/// ([`EpochTicker`]).
///
/// Sizing (docs/operations.md, "Address space"): each linear memory reserves
/// its limit, rounded up to whole pages, plus guards. The pooling allocator
/// reserves every slot up front (`POOL_MEMORIES` memories: 32 × 34 MiB
/// ≈ 1.1 GiB at the default 32 MiB), which reuses warm
/// slots instead of mapping and zeroing memory per decision. When that
/// reservation fails (an address-space limit, `ulimit -v`), the engine
/// allocates each instance on demand instead (34 MiB per live memory), and
/// says so in the log. Only when that fails too is it an error, naming the limit.
pub fn engine(memory: usize) -> Result<Engine, String> {
    static ENGINES: Mutex<Vec<(usize, Engine)>> = Mutex::new(Vec::new());
    let reservation = memory.max(1).next_multiple_of(WASM_PAGE);
    let mut engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, engine)) = engines.iter().find(|(r, _)| *r == reservation) {
        return Ok(engine.clone());
    }
    let engine = new_engine(reservation)?;
    engines.push((reservation, engine.clone()));
    Ok(engine)
}

fn new_engine(reservation: usize) -> Result<Engine, String> {
    let mut config = Config::new();
    config.consume_fuel(true);
    config.epoch_interruption(true);
    // Deep recursion traps early instead of exhausting the host's stack.
    config.max_wasm_stack(512 * 1024);
    // A memory never outgrows its reservation (`MemoryLimit` stops it at the
    // limit), so none is kept for growth past it.
    config.memory_reservation(reservation as u64);
    config.memory_reservation_for_growth(0);
    config.memory_guard_size(MEMORY_GUARD);
    let on_demand = config.clone();
    // A fresh instance per decision: the pooling allocator reuses warm slots
    // instead of mapping and zeroing memory each time. The per-policy memory
    // limit is enforced by `MemoryLimit`, at or below the slots' size.
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(POOL_COMPONENTS)
        .total_core_instances(POOL_CORE_INSTANCES)
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .total_memories(POOL_MEMORIES)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .total_tables(POOL_TABLES)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .table_elements(TABLE_ELEMENTS)
        .max_memory_size(reservation)
        // Guests run on wasmtime's async path, whose fiber stacks come from
        // the pool as well (1,000 by default): one per live instance.
        .total_stacks(POOL_COMPONENTS)
        .max_unused_warm_slots(8);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let pooled = u64::from(POOL_MEMORIES) * (reservation as u64 + MEMORY_GUARD);
    let engine = match Engine::new(&config) {
        Ok(engine) => engine,
        Err(e) => {
            tracing::warn!(
                "the policy instance pool ({} MiB of address space) cannot be reserved{}: {e:#}; \
                 allocating each policy instance on demand",
                pooled >> 20,
                address_space_limit()
                    .map(|l| format!(" under an address-space limit of {} MiB", l >> 20))
                    .unwrap_or_default(),
            );
            Engine::new(&on_demand).map_err(|e| {
                format!("cannot start the policy engine{}: {e:#}", limit_note(reservation))
            })?
        }
    };
    Ok(engine)
}

/// The process's address-space limit (`ulimit -v`, RLIMIT_AS), if it has one.
fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// Names the address-space limit, for an error that may come from it.
fn limit_note(reservation: usize) -> String {
    match address_space_limit() {
        Some(limit) => format!(
            " under the address-space limit of {} MiB (ulimit -v); each policy instance needs {} MiB \
             (--policy-memory plus guards): raise the limit or lower --policy-memory",
            limit >> 20,
            (reservation as u64 + 2 * MEMORY_GUARD) >> 20
        ),
        None => String::new(),
    }
}

/// What a store holds for one decision.
struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    memory: MemoryLimit,
}

impl GuestState {
    /// A state with no stdio, for instantiating once at load.
    fn new(limits: &PolicyLimits) -> Self {
        GuestState {
            wasi: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
            memory: MemoryLimit::new(limits.memory),
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Caps linear memory, and remembers that the cap was hit so the trap that
/// follows is reported as a memory failure. Counts what the store's
/// memories grew to, for [`DecisionCost::peak_memory`].
struct MemoryLimit {
    max: usize,
    hit: bool,
    /// Bytes of linear memory the store holds, over all its memories
    /// (wasm memories never shrink: the last count is the peak).
    held: usize,
}

impl MemoryLimit {
    fn new(max: usize) -> Self {
        MemoryLimit { max, hit: false, held: 0 }
    }
}

impl ResourceLimiter for MemoryLimit {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.hit = true;
            return Err(wasmtime::Error::msg(format!(
                "memory limit of {} bytes reached",
                self.max
            )));
        }
        // Called for each memory's creation too (from 0), so this counts
        // the initial memories as well as their growth.
        self.held += desired.saturating_sub(current);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// What one call into a component cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecisionCost {
    /// Fuel burned, instantiation included.
    pub fuel: u64,
    /// Bytes of linear memory the store held at its end, over all the
    /// component's memories: its peak, since wasm memory never shrinks.
    pub peak_memory: usize,
    /// Time spent instantiating the component in its fresh store.
    pub instantiate: Duration,
}

/// A loaded policy component.
pub struct ComponentPolicy {
    name: String,
    pre: bindings::PolicyPre<GuestState>,
    limits: PolicyLimits,
    /// Keeps the engine's epoch advancing while this component is loaded.
    _ticker: Arc<EpochTicker>,
}

/// The largest component file read: a Python policy, a whole interpreter,
/// is 18 MB.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// A component file's bytes: a regular file (a FIFO would hold the reader
/// until a writer came, a device might never end; it is opened without
/// blocking to find out), at most [`MAX_COMPONENT_BYTES`].
pub fn read_component(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    let too_big = || {
        let limit = MAX_COMPONENT_BYTES >> 20;
        Error::new(ErrorKind::InvalidData, format!("larger than a component may be ({limit} MiB)"))
    };
    if metadata.len() > MAX_COMPONENT_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(MAX_COMPONENT_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_COMPONENT_BYTES {
        return Err(too_big());
    }
    Ok(bytes)
}

impl ComponentPolicy {
    /// Loads, compiles (or takes from `cache`) and checks a component
    /// against the world; asks it its name.
    pub fn load(
        path: &Path,
        limits: PolicyLimits,
        cache: Option<&ComponentCache>,
    ) -> Result<Self, PolicyFailure> {
        let bytes = read_component(path).map_err(|e| {
            PolicyFailure::BadComponent(format!("cannot read {}: {e}", path.display()))
        })?;
        Self::from_bytes(&bytes, limits, cache)
    }

    pub fn from_bytes(
        bytes: &[u8],
        limits: PolicyLimits,
        cache: Option<&ComponentCache>,
    ) -> Result<Self, PolicyFailure> {
        let engine = engine(limits.memory).map_err(PolicyFailure::Unrunnable)?;
        let engine = &engine;
        let component = match cache {
            Some(cache) => cache.load_or_compile_traced(engine, bytes).map(|(component, used)| {
                tracing::debug!(cache = %cache.dir().display(), "policy compiled: {used:?}");
                component
            }),
            None => Component::from_binary(engine, bytes).map_err(|e| format!("{e:#}")),
        }
        .map_err(|e| {
            // wasmparser pretty-prints the bytes it expected over lines
            let e = e.split_whitespace().collect::<Vec<_>>().join(" ");
            PolicyFailure::BadComponent(format!("not a loadable component: {e}"))
        })?;
        let mut linker = Linker::<GuestState>::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| PolicyFailure::BadComponent(format!("cannot link WASI: {e:#}")))?;
        let instance_pre = linker.instantiate_pre(&component).map_err(|e| {
            PolicyFailure::BadComponent(format!("imports what the host does not provide: {e:#}"))
        })?;
        let pre = bindings::PolicyPre::new(instance_pre).map_err(|e| {
            PolicyFailure::BadComponent(format!("does not implement {WORLD}: {e:#}"))
        })?;
        let ticker = EpochTicker::hold(engine).map_err(|e| {
            PolicyFailure::Unrunnable(format!(
                "cannot start the policy epoch thread{}: {e}",
                limit_note(limits.memory.next_multiple_of(WASM_PAGE))
            ))
        })?;
        let mut policy =
            ComponentPolicy { name: String::from("(loading)"), pre, limits, _ticker: ticker };
        // The first instance: where an address-space limit shows, if the
        // engine had to allocate on demand and even that does not fit.
        let instantiable = on_guest_thread(|| {
            GUEST_RUNTIME.with(|runtime| {
                runtime.block_on(async {
                    let mut store = Store::new(engine, GuestState::new(&policy.limits));
                    store.limiter(|s| &mut s.memory);
                    policy.pre.instance_pre().instantiate_async(&mut store).await.map(drop)
                })
            })
        });
        if let Err(e) = instantiable
            && e.downcast_ref::<wasmtime::Trap>().is_none()
            && let Some(limit) = address_space_limit()
        {
            let note = limit_note(policy.limits.memory.next_multiple_of(WASM_PAGE));
            tracing::debug!(limit, "instantiating the policy failed: {e:#}");
            return Err(PolicyFailure::Unrunnable(format!(
                "cannot instantiate the policy{note}: {e:#}"
            )));
        }
        policy.name =
            policy.call(async |p, store| p.call_name(store).await, "(loading)", "name")?.0;
        Ok(policy)
    }

    /// Decides, and says what the decision cost (for sizing `--policy-fuel`
    /// and `--policy-memory`, and `rendergate policy bench`).
    pub fn decide_metered(
        &self,
        trigger: &Trigger,
        fleet: &Fleet,
    ) -> Result<(Decision, DecisionCost), PolicyError> {
        let pods: Vec<wit::PodState<'_>> = fleet.pods.iter().map(pod_out).collect();
        let passed: Vec<&str> = fleet.passed_plans.iter().map(|p| &**p).collect();
        let refused: Vec<&str> = fleet.refused_plans.iter().map(|p| &**p).collect();
        let fleet = wit::Fleet { pods: &pods, passed_plans: &passed, refused_plans: &refused };
        let trigger = trigger_out(trigger);
        let fail = |failure| PolicyError { policy: self.name.clone(), failure };
        let kind = match trigger {
            wit::Trigger::Verdict(_) => "verdict",
            wit::Trigger::Applied(_) => "applied",
        };
        let decided = self.call(
            async move |p, store| p.call_decide(store, trigger, fleet).await,
            &self.name,
            kind,
        );
        let (decision, cost) = decided.map_err(fail)?;
        let size = decision_size(&decision);
        if size > self.limits.decision_cap {
            return Err(fail(PolicyFailure::TooLarge {
                bytes: size,
                cap: self.limits.decision_cap,
            }));
        }
        Ok((decision_in(decision), cost))
    }

    /// Runs one export in a fresh store under the limits; returns what it
    /// cost too. Logs what the guest printed, tagged with `name` and `what`.
    fn call<R: Send>(
        &self,
        f: impl AsyncFnOnce(&bindings::Policy, &mut Store<GuestState>) -> wasmtime::Result<R> + Send,
        name: &str,
        what: &str,
    ) -> Result<(R, DecisionCost), PolicyFailure> {
        let output = GuestOutput::default();
        let result = on_guest_thread(|| self.call_here(f, &output));
        output.log(name, what);
        result
    }

    /// [`Self::call`] on a thread that is in no tokio runtime.
    fn call_here<R>(
        &self,
        f: impl AsyncFnOnce(&bindings::Policy, &mut Store<GuestState>) -> wasmtime::Result<R>,
        output: &GuestOutput,
    ) -> Result<(R, DecisionCost), PolicyFailure> {
        let wasi = WasiCtxBuilder::new()
            .stdin(MemoryInputPipe::new(bytes::Bytes::new()))
            .stdout(output.stdout())
            .stderr(output.stderr())
            .build();
        let state = GuestState {
            wasi,
            table: ResourceTable::new(),
            memory: MemoryLimit::new(self.limits.memory),
        };
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|s| &mut s.memory);
        store.set_fuel(self.limits.fuel).map_err(|e| PolicyFailure::Trap(format!("{e:#}")))?;
        let ticks = self.limits.deadline.as_micros().div_ceil(EPOCH_TICK.as_micros()).max(1) as u64;
        store.set_epoch_deadline(ticks);
        store.epoch_deadline_trap();

        let deadline = self.limits.deadline;
        let mut instantiate = Duration::ZERO;
        let result = GUEST_RUNTIME.with(|runtime| {
            runtime.block_on(async {
                // The epoch stops wasm that spins; the timeout stops a guest
                // waiting in a host call, where no epoch is checked.
                let run = async {
                    let started = Instant::now();
                    let instance = self.pre.instantiate_async(&mut store).await?;
                    instantiate = started.elapsed();
                    f(&instance, &mut store).await
                };
                tokio::time::timeout(deadline, run).await
            })
        });
        let cost = DecisionCost {
            fuel: self.limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0)),
            peak_memory: store.data().memory.held,
            instantiate,
        };
        match result {
            Ok(Ok(r)) => Ok((r, cost)),
            Ok(Err(e)) => Err(classify(e, store.data().memory.hit, output)),
            Err(_elapsed) => Err(PolicyFailure::Deadline),
        }
    }
}

thread_local! {
    /// Each thread that runs guests has its own runtime for their async host
    /// calls (a sleep's timer); it runs only while a guest does.
    static GUEST_RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("build a runtime for policy guests");
}

/// Runs `f` where guests may run: on this thread if it is in no tokio
/// runtime (the policy worker, a CLI command, a benchmark), else on a
/// short-lived helper thread, since a runtime cannot be started inside
/// another (loading a policy from async code does that, once per load).
fn on_guest_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|scope| {
        let helper = std::thread::Builder::new().name("rg-policy-load".into());
        let joined = helper.spawn_scoped(scope, f).expect("start a policy helper thread").join();
        joined.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

impl Policy for ComponentPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&self, trigger: &Trigger, fleet: &Fleet) -> Result<Decision, PolicyError> {
        self.decide_metered(trigger, fleet).map(|(decision, _)| decision)
    }
}

fn classify(error: wasmtime::Error, memory_hit: bool, output: &GuestOutput) -> PolicyFailure {
    if memory_hit {
        return PolicyFailure::Memory;
    }
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => PolicyFailure::Deadline,
        Some(wasmtime::Trap::OutOfFuel) => PolicyFailure::Fuel,
        Some(trap) => {
            // A Rust guest's panic message is on its stderr; keep it, not the backtrace hint.
            let text = output.stderr_text();
            let said: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("note: run with"))
                .collect();
            let said = said.join(" | ").chars().take(500).collect::<String>();
            PolicyFailure::Trap(if said.is_empty() {
                trap.to_string()
            } else {
                format!("{trap}: {said}")
            })
        }
        None => PolicyFailure::Trap(format!("{error:#}")),
    }
}

fn decision_size(d: &wit::Decision) -> usize {
    let promote: usize = d.promote.iter().map(|p| p.pod.len() + p.plan.len() + 16).sum();
    let revert: usize = d
        .revert
        .iter()
        .map(|r| {
            r.pod.len()
                + r.plan.len()
                + 16
                + match &r.target {
                    wit::RevertTarget::Plan(p) => p.len(),
                    _ => 0,
                }
        })
        .sum();
    let notes: usize = d.notes.iter().map(|n| n.len() + 16).sum();
    promote + revert + notes
}

fn pod_out(p: &policy_core::PodState) -> wit::PodState<'_> {
    wit::PodState {
        pod: &p.pod,
        applied_plan: p.applied_plan.as_deref(),
        running_plan: p.running_plan.as_deref(),
        baseline_plan: p.baseline_plan.as_deref(),
    }
}

fn trigger_out(t: &Trigger) -> wit::Trigger<'_> {
    match t {
        Trigger::Verdict(v) => wit::Trigger::Verdict(wit::Verdict {
            plan: &v.plan,
            render: &v.render,
            outcome: match v.outcome {
                policy_core::Outcome::Passed => wit::Outcome::Passed,
                policy_core::Outcome::Refused => wit::Outcome::Refused,
                policy_core::Outcome::Unavailable => wit::Outcome::Unavailable,
            },
            newest: v.newest,
            pinned: v.pinned,
            remembered: v.remembered,
            message: &v.message,
        }),
        Trigger::Applied(p) => wit::Trigger::Applied(pod_out(p)),
    }
}

fn decision_in(d: wit::Decision) -> Decision {
    Decision {
        promote: d
            .promote
            .into_iter()
            .map(|p| policy_core::Promote { pod: p.pod.into(), plan: p.plan.into() })
            .collect(),
        revert: d
            .revert
            .into_iter()
            .map(|r| policy_core::Revert {
                pod: r.pod.into(),
                plan: r.plan.into(),
                target: match r.target {
                    wit::RevertTarget::Baseline => policy_core::RevertTarget::Baseline,
                    wit::RevertTarget::Plan(p) => policy_core::RevertTarget::Plan(p.into()),
                },
            })
            .collect(),
        notes: d.notes,
    }
}
