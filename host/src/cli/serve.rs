//! `rendergate serve`: builds the checker and the gate from flags and runs
//! the NDJSON loop over stdin and stdout.

use super::HaproxyArgs;
use super::signals::Signals;
use anyhow::Context as _;
use rendergate::policy::cache::ComponentCache;
use rendergate::policy::observe::DecisionObserver;
use rendergate::policy::reload::{Reloader, Role};
use rendergate::policy::{Fallback, LivePolicy, PolicyLimits, PolicyMetrics, PolicySeat};
use rendergate::record::{CountedOutput, Existing, RecordedInput, Recorder};
use rendergate::{Gate, GateConfig, HaproxyChecker, HaproxyOptions, Metrics};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::net::TcpListener;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    haproxy: HaproxyArgs,
    /// A promotion and revert policy component (WebAssembly).
    #[arg(long, value_name = "FILE.wasm")]
    policy: Option<PathBuf>,
    /// A second policy component that decides every trigger too: its
    /// decisions are only compared with the live ones (a `shadow` line when
    /// they differ), never applied. Same limits and cache as --policy.
    #[arg(long, value_name = "FILE.wasm")]
    shadow_policy: Option<PathBuf>,
    /// Bound on one check, waiting for the check slot included.
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = "30s", value_parser = super::nonzero_duration)]
    check_timeout: Duration,
    /// Least time between the starts of two checks (0s allowed).
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = "1s", value_parser = super::duration)]
    check_interval: Duration,
    /// Let haproxy resolve server names during the check (drops `-dr`).
    #[arg(long)]
    no_dns_skip: bool,
    /// Serve /metrics and /healthz on this address (HOST:PORT, or :PORT for every IPv4 address).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<String>,
    /// How far past --check-timeout a check, or one turn of the event loop,
    /// may run before /healthz answers 503.
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = "5s", value_parser = super::duration)]
    health_margin: Duration,
    /// Every leadership term starts PESSIMISTIC (reason term-start): the
    /// first render of a term waits for a pass (docs/behaviour.md).
    #[arg(long)]
    start_held: bool,
    /// Longest input line taken; a longer one gets an `error` and is read past without being held.
    #[arg(long, allow_hyphen_values = true, value_name = "SIZE", default_value = rendergate::serve::DEFAULT_MAX_LINE_FLAG, value_parser = rendergate::size::parse)]
    max_line: usize,
    /// Write every input line, with its time, to FILE (created 0600, never
    /// through a symlink, never over an existing file), for `rendergate replay`.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Let --record truncate a file that already exists.
    #[arg(long, requires = "record", conflicts_with = "record_append")]
    record_overwrite: bool,
    /// Let --record continue a recording that already exists (a restarted
    /// serve): a header line marks where this process starts.
    #[arg(long, requires = "record")]
    record_append: bool,
    #[command(flatten)]
    policy_limits: PolicyArgs,
}

/// Limits on a policy component's decisions, and its loading.
#[derive(clap::Args)]
struct PolicyArgs {
    /// Wall-clock bound on one policy decision.
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = "50ms", value_parser = super::nonzero_duration)]
    policy_deadline: Duration,
    /// Fuel (instruction budget) per policy decision.
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = PolicyLimits::default().fuel)]
    policy_fuel: u64,
    /// Linear memory a policy may grow to.
    #[arg(long, allow_hyphen_values = true, value_name = "SIZE", default_value = "32MiB", value_parser = rendergate::size::parse)]
    policy_memory: usize,
    /// Largest decision (bytes of strings) a policy may return.
    #[arg(long, allow_hyphen_values = true, value_name = "SIZE", default_value = "4MiB", value_parser = rendergate::size::parse)]
    policy_decision_cap: usize,
    /// Where compiled policies are kept across restarts (default: ~/.cache/rendergate/policies).
    #[arg(long, value_name = "DIR")]
    policy_cache: Option<PathBuf>,
    /// How often the policy file is checked for changes (SIGHUP checks at once).
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = "1s", value_parser = super::nonzero_duration)]
    policy_poll: Duration,
    /// What a failing policy's trigger gets: the built-in default decision, or none (no promote, no revert).
    #[arg(long, value_name = "default|none", default_value = "default", value_parser = fallback)]
    policy_fallback: Fallback,
}

