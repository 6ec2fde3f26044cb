//! `rendergate policy bench FILE.wasm [--pods N]... [--json]`: what a
//! policy's decisions cost against the built-in default's, on generated
//! fleets (docs/protocol.md §1; the output is described in docs/policies.md,
//! "Measuring a policy").
//!
//! The component is compiled once (timed apart, no cache: a real compile);
//! then each decision runs as `serve` runs it, in a fresh store under the
//! default fuel and memory limits, and only decisions are timed. The
//! deadline is widened so that a slow machine measures instead of failing.
//! Fleets and triggers are `rendergate_policy::bench`'s, the same for the
//! policy and the default.

use rendergate::policy::bench::{self, TriggerKind};
use rendergate::policy::shadow::same_decision;
use rendergate::policy::{
    ComponentPolicy, Decision, DecisionCost, NativeDefault, Policy, PolicyLimits,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    #[arg(value_name = "FILE.wasm")]
    component: PathBuf,
    /// A fleet size to measure (repeat for more; default 10, 100 and 1000).
    #[arg(long = "pods", allow_hyphen_values = true, value_name = "N", value_parser = pods)]
    pods: Vec<usize>,
    /// One JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

/// The sizes measured when no `--pods` is given.
const DEFAULT_SIZES: [usize; 3] = [10, 100, 1_000];
/// The largest fleet measured: beyond it a decision runs past the default limits anyway.
const MAX_PODS: usize = 100_000;
/// Time spent on the timed decisions of one trigger at one size, for each
/// of the policy and the default; at least [`MIN_ROUNDS`] run whatever it takes.
const BUDGET: Duration = Duration::from_millis(400);
const MIN_ROUNDS: usize = 10;
const MAX_ROUNDS: usize = 1_000;
/// Untimed decisions first: caches, lazily built guest state.
const WARM_UP: usize = 3;
/// The deadline of each decision: wide, so time is measured, not cut.
const DEADLINE: Duration = Duration::from_secs(10);

fn pods(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_PODS).contains(&n) => Ok(n),
        _ => Err(format!("expected a number of pods from 1 to {MAX_PODS}")),
    }
}

/// The timings of one side (the policy or the default) on one trigger, and its last decision.
struct Side {
    p50: Duration,
    p99: Duration,
    rounds: usize,
    decision: Decision,
}

/// The policy's side also says what a decision cost in the component host.
struct Measured {
    side: Side,
    fuel: u64,
    peak_memory: usize,
}

/// One trigger kind at one size.
struct Row {
    kind: TriggerKind,
    policy: Result<Measured, String>,
    default: Side,
}

pub fn run(args: Args) -> ExitCode {
    let limits = PolicyLimits { deadline: DEADLINE, ..PolicyLimits::default() };
    let size = std::fs::metadata(&args.component).map(|m| m.len()).unwrap_or(0);
    let compiling = Instant::now();
    let policy = match ComponentPolicy::load(&args.component, limits.clone(), None) {
        Ok(policy) => policy,
        Err(e) => {
            print_error!("{}: {e}", args.component.display());
            return ExitCode::from(2);
        }
    };
    let compiled = compiling.elapsed();
    let sizes = if args.pods.is_empty() { DEFAULT_SIZES.to_vec() } else { args.pods.clone() };
    let mut instantiations = Vec::new();
    let table: Vec<(usize, Vec<Row>)> = sizes
        .iter()
        .map(|&n| {
            let pods = bench::pods(n);
            let rows = TriggerKind::ALL
                .iter()
                .map(|&kind| measure(&policy, kind, kind.fleet(pods.clone()), &mut instantiations))
                .collect();
            (n, rows)
        })
        .collect();
    let (instantiate_p50, instantiate_p99) = bench::percentiles(&mut instantiations);
    let report = Report {
        policy: policy.name(),
        component: &args.component,
        size,
        compiled,
        instantiate_p50,
        instantiate_p99,
        limits: &limits,
        table: &table,
    };
    if args.json {
        outln!("{}", report.json());
    } else {
        out!("{}", report.text());
    }
    ExitCode::SUCCESS
}

/// Times `kind` on `fleet`: the policy, then the built-in default.
fn measure(
    policy: &ComponentPolicy,
    kind: TriggerKind,
    fleet: rendergate::policy::Fleet,
    instantiations: &mut Vec<Duration>,
) -> Row {
    let trigger = kind.trigger(&fleet);
    let mut cost = DecisionCost::default();
    let measured = time(|| {
        let (decision, spent) =
            policy.decide_metered(&trigger, &fleet).map_err(|e| e.failure.to_string())?;
        instantiations.push(spent.instantiate);
        cost.fuel = cost.fuel.max(spent.fuel);
        cost.peak_memory = cost.peak_memory.max(spent.peak_memory);
        Ok(decision)
    });
    let policy =
        measured.map(|side| Measured { side, fuel: cost.fuel, peak_memory: cost.peak_memory });
    let default = time(|| NativeDefault.decide(&trigger, &fleet).map_err(|e| e.to_string()))
        .expect("the built-in default never fails");
    Row { kind, policy, default }
}

/// Runs `decide` [`WARM_UP`] times, then times it within the budget; keeps
/// the last decision. The first failure ends it.
fn time(mut decide: impl FnMut() -> Result<Decision, String>) -> Result<Side, String> {
    let mut decision = Decision::default();
    for _ in 0..WARM_UP {
        decision = decide()?;
    }
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < MIN_ROUNDS || (times.len() < MAX_ROUNDS && started.elapsed() < BUDGET) {
        let t = Instant::now();
        decision = decide()?;
        times.push(t.elapsed());
    }
    let rounds = times.len();
    let (p50, p99) = bench::percentiles(&mut times);
    Ok(Side { p50, p99, rounds, decision })
}

