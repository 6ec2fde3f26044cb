//! The differential test: on every case of a corpus, the gate's verdict kind
//! (`rendergate check --json`, the real binary) must equal bare
//! `haproxy -dr -c`'s on the same files (sides.rs says how each is read).
//!
//! The corpus: the project's own cases (configs generated from a seed,
//! generated.rs; warning floods sized around 4 KiB, 64 KiB and 1 MiB of
//! output, floods.rs; hand-written forgery attempts, forgeries.rs) and two
//! corpora written outside the project, read at run time (external.rs):
//! real-world configurations (realworld.rs) and HAProxy's own regression
//! tests' configs, converted from its sources tarball (regtests.rs,
//! vtc.rs). Every case runs; then the test fails once, listing every
//! disagreement with its name and origin, the config's first lines, the
//! gate's JSON and bare HAProxy's exit and output.
//!
//! `RENDERGATE_TEST_HAPROXY` names the haproxy (default `haproxy`; missing
//! is a failure). `RENDERGATE_CORPORA` and `RENDERGATE_HAPROXY_SOURCES`
//! say where the outside corpora are (missing: a failure in CI, else a
//! skip said loudly). `RENDERGATE_DIFF_SEED` replaces the corpus seed,
//! `RENDERGATE_DIFF_CASES` the number of generated cases, and
//! `RENDERGATE_DIFF_ONLY` keeps only the cases whose name contains it (to
//! rerun one: the seed and the name the report printed; `realworld/` or
//! `regtests/` for one outside corpus); `RENDERGATE_DIFF_VERBOSE=1` prints
//! every case's two kinds (with `--nocapture`).

mod case;
mod external;
mod floods;
mod forgeries;
mod generated;
#[path = "../needs.rs"]
mod needs;
mod realworld;
mod regtests;
mod report;
mod rng;
mod sides;
mod vtc;

use case::Case;
use sides::Kind;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const DEFAULT_SEED: u64 = 0x5EED_D1FF_2026_0001;
const DEFAULT_GENERATED: usize = 300;
/// Of the whole corpus, bare HAProxy must pass and refuse at least this many
/// each: a harness that makes every case one kind proves nothing.
const MIN_EACH_KIND: usize = 60;

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => text.replace('_', "").parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={text}: {e}")))
}

/// The whole corpus for the haproxy under test (floods are sized on it,
/// regression tests chosen by what it supports), and a line about the
/// regression tests not run.
fn corpus(seed: u64) -> (Vec<Case>, Option<String>) {
    let generated = env_number("RENDERGATE_DIFF_CASES").map_or(DEFAULT_GENERATED, |n| n as usize);
    let mut cases: Vec<Case> = (0..generated).map(|i| generated::case(seed, i)).collect();
    cases.extend(floods::cases());
    let lua = needs::lua(sides::haproxy());
    if !lua {
        needs::missing(&format!("{} has no Lua", sides::haproxy().display()), "the lua-* cases");
    }
    cases.extend(forgeries::cases(lua));
    match realworld::locate() {
        Ok(corpora) => cases.extend(realworld::cases(&corpora)),
        Err(e) => external::absent(&format!("the real-world corpus is {e}"), "its cases"),
    }
    let mut not_run = None;
    match regtests::locate() {
        Ok(sources) => {
            let regtests = regtests::cases(&sources, sides::haproxy());
            not_run = Some(format!("regtests: {}", regtests.not_run_summary()));
            cases.extend(regtests.cases);
        }
        Err(e) => external::absent(
            &format!("HAProxy's sources ({}) are {e}", regtests::TARBALL),
            "the regression tests' cases",
        ),
    }
    (cases, not_run)
}

/// Which corpus a case belongs to, by its name.
fn corpus_of(case: &Case) -> &'static str {
    match case.name.split_once('/') {
        Some(("realworld", _)) => "realworld",
        Some(("regtests", _)) => "regtests",
        _ => "own",
    }
}

