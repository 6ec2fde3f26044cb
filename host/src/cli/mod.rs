//! The command line of protocol.md §1: flags, logging, and dispatch to the
//! subcommands. Bad flags and values get a one-line error and exit 2.

mod check;
mod serve;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "rendergate", version, about = "A render gate for HAProxy fleets")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One `haproxy -c` over DIR (haproxy.cfg and its files); exit 0 pass, 1 refused, 2 could not run.
    Check(check::Args),
    /// The gate as a process: NDJSON events on stdin, NDJSON outputs on stdout, logs on stderr.
    Serve(serve::Args),
}

/// Flags every command that runs haproxy shares.
#[derive(clap::Args, Clone)]
struct HaproxyArgs {
    /// The haproxy binary (a name is looked up on PATH).
    #[arg(long, value_name = "PATH", default_value = "haproxy")]
    haproxy: PathBuf,
    /// Run haproxy without the sandbox (the sandbox is not built yet: every check is unsandboxed).
    #[arg(long)]
    no_sandbox: bool,
}

fn duration(text: &str) -> Result<Duration, String> {
    rendergate::duration::parse(text)
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print(); // --help, --version
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("error: bad arguments");
            eprintln!("{first}");
            return ExitCode::from(2);
        }
    };
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async {
        match cli.command {
            Command::Check(args) => check::run(args).await,
            Command::Serve(args) => serve::run(args).await,
        }
    })
}

/// Logs go to stderr; `RENDERGATE_LOG` sets the level (error … trace; default info).
fn init_logging() {
    let level = std::env::var("RENDERGATE_LOG")
        .ok()
        .and_then(|l| l.parse::<tracing::Level>().ok())
        .unwrap_or(tracing::Level::INFO);
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_max_level(level).with_target(false).init();
}