fn fallback(text: &str) -> Result<Fallback, String> {
    text.parse()
}

pub async fn run(args: Args) -> ExitCode {
    run_on(args, rendergate::stdio::stdin(), rendergate::stdio::stdout(), None).await
}

/// `serve` over any input and output (`replay` feeds it a recording), its
/// policy's decisions shown to `observer` if one is given (`replay --fixtures`).
pub async fn run_on<R, W>(
    args: Args,
    input: R,
    output: W,
    observer: Option<Arc<dyn DecisionObserver>>,
) -> ExitCode
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let Started { mut signals, recorder, metrics, mut seat, reloader, shadow, listener } =
        match start(&args).await {
            Ok(started) => started,
            Err(e) => return super::fail(&e, 2),
        };
    if let Some(observer) = observer {
        seat = seat.with_observer(observer);
    }
    let options = HaproxyOptions { dns_skip: !args.no_dns_skip, ..args.haproxy.options() };
    let checker = Arc::new(HaproxyChecker::new(options));
    super::log_sandbox(&checker);
    metrics.set_sandbox_layers(checker.sandbox_layers());
    tracing::info!(
        judge = &*rendergate::Checker::identity(checker.as_ref()),
        policy = seat.name(),
        policy_fallback = seat.fallback().as_str(),
        shadow = shadow.as_ref().map(|(live, _)| live.current().name().to_owned()),
        "rendergate serve"
    );
    let haproxy_version = match checker.binary() {
        Some(binary) => rendergate::check::version::haproxy_version(&binary).await,
        None => None,
    };
    let hello = rendergate::protocol::Hello {
        policy: seat.name(),
        haproxy: haproxy_version.unwrap_or_else(|| "unknown".into()),
        sandbox: checker.sandbox_mode().name(),
        world: checker.world_kind().name(),
    };
    let config = GateConfig {
        check_interval: args.check_interval,
        check_timeout: args.check_timeout,
        metrics,
        health_margin: args.health_margin,
        start_held: args.start_held,
        shadow: shadow.as_ref().map(|(live, _)| live.clone()),
        ..GateConfig::default()
    };
    let poll = args.policy_limits.policy_poll;
    let shadow_reloader = shadow.map(|(_, reloader)| reloader);
    let watchers: Vec<_> =
        reloader.into_iter().chain(shadow_reloader).map(|r| tokio::spawn(r.watch(poll))).collect();
    let (gate, outputs) = Gate::start_grouped(config, checker, seat);
    let endpoint = listener.map(|listener| {
        if let Ok(addr) = listener.local_addr() {
            tracing::info!("metrics: listening on {addr}");
        }
        rendergate::http::serve(listener, gate.metrics().clone(), gate.health().clone())
    });
    let input = RecordedInput::new(input, recorder.clone(), args.max_line);
    let input = BufReader::with_capacity(rendergate::stdio::INPUT_BUFFER, input);
    let output = CountedOutput::new(output, recorder);
    let stopper = gate.stopper();
    let served = rendergate::serve::serve(input, output, &hello, gate, outputs, args.max_line);
    let served = tokio::select! {
        served = served => Ok(served),
        signal = signals.recv() => Err(signal),
    };
    for watcher in watchers {
        watcher.abort();
    }
    if let Some(endpoint) = endpoint {
        endpoint.abort();
    }
    let served = match served {
        Ok(served) => served,
        Err(signal) => {
            // No check is finished nor output written any more: the check in
            // flight is stopped and its directory removed before `stop` returns.
            tracing::info!("stopped by {}", signal.name());
            stopper.stop().await;
            return signal.exit_code();
        }
    };
    match served.context("reading events or writing outputs") {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => super::fail(&e, 1),
    }
}