/// One case, run by both sides.
pub struct Compared<'a> {
    pub case: &'a Case,
    pub gate: Result<Kind, String>,
    pub gate_run: sides::Run,
    pub bare: Kind,
    pub bare_run: sides::Run,
}

impl Compared<'_> {
    fn agrees(&self) -> bool {
        let documented = self
            .case
            .deviation
            .is_some_and(|d| self.gate.as_ref() == Ok(&d.gate) && self.bare == d.bare);
        self.gate.as_ref() == Ok(&self.bare) || documented
    }
}

/// Writes `case` for each side in its own fresh directory and asks both.
fn run_case(case: &Case) -> Compared<'_> {
    let gate_dir = tempfile::tempdir().unwrap();
    let bare_dir = tempfile::tempdir().unwrap();
    let bare_path = std::fs::canonicalize(bare_dir.path()).unwrap();
    case.write_for_gate(gate_dir.path());
    case.write_for_bare(&bare_path);
    let (gate, gate_run) = sides::gate(gate_dir.path());
    let (bare, bare_run) = sides::bare(&bare_path);
    Compared { case, gate, gate_run, bare, bare_run }
}

/// Runs every case by both sides on a few threads, in corpus order.
fn run_all(cases: &[Case]) -> Vec<Compared<'_>> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8) + 1;
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::with_capacity(cases.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(index) else { break };
                    let compared = run_case(case);
                    done.lock().unwrap().push((index, compared));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|(index, _)| *index);
    done.into_iter().map(|(_, compared)| compared).collect()
}

#[test]
fn gate_and_bare_haproxy_agree_on_every_case() {
    let started = Instant::now();
    let seed = env_number("RENDERGATE_DIFF_SEED").unwrap_or(DEFAULT_SEED);
    let only = std::env::var("RENDERGATE_DIFF_ONLY").ok();
    let (mut cases, not_run) = corpus(seed);
    if let Some(only) = &only {
        cases.retain(|c| c.name.contains(only.as_str()));
        assert!(!cases.is_empty(), "RENDERGATE_DIFF_ONLY={only} matches no case");
    }
    let compared = run_all(&cases);
    if std::env::var_os("RENDERGATE_DIFF_VERBOSE").is_some() {
        for j in &compared {
            let gate =
                j.gate.as_ref().map_or_else(|e| format!("unreadable ({e})"), Kind::to_string);
            eprintln!(
                "{:<60} gate {gate:<14} bare {} ({})",
                j.case.name, j.bare, j.bare_run.status
            );
        }
    }

    let mut by_bare: BTreeMap<Kind, usize> = BTreeMap::new();
    for j in &compared {
        *by_bare.entry(j.bare).or_default() += 1;
    }
    let disagreements: Vec<&Compared> = compared.iter().filter(|j| !j.agrees()).collect();
    let mut by_corpus: BTreeMap<&str, [usize; 5]> = BTreeMap::new();
    for j in &compared {
        let counts = by_corpus.entry(corpus_of(j.case)).or_default();
        counts[0] += 1;
        counts[1] += usize::from(!j.agrees());
        counts[2 + j.bare as usize] += 1;
    }
    let mut summary = format!(
        "{} with seed {seed:#018x}: {} cases ({} disagree); bare: {} pass, {} refused, {} could not run; {:.1} s",
        sides::haproxy().display(),
        compared.len(),
        disagreements.len(),
        by_bare.get(&Kind::Pass).unwrap_or(&0),
        by_bare.get(&Kind::Refused).unwrap_or(&0),
        by_bare.get(&Kind::CouldNotRun).unwrap_or(&0),
        started.elapsed().as_secs_f64(),
    );
    for (corpus, [n, disagree, pass, refused, could_not]) in &by_corpus {
        summary.push_str(&format!(
            "\n  {corpus}: {n} cases ({disagree} disagree); bare: {pass} pass, {refused} refused, {could_not} could not run"
        ));
    }
    if let Some(not_run) = &not_run {
        summary.push_str(&format!("\n  {not_run}"));
    }
    eprintln!("{summary}");

    let mut problems = Vec::new();
    if only.is_none() {
        for kind in [Kind::Pass, Kind::Refused] {
            let n = by_bare.get(&kind).copied().unwrap_or(0);
            if n < MIN_EACH_KIND {
                problems.push(format!(
                    "the corpus is lopsided: bare HAProxy compared only {n} cases {kind} (want ≥ {MIN_EACH_KIND})"
                ));
            }
        }
    }
    if !disagreements.is_empty() {
        problems.push(report::disagreements(&disagreements));
    }
    assert!(problems.is_empty(), "{summary}\n\n{}", problems.join("\n\n"));
}

