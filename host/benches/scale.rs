//! Whole-process figures, each with its baseline measured in the same run:
//!
//! 1. `rendergate check DIR` (sandbox strict) against bare
//!    `haproxy -dr -c -f haproxy.cfg` in DIR, at 100 / 1,000 / 10,000 backends;
//! 2. `applied` events per second through `serve` (NDJSON in, outputs out),
//!    10,000 pods, native default policy; and through the library API
//!    (`Gate::start` with the native default and an instant checker, and
//!    `rendergate::core::Gate` alone);
//! 3. the same through `serve --policy scoped-revert.wasm`, 100 pods, against
//!    the native default on the same stream;
//! 4. `serve`'s VmRSS after 10,000 events and after 1,000,000, 10,000 pods,
//!    renders of 1,000 backends.
//!
//! `cargo bench -p rendergate --bench scale` (add `-- --quick` for fewer rounds;
//! `SCALE_RSS_EVENTS=N` shortens the memory run). Prints Markdown tables.

#[path = "../../examples/gen_render.rs"]
mod gen_render;

use rendergate::check::{CheckFuture, Checked, Checker};
use rendergate::core::{self, CoreConfig, Effect};
use rendergate::{
    CheckOutcome, Event, Gate, GateConfig, Name, Output, PodReport, PolicySeat, Render,
};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rendergate");

fn haproxy() -> String {
    std::env::var("RENDERGATE_TEST_HAPROXY").unwrap_or_else(|_| "haproxy".into())
}

struct Stats {
    median: f64,
    min: f64,
    max: f64,
    n: usize,
}

fn stats(mut xs: Vec<f64>) -> Stats {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = xs.len();
    let median = if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 };
    Stats { median, min: xs[0], max: xs[n - 1], n }
}

impl Stats {
    fn show(&self, digits: usize) -> String {
        format!("{:.d$} ({:.d$}–{:.d$}, n={})", self.median, self.min, self.max, self.n, d = digits)
    }
}

fn timed(cmd: &mut Command) -> f64 {
    let t = Instant::now();
    let out =
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).output().unwrap();
    let elapsed = t.elapsed().as_secs_f64() * 1e3;
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    elapsed
}

// --- 1. check wall time --------------------------------------------------

fn check_wall_time(quick: bool) {
    println!(
        "## `rendergate check` (sandbox strict) vs bare `haproxy -dr -c -f haproxy.cfg`, wall ms\n"
    );
    println!(
        "Render: N backends × 2 servers, 4 maps × 1,000 entries, 4 EC certificates (openssl). Runs interleaved.\n"
    );
    println!(
        "| backends | bare haproxy -c: median (min–max) | rendergate check: median (min–max) | added ms | ratio | target |"
    );
    println!("|---:|---:|---:|---:|---:|---|");
    let haproxy = haproxy();
    for backends in [100, 1_000, 10_000] {
        let dir = tempfile::tempdir().unwrap();
        let g = gen_render::generate(&gen_render::Args {
            seed: backends as u64,
            backends,
            servers: 2,
            maps: 4,
            map_entries: 1_000,
            certs: 4,
            ..Default::default()
        });
        g.write_dir(dir.path());
        let rounds = if quick {
            5
        } else if backends == 10_000 {
            11
        } else {
            21
        };
        let bare = || {
            timed(
                Command::new(&haproxy)
                    .args(["-dr", "-c", "-f", "haproxy.cfg"])
                    .current_dir(dir.path()),
            )
        };
        let gate = || {
            timed(Command::new(BIN).args(["check", "--haproxy", haproxy.as_str()]).arg(dir.path()))
        };
        bare();
        gate();
        let (mut b, mut r) = (vec![], vec![]);
        for _ in 0..rounds {
            b.push(bare());
            r.push(gate());
        }
        let (b, r) = (stats(b), stats(r));
        let ratio = r.median / b.median;
        let target = match backends {
            1_000 => format!("≤ 1.10: {}", if ratio <= 1.10 { "met" } else { "missed" }),
            10_000 => format!("≤ 1.03: {}", if ratio <= 1.03 { "met" } else { "missed" }),
            _ => "report".into(),
        };
        println!(
            "| {backends} | {} | {} | {:+.2} | {ratio:.3} | {target} |",
            b.show(2),
            r.show(2),
            r.median - b.median
        );
    }
    println!();
}