/// What `serve` makes before it reads a line.
struct Started {
    signals: Signals,
    recorder: Option<Recorder>,
    metrics: Arc<Metrics>,
    seat: PolicySeat,
    reloader: Option<Reloader>,
    /// `--shadow-policy`, and the reloader that keeps it current.
    shadow: Option<(LivePolicy, Reloader)>,
    listener: Option<TcpListener>,
}

/// Makes what `serve` needs from its flags; each step's failure names its flag.
async fn start(args: &Args) -> anyhow::Result<Started> {
    // Caught before anything is made: from then on a signal stops the gate
    // and removes what its check wrote.
    let signals = Signals::catch()?;
    let existing = match (args.record_overwrite, args.record_append) {
        (true, _) => Existing::Overwrite,
        (_, true) => Existing::Append,
        _ => Existing::Refuse,
    };
    let recorder = Recorder::open(args.record.as_deref(), existing).with_context(|| {
        format!("--record {}", args.record.as_deref().unwrap_or(Path::new("")).display())
    })?;
    let metrics = Arc::new(Metrics::default());
    let (seat, reloader) = match &args.policy {
        None => (PolicySeat::default(), None),
        Some(path) => {
            let (reloader, live) =
                load_policy(Role::Live, path.clone(), &args.policy_limits, metrics.policy())?;
            (PolicySeat::live(live), Some(reloader))
        }
    };
    let shadow = match &args.shadow_policy {
        None => None,
        Some(path) => {
            let (reloader, shadow) =
                load_policy(Role::Shadow, path.clone(), &args.policy_limits, metrics.policy())?;
            Some((shadow, reloader))
        }
    };
    let seat = seat.with_fallback(args.policy_limits.policy_fallback);
    let listener = match &args.metrics_addr {
        None => None,
        Some(addr) => {
            let bound = rendergate::http::bind(addr).await;
            Some(bound.with_context(|| format!("--metrics-addr {addr}: cannot listen"))?)
        }
    };
    Ok(Started { signals, recorder, metrics, seat, reloader, shadow, listener })
}

impl Args {
    pub(super) fn check_interval(&self) -> Duration {
        self.check_interval
    }

    pub(super) fn check_timeout(&self) -> Duration {
        self.check_timeout
    }

    pub(super) fn max_line(&self) -> usize {
        self.max_line
    }
}

/// Loads `--policy` or `--shadow-policy` (by `role`) and its reloader. Only
/// a component that does not compile or does not implement the world stops
/// start-up; one that fails sample triggers is taken with a warning
/// (docs/policies.md).
fn load_policy(
    role: Role,
    path: PathBuf,
    args: &PolicyArgs,
    metrics: &Arc<PolicyMetrics>,
) -> anyhow::Result<(Reloader, LivePolicy)> {
    if args.policy_memory > rendergate::policy::component::MAX_POLICY_MEMORY {
        anyhow::bail!(
            "--policy-memory {}: at most {} bytes",
            args.policy_memory,
            rendergate::policy::component::MAX_POLICY_MEMORY
        );
    }
    let limits = PolicyLimits {
        deadline: args.policy_deadline,
        fuel: args.policy_fuel,
        memory: args.policy_memory,
        decision_cap: args.policy_decision_cap,
    };
    let cache_dir = args.policy_cache.clone().unwrap_or_else(ComponentCache::default_dir);
    let cache = ComponentCache::open(&cache_dir)
        .inspect_err(|e| tracing::warn!("{e}; compiling policies without a cache"))
        .ok();
    // One line, whatever the compiler's message looks like.
    Reloader::start_as(role, path, limits, cache, metrics.clone())
        .map_err(|e| anyhow::anyhow!(e.split_whitespace().collect::<Vec<_>>().join(" ")))
}