struct Report<'a> {
    policy: &'a str,
    component: &'a std::path::Path,
    size: u64,
    compiled: Duration,
    instantiate_p50: Duration,
    instantiate_p99: Duration,
    limits: &'a PolicyLimits,
    table: &'a [(usize, Vec<Row>)],
}

fn us(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

/// Bytes to read at a glance: KiB below a MiB, MiB above.
fn bytes(n: u64) -> String {
    if n < 1 << 20 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / f64::from(1 << 20))
    }
}

impl Report<'_> {
    /// docs/policies.md, "Measuring a policy", describes this document.
    fn json(&self) -> Value {
        let sizes: Vec<Value> = self
            .table
            .iter()
            .map(|(pods, rows)| {
                let triggers: Vec<Value> = rows
                    .iter()
                    .map(|row| {
                        let default = &row.default;
                        let mut trigger = json!({
                            "kind": row.kind.name(),
                            "default": {
                                "p50_us": us(default.p50), "p99_us": us(default.p99),
                                "rounds": default.rounds,
                                "promote": default.decision.promote.len(),
                                "revert": default.decision.revert.len(),
                            },
                        });
                        trigger["policy"] = match &row.policy {
                            Ok(m) => json!({
                                "p50_us": us(m.side.p50), "p99_us": us(m.side.p99),
                                "rounds": m.side.rounds,
                                "fuel": m.fuel, "peak_memory": m.peak_memory,
                                "promote": m.side.decision.promote.len(),
                                "revert": m.side.decision.revert.len(),
                                "same_as_default": same_decision(&m.side.decision, &default.decision),
                            }),
                            Err(e) => json!({ "error": e }),
                        };
                        trigger
                    })
                    .collect();
                let (fuel, memory) = maxima(rows);
                json!({ "pods": pods, "fuel": fuel, "peak_memory": memory, "triggers": triggers })
            })
            .collect();
        json!({
            "policy": self.policy,
            "component": self.component.display().to_string(),
            "component_bytes": self.size,
            "compile_ms": ms(self.compiled),
            "instantiate_us": { "p50": us(self.instantiate_p50), "p99": us(self.instantiate_p99) },
            "limits": {
                "fuel": self.limits.fuel,
                "memory": self.limits.memory,
                "deadline_ms": self.limits.deadline.as_millis() as u64,
            },
            "sizes": sizes,
        })
    }

    fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "policy {:?} ({}, {}): compiled in {:.1} ms; instantiation p50 {:.1} µs, p99 {:.1} µs",
            self.policy,
            self.component.display(),
            bytes(self.size),
            ms(self.compiled),
            us(self.instantiate_p50),
            us(self.instantiate_p99),
        );
        let _ = writeln!(
            out,
            "limits: fuel {}, memory {} (serve's defaults); deadline widened to {}s for timing",
            self.limits.fuel,
            bytes(self.limits.memory as u64),
            self.limits.deadline.as_secs(),
        );
        let _ = writeln!(
            out,
            "decision time per trigger, p50/p99 in µs: the policy | the built-in default, same fleet\n"
        );
        // A grid of cells, then each column as wide as its widest cell.
        let mut grid = vec![
            std::iter::once("pods".to_owned())
                .chain(TriggerKind::ALL.iter().map(|k| k.name().to_owned()))
                .chain(["fuel (max)".to_owned(), "peak memory".to_owned()])
                .collect::<Vec<_>>(),
        ];
        let (mut differ, mut failed) = (Vec::new(), Vec::new());
        for (pods, rows) in self.table {
            let mut line = vec![pods.to_string()];
            for row in rows {
                let default = format!("{:.1}/{:.1}", us(row.default.p50), us(row.default.p99));
                line.push(match &row.policy {
                    Ok(m) => {
                        if !same_decision(&m.side.decision, &row.default.decision) {
                            differ.push(format!("{} at {pods} pods", row.kind.name()));
                        }
                        format!("{:.1}/{:.1} | {default}", us(m.side.p50), us(m.side.p99))
                    }
                    Err(e) => {
                        failed.push(format!("{} at {pods} pods ({e})", row.kind.name()));
                        format!("failed | {default}")
                    }
                });
            }
            let (fuel, memory) = maxima(rows);
            line.extend([fuel.to_string(), bytes(memory as u64)]);
            grid.push(line);
        }
        let widths: Vec<usize> = (0..grid[0].len())
            .map(|c| grid.iter().map(|line| line[c].chars().count()).max().unwrap_or(0))
            .collect();
        for line in &grid {
            let last = line.len() - 1;
            let cells: Vec<String> = line
                .iter()
                .enumerate()
                .map(|(c, cell)| match c {
                    // Numbers right-aligned, the trigger columns left-aligned.
                    0 => format!("{cell:>w$}", w = widths[c]),
                    c if c >= last - 1 => format!("{cell:>w$}", w = widths[c]),
                    _ => format!("{cell:<w$}", w = widths[c]),
                })
                .collect();
            let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        }
        if !(differ.is_empty() && failed.is_empty()) {
            out.push('\n');
        }
        if !differ.is_empty() {
            let _ = writeln!(out, "decisions unlike the default's: {}", differ.join("; "));
        }
        if !failed.is_empty() {
            let _ = writeln!(out, "failed: {}", failed.join("; "));
        }
        out
    }
}

/// The most fuel and memory any trigger of one size took.
fn maxima(rows: &[Row]) -> (u64, usize) {
    rows.iter()
        .filter_map(|r| r.policy.as_ref().ok())
        .fold((0, 0), |(fuel, memory), m| (fuel.max(m.fuel), memory.max(m.peak_memory)))
}