// --- 2./3. events per second -------------------------------------------

fn applied_line(pod: u64, plan: u64) -> String {
    format!(
        "{{\"type\":\"applied\",\"pod\":\"ns/pod-{pod}\",\"render\":\"r-{plan}\",\"plan\":\"plan-{plan}\",\"running_plan\":\"plan-{plan}\",\"baseline_plan\":\"plan-1\"}}\n"
    )
}

/// A small render (plan-1), then `ramp` events bringing `pods` pods in,
/// then `events` more: every report new (`distinct`: the pod's plan
/// alternates between plan-1 and plan-2), or each pod repeating its report.
fn stream(pods: u64, events: u64, distinct: bool) -> String {
    let g = gen_render::generate(&gen_render::Args {
        seed: 1,
        backends: 10,
        servers: 1,
        maps: 1,
        map_entries: 10,
        ..Default::default()
    });
    let mut s = g.ndjson_line("plan-1", "r-1", "c-1");
    s.push_str(&g.ndjson_line("plan-2", "r-2", "c-2"));
    for p in 0..pods {
        s.push_str(&applied_line(p, 1));
    }
    for n in 0..events {
        let plan = if distinct { 1 + (n / pods + 1) % 2 } else { 1 };
        s.push_str(&applied_line(n % pods, plan));
    }
    s
}

/// Runs `serve` over `input` (a file, as a pipe would feed it), outputs to a
/// pipe that is read and counted. Seconds until exit, and output lines.
fn serve_once(input: &Path, extra: &[&str]) -> (f64, usize) {
    let haproxy = haproxy();
    let t = Instant::now();
    let mut child = Command::new(BIN)
        .args(["serve", "--check-interval", "0s", "--haproxy", haproxy.as_str()])
        .args(extra)
        .stdin(std::fs::File::open(input).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut lines = 0;
    loop {
        let n = std::io::Read::read(&mut out, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|b| **b == b'\n').count();
    }
    assert!(child.wait().unwrap().success());
    (t.elapsed().as_secs_f64(), lines)
}

/// Events per second for `events` events past the ramp: (full − ramp only),
/// paired runs, median over rounds.
fn serve_rate(
    pods: u64,
    events: u64,
    distinct: bool,
    extra: &[&str],
    rounds: usize,
) -> (Stats, Stats, usize) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.ndjson");
    let full = dir.path().join("full.ndjson");
    std::fs::write(&base, stream(pods, 0, distinct)).unwrap();
    std::fs::write(&full, stream(pods, events, distinct)).unwrap();
    let (mut rates, mut bases, mut lines) = (vec![], vec![], 0);
    for _ in 0..rounds {
        let (tb, _) = serve_once(&base, extra);
        let (tf, l) = serve_once(&full, extra);
        lines = l;
        bases.push(tb * 1e3);
        rates.push(events as f64 / (tf - tb).max(1e-9));
    }
    (stats(rates), stats(bases), lines)
}

/// Passes at once.
struct Instant0;
impl Checker for Instant0 {
    fn identity(&self) -> Arc<str> {
        "instant".into()
    }
    fn check<'a>(
        &'a self,
        _render: &'a Render,
        _deadline: tokio::time::Instant,
    ) -> CheckFuture<'a> {
        Box::pin(async {
            Checked {
                outcome: CheckOutcome::Passed { message: String::new() },
                judge: "instant".into(),
            }
        })
    }
}

