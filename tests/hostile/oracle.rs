//! The path oracle (the issue's acceptance criterion: "a render cannot tell
//! whether a host path outside its world exists"). For host paths that
//! exist (files, directories, secrets, /proc entries, the gate's own
//! directories, a file planted in the host's /tmp) and paths that do not,
//! each named by the config in a way whose error differs on the host
//! (`acl -f`, `errorfile`, `ca-file`, `crt`, `crt-list`, `return file`,
//! `lua-load`, Lua's `io.open`), the gate's verdict must be the same kind
//! with the same message, once the path and the pids are taken out: every
//! such path is "No such file or directory". HAProxy's `.if` has no file
//! predicate (2.6 to 3.2), so it cannot ask.
//!
//! With `RENDERGATE_HOSTILE_CANARY=1`, the same probes run unsandboxed,
//! where each mechanism must tell some existing path from a missing one
//! (else it proves nothing sandboxed).

use crate::cases::{acl_file, config};
use crate::support::*;
use std::path::{Path, PathBuf};

/// How a config names a path: the render for path `p`.
type Mechanism = fn(&str) -> Spec;

fn acl(p: &str) -> Spec {
    Spec::check(acl_file(p), ALL_KINDS)
}

fn errorfile(p: &str) -> Spec {
    Spec::check(config("", &format!("  errorfile 503 {p}\n"), ""), ALL_KINDS)
}

fn ca_file(p: &str) -> Spec {
    let tail = format!(
        "backend tls\n  server s1 127.0.0.1:8443 ssl verify required ca-file {p} sni str(hostile.test)\n"
    );
    Spec::check(config("", "  default_backend tls\n", &tail), ALL_KINDS)
}

fn crt(p: &str) -> Spec {
    Spec::check(config("", &format!("  bind 127.0.0.1:18443 ssl crt {p}\n"), ""), ALL_KINDS)
}

fn crt_list(p: &str) -> Spec {
    Spec::check(config("", &format!("  bind 127.0.0.1:18443 ssl crt-list {p}\n"), ""), ALL_KINDS)
}

fn return_file(p: &str) -> Spec {
    let frontend = format!(
        "  http-request return status 200 content-type text/plain file {p} if {{ path /x }}\n"
    );
    Spec::check(config("", &frontend, ""), ALL_KINDS)
}

fn lua_load(p: &str) -> Spec {
    if !has_lua() {
        return no_lua();
    }
    Spec::check(config(&format!("  lua-load {p}\n"), "", ""), ALL_KINDS)
}

/// `io.open` and one byte read: its error (and errno) differ between a
/// missing file, a directory and a file one may not read.
fn io_open(p: &str) -> Spec {
    let script = format!(
        "local f, err, code = io.open([[{p}]])\n\
local got\n\
if f then local d, e2, c2 = f:read(1) got = \"opened, read \" .. tostring(d and #d) .. \" \" .. tostring(e2) .. \" \" .. tostring(c2)\n\
else got = tostring(err) .. \" \" .. tostring(code) end\n\
error(\"io-open: \" .. got)\n"
    );
    let mut spec = crate::lua::lua_render("lua-load", script);
    spec.expect = ALL_KINDS;
    spec
}

const ALL_KINDS: &[Kind] = &[Kind::Pass, Kind::Refused, Kind::CouldNotRun];

/// Where the render is laid out for the probes of the host's
/// /etc/haproxy/haproxy.cfg (at the default, that path is the render's own).
const OTHER_CONFIG_DIR: &str = "/srv/rendergate-render";

/// One probe path: its name in the report, the path (given the scene),
/// whether it exists on the host, and the gate flags it runs with.
struct Target {
    label: String,
    path: Box<dyn Fn(&mut Scene) -> PathBuf + Send + Sync>,
    exists: bool,
    args: Vec<String>,
    /// The host path, when it does not depend on the scene.
    fixed: Option<PathBuf>,
}

fn target(
    label: &str,
    exists: bool,
    path: impl Fn(&mut Scene) -> PathBuf + Send + Sync + 'static,
) -> Target {
    Target { label: label.into(), path: Box::new(path), exists, args: vec![], fixed: None }
}

fn fixed(label: &str, path: impl Into<PathBuf>) -> Target {
    let p: PathBuf = path.into();
    let q = p.clone();
    Target { fixed: Some(p), ..target(label, true, move |_| q.clone()) }
}

