//! `rendergate check DIR`: one check of a directory, printed for a person or
//! as one `verdict` object.

use super::HaproxyArgs;
use rendergate::check::sandbox::Mode;
use rendergate::check::{Checker, dir};
use rendergate::core::Verdict;
use rendergate::{CheckOutcome, HaproxyChecker, Output};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    haproxy: HaproxyArgs,
    /// Bound on the check.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = super::duration)]
    timeout: Duration,
    /// Print one `verdict` object (docs/protocol.md §2) instead of text.
    #[arg(long)]
    json: bool,
    /// Print which sandbox layers checks get on this host, and exit 0.
    #[arg(long)]
    explain: bool,
    /// The render: DIR/haproxy.cfg and every other file under DIR.
    #[arg(value_name = "DIR", required_unless_present = "explain")]
    dir: Option<PathBuf>,
}

/// `--explain`: the start-up line, then what each layer means here.
fn explain(checker: &HaproxyChecker) -> ExitCode {
    use rendergate::check::sandbox::{host_view, landlock, rlimits, seccomp};
    println!("{}", checker.sandbox_report());
    if let Some(s) = checker.sandbox()
        && s.mode() != Mode::Off
    {
        println!(
            "  landlock: the check directory: read, and new files written (no directories, links or removals);"
        );
        println!("            the haproxy binary and its loader: read and execute;");
        let libraries: Vec<String> = s
            .grants()
            .rules
            .iter()
            .filter(|(_, access)| *access == landlock::FS_READ_FILE)
            .map(|(path, _)| path.display().to_string())
            .collect();
        println!("            read-only, as the loader finds them: {}", libraries.join(" "));
        println!(
            "            read-only for run-time loading: {}; the CA store only for @system-ca, /etc/resolv.conf only for parse-resolv-conf",
            landlock::LIBRARY_DIRS.join(" ")
        );
        println!("  seccomp:  refused: {}", seccomp::denied_names().join(", "));
        println!(
            "  rlimits:  address space, CPU seconds (the timeout), file size {} MiB, {} open files, core 0",
            rlimits::FILE_SIZE >> 20,
            rlimits::OPEN_FILES
        );
        println!(
            "  env:      haproxy starts with an empty environment but LUA_PATH={} LUA_CPATH={}; stdin /dev/null",
            host_view::LUA_PATH,
            host_view::LUA_CPATH
        );
        println!(
            "  host:     host name and local peer {}; stand-ins for /etc/resolv.conf, /etc/hosts and os-release {}",
            host_view::HOST_NAME,
            if s.probe().unshare_flags() & libc::CLONE_NEWNS != 0 {
                "mounted in the check's mount namespace"
            } else {
                "NOT mounted (no namespaces): the host's own files show"
            }
        );
    }
    ExitCode::SUCCESS
}

pub async fn run(args: Args) -> ExitCode {
    // Caught before the checker makes its directory: from then on a signal
    // ends the check and removes everything it wrote.
    let mut signals = match super::signals::Signals::catch() {
        Ok(signals) => signals,
        Err(e) => return super::fail(&e, 2),
    };
    let options = args.haproxy.options();
    let limits = options.limits;
    let checker = HaproxyChecker::new(options);
    if args.explain {
        return explain(&checker);
    }
    super::log_sandbox(&checker);
    let Some(render_dir) = args.dir else { return ExitCode::from(2) };
    let name = render_dir
        .file_name()
        .map_or_else(|| "check".to_owned(), |n| n.to_string_lossy().into_owned());
    let render = match dir::load(&render_dir, &name, &name, &limits) {
        Ok(render) => render,
        Err(e) => {
            print_error!("{e}");
            return ExitCode::from(2);
        }
    };
    let started = tokio::time::Instant::now();
    let deadline = started + args.timeout;
    // The checker ends its own check at the deadline and reaps HAProxy's
    // group; this outer bound only catches a checker that does not.
    let checked = tokio::time::timeout_at(
        deadline + rendergate::check::DEADLINE_GRACE,
        checker.check(&render, deadline),
    );
    // On a signal the check is dropped here (haproxy's group killed, its
    // directory removed), and the checker's directory when `run` returns.
    let checked = tokio::select! {
        checked = checked => checked,
        signal = signals.recv() => {
            eprintln!("stopped by {}: the check did not finish", signal.name());
            return signal.exit_code();
        }
    };
    let outcome =
        checked.map(|checked| checked.outcome).unwrap_or_else(|_| CheckOutcome::Unavailable {
            reason: format!(
                "the check timed out after {}",
                rendergate::duration::format(args.timeout)
            ),
        });
    let verdict = Verdict {
        plan: render.plan().to_owned(),
        render: render.id().to_owned(),
        checksum: render.checksum().clone(),
        correlation: None,
        outcome,
        newest: true,
        pinned: None,
        remembered: false,
        duration: started.elapsed(),
    };
    let code = match verdict.outcome {
        CheckOutcome::Passed { .. } => 0,
        CheckOutcome::Refused { .. } => 1,
        CheckOutcome::Unavailable { .. } => 2,
    };
    if args.json {
        println!("{}", rendergate::protocol::output_line(&Output::Verdict(verdict)));
    } else {
        let head = match code {
            0 => "pass",
            1 => "refused",
            _ => "could not run",
        };
        println!("{head}: {} ({} ms)", render_dir.display(), verdict.duration.as_millis());
        let message = verdict.outcome.message();
        if !message.is_empty() {
            println!("{message}");
        }
    }
    ExitCode::from(code)
}
