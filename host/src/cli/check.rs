//! `rendergate check DIR`: one check of a directory, printed for a person or
//! as one `verdict` object.

use super::HaproxyArgs;
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
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = super::duration)]
    timeout: Duration,
    /// Print one `verdict` object (protocol.md §2) instead of text.
    #[arg(long)]
    json: bool,
    /// The render: DIR/haproxy.cfg and every other file under DIR.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub async fn run(args: Args) -> ExitCode {
    let name = args.dir.file_name().map_or_else(|| "check".to_owned(), |n| n.to_string_lossy().into_owned());
    let render = match dir::load(&args.dir, &name, &name) {
        Ok(render) => render,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let checker = HaproxyChecker::new(HaproxyOptions { binary: args.haproxy.haproxy, ..HaproxyOptions::default() });
    let started = tokio::time::Instant::now();
    let deadline = started + args.timeout;
    let outcome = tokio::time::timeout_at(deadline, checker.check(&render, deadline))
        .await
        .unwrap_or_else(|_| CheckOutcome::Unavailable {
            reason: format!("the check timed out after {}", rendergate::duration::format(args.timeout)),
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
        println!("{head}: {} ({} ms)", args.dir.display(), verdict.duration.as_millis());
        let message = verdict.outcome.message();
        if !message.is_empty() {
            println!("{message}");
        }
    }
    ExitCode::from(code)
}
