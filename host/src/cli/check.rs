//! `rendergate check DIR`: one check of a directory, printed for a person or
//! as one `verdict` object.

use super::HaproxyArgs;
use rendergate::check::haproxy::{Naming, WorldKind};
use rendergate::check::sandbox::Mode;
use rendergate::check::{Checker, dir};
use rendergate::core::Verdict;
use rendergate::{CheckOutcome, HaproxyChecker, HaproxyOptions, Output};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    haproxy: HaproxyArgs,
    /// Bound on the check.
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = "30s", value_parser = super::nonzero_duration)]
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

/// `--explain`: the start-up line, then the check's world and what each
/// layer means here.
fn explain(checker: &HaproxyChecker) -> ExitCode {
    use rendergate::check::sandbox::{landlock, rlimits, seccomp};
    outln!("{}", checker.sandbox_report());
    let Some(s) = checker.sandbox().filter(|s| s.mode() != Mode::Off) else {
        return ExitCode::SUCCESS;
    };
    match s.world() {
        Some(world) => {
            let shown = |paths: &[std::path::PathBuf]| {
                paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
            };
            outln!(
                "  world:    a root of its own (user, mount, network, IPC and UTS namespaces); nothing else of the host exists"
            );
            outln!(
                "            the render: {} (the working directory; a tmpfs of its own the gate writes into, --max-render-size and {} MiB; writable, discarded)",
                world.options().config_dir.display(),
                rendergate::check::sandbox::world::RENDER_BESIDE >> 20
            );
            outln!("            read-only: {}", shown(&world.exposed()));
            outln!("            devices: {}", shown(&world.devices()));
            explain_stock(&s);
            let scratch: Vec<String> = (world.scratch().iter())
                .map(|(path, how)| format!("{} (tmpfs {how})", path.display()))
                .collect();
            outln!("            scratch: {}", scratch.join(" "));
            outln!(
                "            stand-ins: {} (accounts: names and ids only)",
                shown(&world.stand_ins())
            );
            if s.probe().unshare_flags() & libc::CLONE_NEWPID != 0 {
                let cgroup = match s.probe().unshare_flags() & libc::CLONE_NEWCGROUP {
                    0 => "",
                    _ => " and cgroup",
                };
                outln!(
                    "            processes: its own (PID{cgroup} namespace; haproxy is pid 2 under an init of its own), with their /proc, read-only (where the host allows a fresh one)"
                );
            }
            if world.proc_self() {
                outln!(
                    "            /proc/self: this process's own, read-only, where no /proc of its own can be mounted (the loader expands $ORIGIN through /proc/self/exe)"
                );
            }
            outln!("            host name: {}", world.hostname());
            outln!(
                "            names: answered by the gate from this host's resolver (127.0.0.1:53 in the check's network){}",
                match &world.options().hosts {
                    Some(hosts) => format!("; and {}", hosts.display()),
                    None => String::new(),
                }
            );
        }
        None if checker.world_kind() == WorldKind::ConfigDir => {
            let shown = |paths: &[std::path::PathBuf]| {
                paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
            };
            let options = &s.options().world;
            let (reads, devices) = rendergate::check::sandbox::world::host_parts(options);
            outln!(
                "  world:    the config directory: this host gives no user and mount namespaces; haproxy sees the host's own files, as Landlock allows"
            );
            outln!(
                "            the render: {} itself (the working directory; emptied after each check, one check at a time)",
                options.config_dir.display()
            );
            outln!("            read (where they exist): {}", shown(&reads));
            outln!("            devices: {}", shown(&devices));
            outln!(
                "            a path outside these reads as \"permission denied\", not \"no such file\"; no scratch /tmp"
            );
            explain_stock(&s);
        }
        None => outln!(
            "  world:    NONE: {}",
            checker
                .world_refusal()
                .unwrap_or_else(|| "this host gives no world for checks".to_owned())
        ),
    }
    let scratch = match s.world() {
        Some(world) => {
            let dirs: Vec<String> =
                world.scratch().iter().map(|(path, _)| path.display().to_string()).collect();
            format!("; {}: read and write", dirs.join(" and "))
        }
        None => String::new(),
    };
    outln!(
        "  landlock: the render: read, and new files written (no directories, links or removals){scratch}"
    );
    outln!(
        "            the haproxy binary and its loader: read and execute; the world's read-only parts: read"
    );
    outln!("            read-only for run-time loading: {}", landlock::LIBRARY_DIRS.join(" "));
    outln!("  seccomp:  refused: {}", seccomp::denied_names(s.world().is_some()).join(", "));
    outln!(
        "  rlimits:  address space (--check-memory below the top; at the top {}x --check-memory-max, whose memory touched is read instead), CPU seconds (the timeout), file size {} MiB ({} MiB in a second run), {} open files, core 0",
        rendergate::check::resident::BACKSTOP_FACTOR,
        rlimits::FILE_SIZE >> 20,
        rlimits::FILE_SIZE_MAX >> 20,
        rlimits::OPEN_FILES
    );
    outln!("  env:      only --check-env; stdin /dev/null");
    ExitCode::SUCCESS
}