/// A directory under /var/tmp that is not on the way to the haproxy under
/// test (whose path the world shows): /var/tmp itself when it can be.
fn var_tmp() -> Option<PathBuf> {
    let binary = haproxy();
    let var_tmp = Path::new("/var/tmp");
    if !binary.starts_with(var_tmp) {
        return var_tmp.is_dir().then(|| var_tmp.to_path_buf());
    }
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(var_tmp).ok()?.flatten().map(|e| e.path()).collect();
    entries.sort();
    entries.into_iter().find(|p| !binary.starts_with(p))
}

/// The paths every mechanism is tried with. Those that exist are checked
/// to exist here, so none is tried for nothing.
fn targets() -> Vec<Target> {
    let mut all = vec![
        fixed("a file (/etc/hostname)", "/etc/hostname"),
        fixed("a secret only root reads (/etc/shadow)", "/etc/shadow"),
        fixed("the keys beside the CA store (/etc/ssl/private)", "/etc/ssl/private"),
        fixed("root's home (/root)", "/root"),
        // a host process (this test): the check's /proc is its own namespace's,
        // where pid 1 is the check's init
        fixed(
            "a host process's environment (/proc/<this test's pid>/environ)",
            format!("/proc/{}/environ", std::process::id()),
        ),
        target("the gate's working directory", true, |_| std::env::current_dir().unwrap()),
        target("the gate's TMPDIR", true, |s| s.tmp.clone()),
        // made by the gate before HAProxy runs; the checker's directories are under it
        target("the check directories' base (TMPDIR/rendergate-<euid>)", true, |s| {
            // SAFETY: geteuid cannot fail.
            s.tmp.join(format!("rendergate-{}", unsafe { libc::geteuid() }))
        }),
        target("the secret beside the render", true, |s| s.secret_path.clone()),
        target("a file planted in the host's /tmp", true, |s| {
            let p = s.host_path(std::env::temp_dir().join(format!("{}-planted", s.tag)));
            std::fs::write(&p, "planted in the host's /tmp\n").unwrap();
            p
        }),
        target("missing: /<name>", false, |s| format!("/{}-missing", s.tag).into()),
        target("missing: /etc/<name>", false, |s| format!("/etc/{}-missing", s.tag).into()),
        target("missing: /root/<name>", false, |s| format!("/root/{}-missing", s.tag).into()),
        target("missing: /tmp/<name>/x", false, |s| format!("/tmp/{}-missing/x", s.tag).into()),
    ];
    if let Some(p) = var_tmp() {
        all.push(fixed(&format!("a directory ({})", p.display()), p));
    }
    let mut cfg = fixed("the host's /etc/haproxy/haproxy.cfg", "/etc/haproxy/haproxy.cfg");
    cfg.args = vec!["--config-dir".into(), OTHER_CONFIG_DIR.into()];
    all.push(cfg);
    let mut missing = target("missing, with --config-dir", false, |s| {
        format!("/etc/haproxy/{}-missing.cfg", s.tag).into()
    });
    missing.args = vec!["--config-dir".into(), OTHER_CONFIG_DIR.into()];
    all.push(missing);
    // a fixed path this host lacks proves nothing: left out, and said
    all.retain(|t| {
        let Some(p) = &t.fixed else { return true };
        let there = std::fs::symlink_metadata(p).is_ok();
        if !there {
            eprintln!("note: path oracle: {} is not on this host; not tried", p.display());
        }
        there
    });
    all
}