fn report(pod: u64, plan: u64) -> PodReport {
    PodReport {
        pod: format!("ns/pod-{pod}").into(),
        render: Some(format!("r-{plan}").into()),
        plan: format!("plan-{plan}").into(),
        running_plan: Some(format!("plan-{plan}").into()),
        baseline_plan: Some("plan-1".into()),
    }
}

/// The same report built from names the controller already holds, as
/// `Name` (`Arc<str>`) values: cloning one copies a pointer, so building the
/// event allocates nothing and the gate frees nothing when it is replaced.
struct HeldNames {
    pods: Vec<Name>,
    plans: [Name; 3],
    renders: [Name; 3],
}

impl HeldNames {
    fn new(pods: u64) -> Self {
        HeldNames {
            pods: (0..pods).map(|p| format!("ns/pod-{p}").into()).collect(),
            plans: ["plan-0".into(), "plan-1".into(), "plan-2".into()],
            renders: ["r-0".into(), "r-1".into(), "r-2".into()],
        }
    }

    fn report(&self, pod: u64, plan: u64) -> PodReport {
        let plan = plan as usize;
        PodReport {
            pod: self.pods[pod as usize].clone(),
            render: Some(self.renders[plan].clone()),
            plan: self.plans[plan].clone(),
            running_plan: Some(self.plans[plan].clone()),
            baseline_plan: Some(self.plans[1].clone()),
        }
    }
}

/// `held`: reports built from [`HeldNames`]; otherwise fresh strings each.
fn events(pods: u64, n: u64, distinct: bool, held: Option<&HeldNames>) -> Vec<Event> {
    let report = |pod, plan| match held {
        Some(names) => names.report(pod, plan),
        None => report(pod, plan),
    };
    (0..n)
        .map(|i| {
            Event::Applied(report(i % pods, if distinct { 1 + (i / pods + 1) % 2 } else { 1 }))
        })
        .collect()
}

fn prelude(pods: u64) -> Vec<Event> {
    let mut v = vec![
        Event::Rendered(Render::new("plan-1", "r-1", "a", vec![])),
        Event::Rendered(Render::new("plan-2", "r-2", "b", vec![])),
    ];
    v.extend((0..pods).map(|p| Event::Applied(report(p, 1))));
    v
}

/// `Gate::start` (tokio adapter, native default policy, instant checker):
/// events per second past the prelude, outputs drained by a task.
fn library_rate(pods: u64, n: u64, distinct: bool, held: bool) -> f64 {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let config = GateConfig { check_interval: Duration::ZERO, ..GateConfig::default() };
        let (gate, mut outputs) = Gate::start(config, Arc::new(Instant0), PolicySeat::default());
        let drain = tokio::spawn(async move {
            let mut k = 0usize;
            while let Some(o) = outputs.recv().await {
                k += usize::from(!matches!(o, Output::Latch(_)));
            }
            k
        });
        for e in prelude(pods) {
            gate.send(e).await.unwrap();
        }
        let names = held.then(|| HeldNames::new(pods));
        let evs = events(pods, n, distinct, names.as_ref());
        let t = Instant::now();
        for e in evs {
            gate.send(e).await.unwrap();
        }
        gate.finish().await;
        let elapsed = t.elapsed().as_secs_f64();
        drain.await.unwrap();
        n as f64 / elapsed
    })
}

/// `rendergate::core::Gate` alone: events in, effects drained (the
/// `Decide` effects carry the fleet; no policy runs).
fn core_rate(pods: u64, n: u64, distinct: bool) -> f64 {
    let mut gate = core::Gate::new(
        CoreConfig { check_interval: Duration::ZERO, ..CoreConfig::default() },
        "judge",
    );
    let now = Instant::now();
    let answer = |gate: &mut core::Gate| {
        while let Some(e) = gate.poll_effect() {
            if let Effect::StartCheck(r) = e {
                gate.handle_check_result(
                    now,
                    r.id,
                    CheckOutcome::Passed { message: String::new() },
                    "judge",
                    Duration::ZERO,
                );
            }
        }
    };
    for e in prelude(pods) {
        gate.handle_event(now, e);
        answer(&mut gate);
    }
    let evs = events(pods, n, distinct, None);
    let t = Instant::now();
    for e in evs {
        gate.handle_event(now, e);
        answer(&mut gate);
    }
    n as f64 / t.elapsed().as_secs_f64()
}

