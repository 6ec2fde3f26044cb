//! `rendergate serve`: builds the checker and the gate from flags and runs
//! the NDJSON loop over stdin and stdout.

use super::HaproxyArgs;
use rendergate::policy::cache::ComponentCache;
use rendergate::policy::reload::Reloader;
use rendergate::policy::{PolicyLimits, PolicySeat};
use rendergate::{Gate, GateConfig, HaproxyChecker, HaproxyOptions, Metrics};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::BufReader;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    haproxy: HaproxyArgs,
    /// A promotion and revert policy component (WebAssembly).
    #[arg(long, value_name = "FILE.wasm")]
    policy: Option<PathBuf>,
    /// Bound on one check, waiting for the check slot included.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = super::duration)]
    check_timeout: Duration,
    /// Least time between the starts of two checks (0s allowed).
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = super::duration)]
    check_interval: Duration,
    /// Let haproxy resolve server names during the check (drops `-dr`).
    #[arg(long)]
    no_dns_skip: bool,
    /// Serve /metrics and /healthz on this address.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<String>,
    #[command(flatten)]
    policy_limits: PolicyArgs,
}

/// Limits on a policy component's decisions, and its loading.
#[derive(clap::Args)]
struct PolicyArgs {
    /// Wall-clock bound on one policy decision.
    #[arg(long, value_name = "DUR", default_value = "50ms", value_parser = super::duration)]
    policy_deadline: Duration,
    /// Fuel (instruction budget) per policy decision.
    #[arg(long, value_name = "N", default_value_t = PolicyLimits::default().fuel)]
    policy_fuel: u64,
    /// Linear memory a policy may grow to.
    #[arg(long, value_name = "SIZE", default_value = "32MiB", value_parser = rendergate::size::parse)]
    policy_memory: usize,
    /// Largest decision (bytes of strings) a policy may return.
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = rendergate::size::parse)]
    policy_decision_cap: usize,
    /// Where compiled policies are kept across restarts (default: ~/.cache/rendergate/policies).
    #[arg(long, value_name = "DIR")]
    policy_cache: Option<PathBuf>,
    /// How often the policy file is checked for changes (SIGHUP checks at once).
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = super::duration)]
    policy_poll: Duration,
}

pub async fn run(args: Args) -> ExitCode {
    let metrics = Arc::new(Metrics::default());
    let (seat, reloader) = match &args.policy {
        None => (PolicySeat::default(), None),
        Some(path) => match load_policy(path.clone(), &args.policy_limits, metrics.clone()) {
            Ok((seat, reloader)) => (seat, Some(reloader)),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
    };
    if let Some(addr) = &args.metrics_addr {
        tracing::warn!("--metrics-addr {addr}: the metrics endpoint is not built yet; metrics are kept but not served");
    }
    let options = HaproxyOptions { dns_skip: !args.no_dns_skip, ..args.haproxy.options() };
    let checker = Arc::new(HaproxyChecker::new(options));
    super::log_sandbox(&checker);
    metrics.set_sandbox_layers(checker.sandbox_layers());
    tracing::info!(judge = rendergate::Checker::identity(checker.as_ref()), policy = seat.name(), "rendergate serve");
    let config = GateConfig {
        check_interval: args.check_interval,
        check_timeout: args.check_timeout,
        metrics,
        ..GateConfig::default()
    };
    let watcher = reloader.map(|r| tokio::spawn(r.watch(args.policy_limits.policy_poll)));
    let (gate, outputs) = Gate::start(config, checker, seat);
    let stdin = BufReader::new(tokio::io::stdin());
    let served = rendergate::serve::serve(stdin, tokio::io::stdout(), gate, outputs).await;
    if let Some(watcher) = watcher {
        watcher.abort();
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Loads `--policy` (a bad component stops start-up) and its reloader.
fn load_policy(path: PathBuf, args: &PolicyArgs, metrics: Arc<Metrics>) -> Result<(PolicySeat, Reloader), String> {
    if args.policy_memory > rendergate::policy::component::MAX_POLICY_MEMORY {
        return Err(format!(
            "--policy-memory {}: at most {} bytes",
            args.policy_memory,
            rendergate::policy::component::MAX_POLICY_MEMORY
        ));
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
    let (reloader, live) = Reloader::start(path, limits, cache, metrics)?;
    Ok((PolicySeat::live(live), reloader))
}
