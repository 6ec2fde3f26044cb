//! The command line of docs/protocol.md §1: flags, logging, and dispatch to the
//! subcommands. Bad flags and values get a one-line error and exit 2.
//!
//! Errors the commands only report are `anyhow` errors, each step adding
//! what it was doing; [`fail`] prints one as one line, causes after colons.

/// `eprintln!("error: …")` kept to one line: the text may quote input (a
/// file name in a render directory, a path, a parse error quoting a line).
macro_rules! print_error {
    ($($arg:tt)*) => {
        eprintln!("error: {}", rendergate::log_lines::escape_controls(&format!($($arg)*)))
    };
}

/// `println!` for the commands that print: a closed stdout ends quietly ([`stdout`]).
macro_rules! outln {
    () => { $crate::cli::stdout::print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::stdout::print(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` for the commands that print ([`stdout`]).
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::stdout::print(format_args!($($arg)*)) };
}

mod check;
mod policy;
mod policy_bench;
mod replay;
mod replay_fixtures;
mod serve;
mod signals;
mod stdout;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use rendergate::check::RenderLimits;
use rendergate::check::sandbox::{self, Mode, SandboxOptions};
use rendergate::log_lines::OneLine;
use rendergate::{HaproxyChecker, HaproxyOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "rendergate", version, about = "A render gate for HAProxy fleets")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format on stderr: text or json (one object per line).
    #[arg(long, global = true, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Log filter: a level (error, warn, info, debug, trace) or tracing
    /// directives; default `RUST_LOG`, else info.
    #[arg(long, global = true, value_name = "FILTER")]
    log_level: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// One `haproxy -c` over DIR (haproxy.cfg and its files); exit 0 pass, 1 refused, 2 could not run.
    Check(check::Args),
    /// The gate as a process: NDJSON events on stdin, NDJSON outputs on stdout, logs on stderr.
    Serve(serve::Args),
    /// Runs the gate over a recorded input stream as `serve` would; `--timeline` draws the run.
    Replay(replay::Args),
    /// Policy components: check one, test one against fixtures, or measure one.
    #[command(subcommand)]
    Policy(policy::Command),
}

/// Flags every command that runs haproxy shares.
#[derive(clap::Args, Clone)]
struct HaproxyArgs {
    /// The haproxy binary (a name is looked up on PATH).
    #[arg(long, value_name = "PATH", default_value = "haproxy")]
    haproxy: PathBuf,
    /// How much sandbox each check must have: strict (Landlock and seccomp
    /// required, else every check could not run), best-effort, off.
    #[arg(long, value_name = "MODE", default_value = "strict", value_parser = sandbox_mode)]
    sandbox: Mode,
    /// Run haproxy without the sandbox (same as --sandbox off).
    #[arg(long)]
    no_sandbox: bool,
    /// Where the render is laid out in the check's world, as on a pod.
    #[arg(long, value_name = "PATH", default_value = sandbox::world::DEFAULT_CONFIG_DIR, value_parser = world_path)]
    config_dir: PathBuf,
    /// One more host path HAProxy may read, read-only (repeatable).
    #[arg(long = "check-read", value_name = "PATH", value_parser = world_path)]
    check_read: Vec<PathBuf>,
    /// A directory holding the `passwd` and `group` HAProxy sees (names and
    /// ids only are kept); default: the host's.
    #[arg(long, value_name = "DIR")]
    accounts: Option<PathBuf>,
    /// One variable of HAProxy's environment (repeatable); default: none.
    #[arg(long = "check-env", value_name = "NAME=VALUE", value_parser = env_pair)]
    check_env: Vec<(String, String)>,
    /// The host name HAProxy sees; default: the host's.
    #[arg(long, value_name = "NAME")]
    check_hostname: Option<String>,
    /// The stock files of the fleet's HAProxy image, as its config directory
    /// holds them (e.g. a copy of its /etc/haproxy): laid under each render's
    /// own files, which win; default: the host's packaged ones under --config-dir.
    #[arg(long, value_name = "DIR")]
    stock_dir: Option<PathBuf>,
    /// More names HAProxy resolves, in hosts(5) form (the pods' own names,
    /// such as their hostAliases): added to the check's /etc/hosts.
    #[arg(long, value_name = "FILE")]
    check_hosts: Option<PathBuf>,
    /// Address space of a check's first run (e.g. 1GiB). At or above
    /// --check-memory-max (the default), every check is one run at the top.
    #[arg(long, allow_hyphen_values = true, value_name = "SIZE", default_value = "16GiB", value_parser = rendergate::size::parse)]
    check_memory: usize,
    /// Memory a check may touch at the top of its bounds, where it has no
    /// address-space limit: past it, it is stopped and could not run. The
    /// top is a check's second run, made when its first (under a lower
    /// --check-memory) did not pass; else its only run.
    #[arg(long, allow_hyphen_values = true, value_name = "SIZE", default_value = "16GiB", value_parser = rendergate::size::parse)]
    check_memory_max: usize,
    /// How much of haproxy's output a check keeps (the message notes the cut).
    #[arg(long, allow_hyphen_values = true, value_name = "SIZE", default_value = "64KiB", value_parser = rendergate::size::parse)]
    check_output_cap: usize,
    /// Most files a render may have besides its config; a render with more could not run.
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = RenderLimits::default().files)]
    max_render_files: usize,
    /// Most bytes of a render (its config and files); a bigger render could not run.
    #[arg(long, allow_hyphen_values = true, value_name = "SIZE", default_value = "128MiB", value_parser = rendergate::size::parse)]
    max_render_size: usize,
}

impl HaproxyArgs {
    fn options(&self) -> HaproxyOptions {
        let mode = if self.no_sandbox { Mode::Off } else { self.sandbox };
        HaproxyOptions {
            binary: self.haproxy.clone(),
            output_cap: self.check_output_cap,
            sandbox: SandboxOptions {
                mode,
                memory: self.check_memory as u64,
                world: sandbox::world::WorldOptions {
                    config_dir: self.config_dir.clone(),
                    reads: self.check_read.clone(),
                    accounts: self.accounts.clone(),
                    hostname: self.check_hostname.clone(),
                    stock_dir: self.stock_dir.clone(),
                    hosts: self.check_hosts.clone(),
                    // the checker sizes the render's room from `limits`
                    ..sandbox::world::WorldOptions::default()
                },
                env: self.check_env.clone(),
            },
            memory_max: self.check_memory_max as u64,
            limits: RenderLimits {
                files: self.max_render_files,
                bytes: self.max_render_size as u64,
            },
            // this process's heap is the gate's own, and small
            copy_ahead: true,
            ..HaproxyOptions::default()
        }
    }
}

/// Logs which sandbox layers checks get, once, at start-up; warns when
/// best-effort runs without some, or strict cannot run at all.
fn log_sandbox(checker: &HaproxyChecker) {
    let line = checker.sandbox_report();
    match checker.sandbox() {
        Some(s) if s.mode() == Mode::Strict && s.probe().strict_gap().is_some() => {
            tracing::error!("{line}")
        }
        Some(s) if s.mode() == Mode::BestEffort && !s.missing().is_empty() => {
            tracing::warn!("{line}");
            tracing::warn!("sandbox best-effort: checks run without {}", s.missing().join(", "));
        }
        Some(s) if s.mode() == Mode::Off => tracing::warn!("{line}"),
        _ => tracing::info!("{line}"),
    }
}

fn sandbox_mode(text: &str) -> Result<Mode, String> {
    text.parse()
}

/// A path of the check's world: absolute, without `.` or `..`.
fn world_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    let plain = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_)));
    if plain { Ok(path) } else { Err("must be an absolute path without `.` or `..`".into()) }
}

/// `NAME=VALUE`, NAME a non-empty name without `=` or NUL.
fn env_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() && !text.contains('\0') => {
            Ok((name.to_owned(), value.to_owned()))
        }
        _ => Err("must be NAME=VALUE".into()),
    }
}

fn duration(text: &str) -> Result<Duration, String> {
    rendergate::duration::parse(text)
}

/// A bound or a period: zero would time out every check or decision, or
/// poll without pause.
fn nonzero_duration(text: &str) -> Result<Duration, String> {
    match duration(text)? {
        Duration::ZERO => Err("must be more than 0".into()),
        d => Ok(d),
    }
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print(); // --help, --version
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print(); // `rendergate`, `rendergate policy`: what there is to run
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{}", one_line(&e.to_string()));
            return ExitCode::from(2);
        }
    };
    if let Err(e) = init_logging(&cli.log_format, cli.log_level.as_deref()) {
        return fail(&e, 2);
    }
    if let Command::Policy(command) = cli.command {
        let code = policy::run(command);
        if stdout::closed() {
            stdout::die_of_sigpipe();
        }
        return code;
    }
    // Every other command runs haproxy: a misspelt layer must not pass unseen.
    let disable = std::env::var(sandbox::probe::DISABLE_VAR).unwrap_or_default();
    if let Err(e) = sandbox::probe::check_disable(&disable) {
        print_error!("{e}");
        return ExitCode::from(2);
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let runtime = match runtime.context("cannot start the runtime") {
        Ok(rt) => rt,
        Err(e) => return fail(&e, 2),
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Check(args) => check::run(args).await,
            Command::Serve(args) => serve::run(args).await,
            Command::Replay(args) => replay::run(args).await,
            Command::Policy(_) => unreachable!("handled before the runtime starts"),
        }
    });
    if signals::received() {
        // Everything of the check is gone already; a blocking read of stdin
        // would keep the runtime's shutdown waiting for input.
        runtime.shutdown_background();
    }
    if stdout::closed() {
        // the command's clean-up is done: its checker was dropped in it
        stdout::die_of_sigpipe();
    }
    code
}

/// clap's error as one line: its first, and where that ends in a colon
/// (`the following required arguments were not provided:`) the indented
/// lines it introduces, which name what is wrong.
fn one_line(text: &str) -> String {
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    let first = lines.next().unwrap_or("error: bad arguments");
    if !first.ends_with(':') {
        return first.to_owned();
    }
    let named: Vec<&str> =
        lines.take_while(|l| l.starts_with(' ') && !l.trim().is_empty()).map(str::trim).collect();
    format!("{first} {}", named.join(", "))
}

/// Prints `error` as one `error:` line, its causes after colons, and
/// gives exit status `code`.
fn fail(error: &anyhow::Error, code: u8) -> ExitCode {
    print_error!("{error:#}");
    ExitCode::from(code)
}

/// Logs go to stderr, as text or JSON lines; `--log-level`, else `RUST_LOG`, else info.
/// Every event is one line whatever its fields hold ([`OneLine`]).
fn init_logging(format: &str, level: Option<&str>) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        // The parse error already ends with its cause: kept as one message,
        // not a chain that `{:#}` would print twice.
        Some(directives) => EnvFilter::try_new(directives)
            .map_err(|e| anyhow::anyhow!("--log-level {directives:?}: {e}"))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    let builder = tracing_subscriber::fmt()
        .with_writer(OneLine(std::io::stderr))
        .with_env_filter(filter)
        .with_target(false);
    if format == "json" {
        builder.json().flatten_event(true).with_current_span(false).init();
    } else {
        builder.init();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check` and `serve` flatten these flags; parsed alone here.
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        haproxy: HaproxyArgs,
    }

    #[test]
    fn the_render_limit_flags_default_to_the_library_defaults() {
        let flags = Flags::try_parse_from(["rendergate"]).unwrap();
        assert_eq!(flags.haproxy.options().limits, RenderLimits::default());
        let flags = Flags::try_parse_from([
            "rendergate",
            "--max-render-files",
            "7",
            "--max-render-size",
            "1MiB",
        ])
        .unwrap();
        assert_eq!(flags.haproxy.options().limits, RenderLimits { files: 7, bytes: 1 << 20 });
    }

    #[test]
    fn the_memory_flags_default_to_the_library_defaults() {
        let flags = Flags::try_parse_from(["rendergate"]).unwrap();
        let options = flags.haproxy.options();
        let defaults = HaproxyOptions::default();
        assert_eq!(options.sandbox.memory, defaults.sandbox.memory);
        assert_eq!(options.memory_max, defaults.memory_max);
        assert_eq!(options.memory_max, 16 << 30);
        let flags = Flags::try_parse_from(["rendergate", "--check-memory-max", "2GiB"]).unwrap();
        assert_eq!(flags.haproxy.options().memory_max, 2 << 30);
    }
}