/// The message with the path and every pid (`(1234) :`, as HAProxy heads
/// its lines) taken out; other numbers (an errno) stay.
pub fn normalise(message: &str, path: &str) -> String {
    let text = message.replace(path, "<PATH>");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find('(') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(") :") {
            out.push_str("PID");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// What one probe gave: the target's label, whether it exists, the verdict
/// kind and the normalised message; and the common checks' failures.
struct Seen {
    label: String,
    exists: bool,
    kind: Result<Kind, String>,
    message: String,
    fails: Vec<String>,
}

fn probe(mechanism: Mechanism, t: &Target, run: Run) -> Option<Seen> {
    let mut scene = Scene::new();
    let path = (t.path)(&mut scene);
    let path = path.to_str().unwrap().to_owned();
    let mut spec = mechanism(&path);
    if let Some(why) = &spec.skip {
        skip("path oracle", why);
        return None;
    }
    spec.args.extend(t.args.iter().cloned());
    let outcome = run_spec(&scene, &mut spec, run);
    let mut fails =
        if run.mode == Mode::Off { vec![] } else { unmet_checks(&scene, &spec, &outcome) };
    if path.starts_with(scene.tmp.to_str().unwrap()) {
        // the render names the gate's TMPDIR itself: quoting it back is no leak
        fails.retain(|f| !f.contains("names the check directory's host path"));
    }
    Some(Seen {
        label: t.label.clone(),
        exists: t.exists,
        kind: outcome.kind,
        message: normalise(&outcome.message, &path),
        fails,
    })
}

/// Every target through `mechanism` under `run`; `None` when skipped here.
fn probe_all(mechanism: Mechanism, run: Run) -> Option<Vec<Seen>> {
    let targets = targets();
    let jobs: Vec<Job<Option<Seen>>> =
        targets.iter().map(|t| Box::new(move || probe(mechanism, t, run)) as _).collect();
    parallel(2, jobs).into_iter().collect()
}

/// Sandboxed, every target gives the same verdict and message.
fn indistinguishable(name: &str, mechanism: Mechanism) {
    let Some(seen) = probe_all(mechanism, SANDBOXED) else { return };
    let reference = seen.iter().find(|s| !s.exists).expect("a missing path among the targets");
    let mut fails = vec![];
    for s in &seen {
        for f in &s.fails {
            fails.push(format!("{}: {f}", s.label));
        }
        if s.kind != reference.kind || s.message != reference.message {
            fails.push(format!(
                "{} tells itself from {}: {:?}\n{}\n  versus {:?}\n{}",
                s.label, reference.label, s.kind, s.message, reference.kind, reference.message
            ));
        }
    }
    if std::env::var_os(VERBOSE_VAR).is_some() {
        eprintln!(
            "== path oracle {name}: every path gives {:?}\n{}",
            reference.kind, reference.message
        );
    }
    assert!(fails.is_empty(), "path oracle through {name}:\n  - {}", fails.join("\n  - "));
}

/// The mechanisms, by name.
pub const MECHANISMS: &[(&str, Mechanism)] = &[
    ("acl -f", acl),
    ("errorfile", errorfile),
    ("ca-file", ca_file),
    ("crt", crt),
    ("crt-list", crt_list),
    ("http-request return file", return_file),
    ("lua-load", lua_load),
    ("Lua io.open", io_open),
];

macro_rules! oracle_tests {
    ($($test:ident => $index:expr),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                let (name, mechanism) = MECHANISMS[$index];
                indistinguishable(name, mechanism);
            }
        )*
    };
}

oracle_tests! {
    path_oracle_acl_file => 0,
    path_oracle_errorfile => 1,
    path_oracle_ca_file => 2,
    path_oracle_crt => 3,
    path_oracle_crt_list => 4,
    path_oracle_return_file => 5,
    path_oracle_lua_load => 6,
    path_oracle_lua_io_open => 7,
}

/// Unsandboxed, each mechanism tells some existing path from the missing
/// ones: the oracle is real, so its silence sandboxed means something.
#[test]
fn canary_path_oracles_tell_unsandboxed() {
    if std::env::var(CANARY_VAR).as_deref() != Ok("1") {
        eprintln!("note: canary mode is off; {CANARY_VAR}=1 runs the path oracles unsandboxed");
        return;
    }
    let mut table = vec![];
    let mut stale = vec![];
    for &(name, mechanism) in MECHANISMS {
        let Some(seen) = probe_all(mechanism, UNSANDBOXED) else {
            table.push(format!("{name:26} skipped here"));
            continue;
        };
        let missing: Vec<&Seen> = seen.iter().filter(|s| !s.exists).collect();
        let tells = |s: &Seen| missing.iter().all(|m| m.kind != s.kind || m.message != s.message);
        let telling: Vec<&str> =
            seen.iter().filter(|s| s.exists && tells(s)).map(|s| s.label.as_str()).collect();
        table.push(format!("{name:26} tells {} of {}: {telling:?}", telling.len(), seen.len()));
        if telling.is_empty() {
            stale.push(name);
        }
    }
    eprintln!("path oracles, unsandboxed:\n{}", table.join("\n"));
    assert!(stale.is_empty(), "mechanisms that tell nothing unsandboxed: {stale:?}");
}

#[test]
fn normalise_takes_out_the_path_and_pids() {
    let m = "[ALERT]    (1510) : parsing [haproxy.cfg:9] : failed to open </root> (2) : x";
    assert_eq!(
        normalise(m, "/root"),
        "[ALERT]    (PID) : parsing [haproxy.cfg:9] : failed to open <<PATH>> (PID) : x"
    );
}