/// The harness itself tells the kinds apart: a known valid, refused and
/// no-listener config come out as such from both sides (so a harness bug
/// that makes everything "could not run", or that loses the files, cannot
/// hide behind agreement), and each side's could-not-run is reachable.
#[test]
fn the_harness_tells_the_kinds_apart() {
    const BASE: &str = "global\ndefaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n";
    let frontend = |extra: &str| {
        format!(
            "{BASE}frontend f\n    bind 127.0.0.1:18080\n{extra}    default_backend b\nbackend b\n    server s 127.0.0.1:8080\n"
        )
    };
    let map = "    http-request set-header X %[req.hdr(host),map(maps/h.map,none)]\n";
    let origin = format!("global\n    default-path origin {}\n", case::ORIGIN);
    let expected = [
        (Case::new("valid", frontend("")), Kind::Pass, 0),
        (Case::new("missing backend", frontend("    use_backend nope\n")), Kind::Refused, 1),
        (
            Case::new("no listener", format!("{BASE}backend b\n    server s 127.0.0.1:8080\n")),
            Kind::Pass,
            2,
        ),
        (Case::new("map present", frontend(map)).with_file("maps/h.map", "a b\n"), Kind::Pass, 0),
        (Case::new("map missing", frontend(map)), Kind::Refused, 1),
        (
            Case::new(
                "map through default-path origin",
                frontend(map).replacen("global\n", &origin, 1),
            )
            .with_file("maps/h.map", "a b\n"),
            Kind::Pass,
            0,
        ),
    ];
    for (case, kind, exit) in &expected {
        let j = run_case(case);
        let detail = report::one(&j);
        assert_eq!(
            j.bare_run.status.code(),
            Some(*exit),
            "{}: bare's exit status\n{detail}",
            case.name
        );
        assert_eq!((&j.gate, j.bare), (&Ok(*kind), *kind), "{}\n{detail}", case.name);
    }

    // The gate could not run: no such binary.
    let dir = tempfile::tempdir().unwrap();
    Case::new("x", frontend("")).write_for_gate(dir.path());
    let (gate, run) = sides::gate_with(Path::new("/nonexistent/haproxy"), dir.path());
    assert_eq!(gate, Ok(Kind::CouldNotRun), "{}", run.stdout);
    // Bare could not run: killed by a signal.
    let killed = sides::run({
        let mut c = std::process::Command::new("/bin/sh");
        c.args(["-c", "kill -KILL $$"]);
        c
    });
    assert_eq!(sides::bare_kind(killed.status), Kind::CouldNotRun);
}

/// A seed rebuilds the same case, and different seeds make different ones.
#[test]
fn the_generated_corpus_is_rebuilt_from_its_seed() {
    for index in [0, 1, 41, 299] {
        let (a, b) = (generated::case(DEFAULT_SEED, index), generated::case(DEFAULT_SEED, index));
        assert_eq!((&a.name, &a.config, &a.files, a.seed), (&b.name, &b.config, &b.files, b.seed));
    }
    let distinct: std::collections::HashSet<Vec<u8>> =
        (0..50).map(|i| generated::case(DEFAULT_SEED, i).config).collect();
    assert!(distinct.len() > 45, "{} distinct configs of 50", distinct.len());
}
