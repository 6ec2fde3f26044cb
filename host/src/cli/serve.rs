//! `rendergate serve`: builds the checker and the gate from flags and runs
//! the NDJSON loop over stdin and stdout.

use super::HaproxyArgs;
use rendergate::{Gate, GateConfig, HaproxyChecker, HaproxyOptions, PolicySeat};
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
}

pub async fn run(args: Args) -> ExitCode {
    if let Some(policy) = &args.policy {
        eprintln!("error: --policy {}: WebAssembly policies are not supported by this build yet", policy.display());
        return ExitCode::from(2);
    }
    if let Some(addr) = &args.metrics_addr {
        tracing::warn!("--metrics-addr {addr}: the metrics endpoint is not built yet; metrics are kept but not served");
    }
    let options = HaproxyOptions {
        binary: args.haproxy.haproxy,
        dns_skip: !args.no_dns_skip,
        ..HaproxyOptions::default()
    };
    let checker = Arc::new(HaproxyChecker::new(options));
    tracing::info!(judge = rendergate::Checker::identity(checker.as_ref()), "rendergate serve: policy default, sandbox off");
    let config = GateConfig { check_interval: args.check_interval, check_timeout: args.check_timeout, ..GateConfig::default() };
    let (gate, outputs) = Gate::start(config, checker, PolicySeat::default());
    let stdin = BufReader::new(tokio::io::stdin());
    match rendergate::serve::serve(stdin, tokio::io::stdout(), gate, outputs).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