fn throughput(quick: bool, serve: bool) {
    let rounds: usize =
        std::env::var("SCALE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let pods = 10_000;
    let n_distinct: u64 = std::env::var("SCALE_DISTINCT_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let n_repeat: u64 = 1_000_000;
    println!("## `applied` events per second, {pods} pods, native default policy\n");
    println!(
        "Stream: 2 small renders, {pods} `applied` (one per pod: the ramp), then E more `applied`."
    );
    println!("\"distinct\": every report differs from the pod's last (a policy decision each);");
    println!(
        "\"repeat\": each pod repeats its last report (no policy call). Rate = E / (t(ramp + E) − t(ramp only)),"
    );
    println!("paired runs of the same binary; median (min–max) over rounds.\n");
    println!(
        "| path | stream | E | events/s: median (min–max) | baseline: ramp-only run, ms | target |"
    );
    println!("|---|---|---:|---:|---:|---|");
    for (distinct, n) in [(true, n_distinct), (false, n_repeat)].into_iter().filter(|_| serve) {
        let label = if distinct { "distinct" } else { "repeat" };
        let (rate, base, _) = serve_rate(pods, n, distinct, &[], rounds);
        let met = if rate.median >= 200_000.0 { "met" } else { "missed" };
        println!(
            "| serve (NDJSON) | {label} | {n} | {} | {} | ≥ 200,000/s: {met} |",
            rate.show(0),
            base.show(1)
        );
    }
    for (distinct, n) in [(true, n_distinct), (false, n_repeat)] {
        let label = if distinct { "distinct" } else { "repeat" };
        for (held, names) in
            [(false, "fresh strings per event"), (true, "names held by the controller")]
        {
            let rate = stats((0..rounds).map(|_| library_rate(pods, n, distinct, held)).collect());
            let met = if rate.median >= 1_000_000.0 { "met" } else { "missed" };
            println!(
                "| library: Gate::start (tokio, native policy), {names} | {label} | {n} | {} | — | ≥ 1,000,000/s: {met} |",
                rate.show(0)
            );
        }
        let rate = stats((0..rounds).map(|_| core_rate(pods, n, distinct)).collect());
        let met = if rate.median >= 1_000_000.0 { "met" } else { "missed" };
        println!(
            "| library: core::Gate alone (no policy) | {label} | {n} | {} | — | ≥ 1,000,000/s: {met} |",
            rate.show(0)
        );
    }
    println!();
    if !serve {
        return;
    }

    let pods = 100;
    let n = if quick { 20_000 } else { 100_000 };
    println!(
        "## `serve --policy scoped-revert.wasm` vs native default, {pods} pods, same stream\n"
    );
    println!("| stream | E | native events/s | wasm events/s | ratio native/wasm |");
    println!("|---|---:|---:|---:|---:|");
    let wasm = ["--policy", policy_artifacts::SCOPED_REVERT];
    for (distinct, label) in [(true, "distinct"), (false, "repeat")] {
        let (native, _, _) = serve_rate(pods, n, distinct, &[], rounds);
        let (w, _, _) = serve_rate(pods, n, distinct, &wasm, rounds);
        println!(
            "| {label} | {n} | {} | {} | {:.1}x |",
            native.show(0),
            w.show(0),
            native.median / w.median
        );
    }
    println!();
}

// --- 4. resident memory ------------------------------------------------

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap()
        + f[12].parse::<u64>().unwrap()
        + f[13].parse::<u64>().unwrap()
        + f[14].parse::<u64>().unwrap()
}

/// Waits until `serve` has used no CPU (its own or its reaped checks') for 1 s.
fn wait_idle(pid: u32) {
    let mut last = cpu_ticks(pid);
    let mut still = 0;
    while still < 10 {
        std::thread::sleep(Duration::from_millis(100));
        let now = cpu_ticks(pid);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
}

fn memory() {
    let total: u64 =
        std::env::var("SCALE_RSS_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let (pods, first) = (10_000u64, 10_000u64);
    let big = gen_render::generate(&gen_render::Args {
        seed: 3,
        backends: 1_000,
        servers: 2,
        maps: 4,
        map_entries: 1_000,
        ..Default::default()
    });
    let haproxy = haproxy();
    let mut child = Command::new(BIN)
        .args(["serve", "--check-interval", "0s", "--haproxy", haproxy.as_str()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        std::io::copy(&mut std::io::BufReader::new(out), &mut std::io::sink()).unwrap()
    });
    let mut stdin = std::io::BufWriter::with_capacity(1 << 20, child.stdin.take().unwrap());
    // A new render of 1,000 backends every 100,000 events (the first at 0);
    // pods apply the newest, mostly repeating their last report (1 in 50 new).
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut plan = 0u64;
    let mut held = vec![0u64; pods as usize];
    let mut write = |stdin: &mut std::io::BufWriter<_>, n: u64| {
        if n.is_multiple_of(100_000) {
            plan += 1;
            let mut g = big.config.clone();
            g.push_str(&format!("# render {plan}\n"));
            let files = big
                .files
                .iter()
                .map(|f| gen_render::File {
                    kind: f.kind,
                    path: f.path.clone(),
                    content: f.content.clone(),
                })
                .collect();
            let line = gen_render::Generated { config: g, files }.ndjson_line(
                &format!("plan-{plan}"),
                &format!("r-{plan}"),
                "c",
            );
            stdin.write_all(line.as_bytes()).unwrap();
            return;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let pod = if n < pods { n } else { rng % pods };
        if n < pods || rng.is_multiple_of(50) {
            held[pod as usize] = plan;
        }
        stdin.write_all(applied_line(pod, held[pod as usize]).as_bytes()).unwrap();
    };
    let first_line = big.ndjson_line("plan-0", "r-0", "c");
    stdin.write_all(first_line.as_bytes()).unwrap();
    let t = Instant::now();
    for n in 0..first {
        write(&mut stdin, n);
    }
    stdin.flush().unwrap();
    wait_idle(pid);
    let after_first = rss_kib(pid);
    let t_first = t.elapsed();
    for n in first..total {
        write(&mut stdin, n);
    }
    stdin.flush().unwrap();
    wait_idle(pid);
    let after_all = rss_kib(pid);
    let t_all = t.elapsed();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    println!("## `serve` resident memory (VmRSS), {pods} pods, renders of 1,000 backends\n");
    println!(
        "| after {first} events | after {total} events | growth | target |\n|---:|---:|---:|---|"
    );
    let growth = after_all as f64 / 1024.0 - after_first as f64 / 1024.0;
    println!(
        "| {:.1} MiB ({:.1} s) | {:.1} MiB ({:.1} s) | {growth:+.1} MiB | ≤ 10 MB: {} |\n",
        after_first as f64 / 1024.0,
        t_first.as_secs_f64(),
        after_all as f64 / 1024.0,
        t_all.as_secs_f64(),
        if growth * 1.048576 <= 10.0 { "met" } else { "missed" }
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = |name: &str| {
        !args.iter().any(|a| a.starts_with("--only="))
            || args.iter().any(|a| a == &format!("--only={name}"))
    };
    println!(
        "# rendergate scale benchmarks ({} profile)\n",
        if cfg!(debug_assertions) { "dev" } else { "release" }
    );
    if only("check") {
        check_wall_time(quick);
    }
    if only("events") {
        throughput(quick, true);
    } else if args.iter().any(|a| a == "--only=library") {
        throughput(quick, false); // the library rows alone, e.g. under a profiler
    }
    if only("memory") {
        memory();
    }
}