/// The stock files laid under each render, in either world.
fn explain_stock(s: &rendergate::check::sandbox::Sandbox) {
    let stock: Vec<String> = s.stock().iter().map(|f| f.relative.display().to_string()).collect();
    if !stock.is_empty() {
        outln!("            stock files under the render (its own win): {}", stock.join(" "));
    }
}

pub async fn run(args: Args) -> ExitCode {
    // Caught before the checker makes its directory: from then on a signal
    // ends the check and removes everything it wrote.
    let mut signals = match super::signals::Signals::catch() {
        Ok(signals) => signals,
        Err(e) => return super::fail(&e, 2),
    };
    // one check: no child made ahead for a next one, no memory to key
    let options =
        HaproxyOptions { standby: false, naming: Naming::Stamp, ..args.haproxy.options() };
    let limits = options.limits;
    if args.explain {
        // the world as a gate would decide it: tried
        return explain(&HaproxyChecker::new(options));
    }
    // The check itself tries the world the probe gives: only when its
    // sandbox cannot be set up are the worlds tried in turn, and the render
    // judged again in the one that works (HaproxyChecker's try_again).
    tracing::trace!(target: "rendergate::timing", "checker to be made");
    let checker = HaproxyChecker::untried(options);
    super::log_sandbox(&checker);
    let Some(render_dir) = args.dir else { return ExitCode::from(2) };
    // reading DIR counts against the check's timeout, as preparing a
    // check directory does
    let started = tokio::time::Instant::now();
    let deadline = started + args.timeout;
    let render = match read(&render_dir, limits, deadline, args.timeout, &mut signals).await {
        Ok(render) => render,
        Err(code) => return code,
    };
    tracing::trace!(target: "rendergate::timing", "render loaded");
    let outcome = match judge(&checker, &render, deadline, args.timeout, &mut signals).await {
        Ok(outcome) => outcome,
        Err(code) => return code,
    };
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
        outln!("{}", rendergate::protocol::output_line(&Output::Verdict(verdict)));
    } else {
        let head = match code {
            0 => "pass",
            1 => "refused",
            _ => "could not run",
        };
        let shown = render_dir.display().to_string();
        let shown = rendergate::log_lines::escape_controls(&shown);
        outln!("{head}: {shown} ({} ms)", verdict.duration.as_millis());
        let message = verdict.outcome.message();
        if !message.is_empty() {
            outln!("{message}");
        }
    }
    ExitCode::from(code)
}

/// DIR read as a render by `deadline`, on a thread of its own: a file
/// system that stalls a read (a hung network mount) neither outlasts the
/// timeout nor holds off a signal. The exit code of why it could not be.
async fn read(
    render_dir: &std::path::Path,
    limits: rendergate::check::limits::RenderLimits,
    deadline: tokio::time::Instant,
    timeout: Duration,
    signals: &mut super::signals::Signals,
) -> Result<rendergate::core::render::Render, ExitCode> {
    let name = render_dir
        .file_name()
        .map_or_else(|| "check".to_owned(), |n| n.to_string_lossy().into_owned());
    let (loaded_tx, loaded) = tokio::sync::oneshot::channel();
    let path = render_dir.to_path_buf();
    // not joined: a read that never returns ends with the process
    let reader = std::thread::Builder::new().name("rendergate-read".into()).spawn(move || {
        let _ = loaded_tx.send(dir::load(&path, &name, &name, &limits));
    });
    if let Err(e) = reader {
        print_error!("cannot start a thread to read {}: {e}", render_dir.display());
        return Err(ExitCode::from(2));
    }
    tokio::select! {
        loaded = loaded => match loaded {
            Ok(Ok(render)) => Ok(render),
            Ok(Err(e)) => {
                print_error!("{e}");
                Err(ExitCode::from(2))
            }
            Err(_) => {
                print_error!("{}: the thread reading it ended without an answer", render_dir.display());
                Err(ExitCode::from(2))
            }
        },
        () = tokio::time::sleep_until(deadline) => {
            print_error!(
                "{}: the check timed out after {} while the render was read",
                render_dir.display(),
                rendergate::duration::format(timeout)
            );
            Err(ExitCode::from(2))
        }
        signal = signals.recv() => {
            eprintln!("stopped by {}: the check did not finish", signal.name());
            Err(signal.exit_code())
        }
    }
}

/// One check of `render` by `deadline`, or the exit code of a signal that
/// stopped it (the check dropped: haproxy's group killed, its directory
/// removed; the checker's own directory goes when it is dropped).
async fn judge(
    checker: &HaproxyChecker,
    render: &rendergate::core::render::Render,
    deadline: tokio::time::Instant,
    timeout: Duration,
    signals: &mut super::signals::Signals,
) -> Result<CheckOutcome, ExitCode> {
    // The checker ends its own check at the deadline and reaps HAProxy's
    // group; this outer bound only catches a checker that does not.
    let checked = tokio::time::timeout_at(
        deadline + rendergate::check::DEADLINE_GRACE,
        checker.check(render, deadline),
    );
    tokio::select! {
        checked = checked => Ok(checked.map(|checked| checked.outcome).unwrap_or_else(|_| {
            let reason =
                format!("the check timed out after {}", rendergate::duration::format(timeout));
            CheckOutcome::Unavailable { reason }
        })),
        signal = signals.recv() => {
            eprintln!("stopped by {}: the check did not finish", signal.name());
            Err(signal.exit_code())
        }
    }
}
