//! `rendergate policy check|test|bench`: load a policy component, say whether
//! it implements the world, run it against fixtures (docs/protocol.md §1, §4),
//! and measure it (`bench`, in `policy_bench.rs`).
//! Both compile through the same cache as `serve` (its default directory,
//! docs/policies.md), so checking a policy before deploying it also warms
//! the gate's start.

use anyhow::Context as _;
use rendergate::policy::cache::ComponentCache;
use rendergate::policy::fixture::{self, Case, CaseResult};
use rendergate::policy::{ComponentPolicy, Policy, PolicyLimits};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Loads a policy component, says whether it implements the world, prints its name.
    Check {
        #[arg(value_name = "FILE.wasm")]
        component: PathBuf,
    },
    /// Runs a policy against fixture files; reports each case, then `N passed, N failed`.
    Test {
        #[arg(value_name = "FILE.wasm")]
        component: PathBuf,
        #[arg(value_name = "FIXTURE.json", required = true)]
        fixtures: Vec<PathBuf>,
    },
    /// Times a policy's decisions against the built-in default's on generated fleets.
    Bench(super::policy_bench::Args),
}

pub fn run(command: Command) -> ExitCode {
    match command {
        Command::Check { component } => match load(&component) {
            Ok(policy) => {
                outln!(
                    "{}: implements {} as {:?}",
                    component.display(),
                    rendergate::policy::component::WORLD,
                    policy.name()
                );
                // What serve would warn of at load: the component runs, but
                // the fallback would decide these triggers.
                for (what, e) in rendergate::policy::reload::sample_failures(&policy) {
                    outln!(
                        "warning: it fails the sample trigger \"{what}\" ({}): {e}",
                        e.failure.reason()
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                outln!("{}: {e}", component.display());
                ExitCode::from(1)
            }
        },
        Command::Test { component, fixtures } => test(&component, &fixtures),
        Command::Bench(args) => super::policy_bench::run(args),
    }
}

/// Loads `component` with the default limits, through the default compile cache when it can be used.
fn load(component: &Path) -> Result<ComponentPolicy, rendergate::policy::PolicyFailure> {
    let cache = ComponentCache::open(&ComponentCache::default_dir())
        .inspect_err(|e| tracing::warn!("{e}; compiling without a cache"))
        .ok();
    ComponentPolicy::load(component, PolicyLimits::default(), cache.as_ref())
}

/// The cases of one fixture file.
fn read_fixtures(file: &Path) -> anyhow::Result<Vec<Case>> {
    let text = std::fs::read_to_string(file).with_context(|| file.display().to_string())?;
    fixture::parse(&text).map_err(anyhow::Error::msg).with_context(|| file.display().to_string())
}

fn test(component: &Path, fixtures: &[PathBuf]) -> ExitCode {
    let policy = match load(component).with_context(|| component.display().to_string()) {
        Ok(policy) => policy,
        Err(e) => return super::fail(&e, 2),
    };
    let (mut passed, mut failed) = (0, 0);
    for file in fixtures {
        let cases = match read_fixtures(file) {
            Ok(cases) => cases,
            Err(e) => return super::fail(&e, 2),
        };
        for case in &cases {
            match fixture::run(&policy, case) {
                CaseResult::Passed => {
                    passed += 1;
                    outln!("passed: {}", case.name);
                }
                CaseResult::Failed(diff) => {
                    failed += 1;
                    outln!("failed: {}", case.name);
                    for line in diff {
                        outln!("    {line}");
                    }
                }
                CaseResult::Error(e) => {
                    failed += 1;
                    outln!("failed: {}\n    {e}", case.name);
                }
            }
        }
    }
    outln!("{passed} passed, {failed} failed");
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
