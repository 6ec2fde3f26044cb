//! HAProxy's own regression tests as a corpus: the converter from HAProxy's
//! sources tarball (read at run time, external.rs) to cases.
//!
//! The tarball is unpacked with the system `tar` once into a cache under
//! the cargo target directory. Every `reg-tests/**/*.vtc` script's
//! `haproxy NAME -conf {…}` block (and `-conf-OK`, `-conf-BAD`) becomes one
//! case, named `regtests/reg-tests/<script>#<block>/<instance>`: its config
//! with vtest's macros replaced (vtc.rs; the case's directory is named as
//! deployed, /etc/haproxy, case.rs), and the files it names under
//! `${testdir}` (the script's directory) copied into the case at the same
//! relative paths, with their companions (`common.pem` brings
//! `common.pem.ocsp`; a directory, or `${testdir}` alone, brings what it
//! holds). A script's requirements of the haproxy under test
//! (`version_atleast`, `feature(…)`, services, excluded targets) are asked
//! of that haproxy (`haproxy -cc COND`, `haproxy -vv`); the cases of a
//! script whose requirement it does not meet are not run, and counted. The
//! configs under `tests/conf/` are cases too (`regtests/tests/conf/<file>`).
//!
//! This rewrites test input into cases; the gate under test rewrites
//! nothing.

use crate::case::{self, Case};
use crate::external;
use crate::vtc::{self, Requirement};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The sources the regression tests come from: HAProxy 3.0.11, the one
/// upstream tarball CI has (shared/haproxy/README.md says why no newer).
pub const TARBALL: &str = "haproxy-3.0.11.tar.gz";
/// The first port handed to a script's listener or server names.
const FIRST_PORT: u16 = 20000;

/// The directory holding [`TARBALL`], if there is one.
pub fn locate() -> Result<PathBuf, String> {
    external::locate("RENDERGATE_HAPROXY_SOURCES", "haproxy", |d| d.join(TARBALL).is_file())
}

pub struct Regtests {
    pub cases: Vec<Case>,
    /// The cases not run: name, and the requirement `haproxy` does not meet.
    pub not_run: Vec<(String, String)>,
}

impl Regtests {
    /// "N not run (reason: count, …)".
    pub fn not_run_summary(&self) -> String {
        let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, why) in &self.not_run {
            *reasons.entry(why).or_default() += 1;
        }
        let reasons: Vec<String> = reasons.iter().map(|(why, n)| format!("{n}× {why}")).collect();
        format!("{} not run for a requirement unmet ({})", self.not_run.len(), reasons.join(", "))
    }
}

/// Every case of the regression tests in `sources`' tarball for `haproxy`.
pub fn cases(sources: &Path, haproxy: &Path) -> Regtests {
    let root = extract(&sources.join(TARBALL));
    let mut judge = Judge::new(haproxy);
    let mut ports = vtc::Ports::new(FIRST_PORT);
    let mut out = Regtests { cases: Vec::new(), not_run: Vec::new() };
    let mut listings: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let tests = root.join("reg-tests");
    for script_path in external::files_under(&tests).iter().filter(|p| p.ends_with(".vtc")) {
        let path = tests.join(script_path);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let script =
            vtc::parse(&text).unwrap_or_else(|e| panic!("{}: unreadable: {e}", path.display()));
        // The reader misses no block: one per `haproxy … -conf…` line.
        let lines = text
            .lines()
            .filter(|l| l.trim_start().starts_with("haproxy ") && l.contains(" -conf"))
            .count();
        assert_eq!(script.blocks.len(), lines, "{}: blocks read", path.display());
        let unmet = script.requirements.iter().find_map(|r| judge.unmet(r));
        let testdir = path.parent().unwrap().to_owned();
        let listing = listings.entry(testdir.clone()).or_insert_with(|| {
            external::files_under(&testdir).into_iter().filter(|f| !f.ends_with(".vtc")).collect()
        });
        for (index, block) in script.blocks.iter().enumerate() {
            let name = format!("regtests/reg-tests/{script_path}#{}/{}", index + 1, block.instance);
            // Expanded even when not run, so that ports do not depend on the haproxy.
            let expanded = vtc::expand(block, case::ORIGIN, &mut ports);
            if let Some(why) = &unmet {
                out.not_run.push((name, why.clone()));
                continue;
            }
            let mut case = Case::new(name, expanded.config);
            case.at_origin = true;
            case.source = Some(format!(
                "{TARBALL}, reg-tests/{script_path} line {}: haproxy {} {}",
                block.line, block.instance, block.option
            ));
            for file in listing.iter() {
                if expanded.testdir.iter().any(|named| companion(file, named)) {
                    case.files.push((file.clone(), read(&testdir.join(file))));
                }
            }
            out.cases.push(case);
        }
    }

    let conf = root.join("tests/conf");
    if conf.is_dir() {
        let listing = external::files_under(&conf);
        let (configs, others): (Vec<&String>, Vec<&String>) =
            listing.iter().partition(|f| f.ends_with(".cfg"));
        for config in configs {
            let mut case =
                Case::new(format!("regtests/tests/conf/{config}"), read(&conf.join(config)));
            case.source = Some(format!("{TARBALL}, tests/conf/{config}"));
            for other in &others {
                case.files.push((other.to_string(), read(&conf.join(other))));
            }
            out.cases.push(case);
        }
    }
    assert!(!out.cases.is_empty() || !out.not_run.is_empty(), "{}: no cases", root.display());
    out
}

/// Whether HAProxy may read `file` when a config names `named` (both
/// relative to the script's directory): the file itself, what a directory
/// holds (`""` is the script's directory), and a certificate's companions,
/// with the name's extension or without it (`common.pem.ocsp`, `.issuer`,
/// `.rsa`, and `common.key` for `common.crt` under
/// `ssl-load-extra-del-ext`).
fn companion(file: &str, named: &str) -> bool {
    let directory = named.trim_end_matches('/');
    if named.is_empty() || file == named || file.starts_with(&format!("{directory}/")) {
        return true;
    }
    if file.starts_with(&format!("{named}.")) {
        return true;
    }
    let base = named.rsplit_once('/').map_or(named, |(_, base)| base);
    match base.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => {
            file.starts_with(&named[..named.len() - base.len() + stem.len() + 1])
        }
        _ => false,
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The unpacked sources of `tarball` (cached under the target directory,
/// keyed by its name, size and time; unpacked into a temporary directory
/// and renamed, so that concurrent runs never see half of it).
fn extract(tarball: &Path) -> PathBuf {
    let meta = std::fs::metadata(tarball).unwrap_or_else(|e| panic!("{}: {e}", tarball.display()));
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let name = tarball.file_name().unwrap().to_str().unwrap();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("differential-regtests");
    let dir = cache.join(format!("{name}-{}-{modified}", meta.len()));
    if !dir.is_dir() {
        std::fs::create_dir_all(&cache).unwrap();
        let unpacking = tempfile::tempdir_in(&cache).unwrap();
        let out = Command::new("tar")
            .arg("-xzf")
            .arg(tarball)
            .arg("-C")
            .arg(unpacking.path())
            .output()
            .unwrap_or_else(|e| panic!("cannot run tar: {e}"));
        assert!(
            out.status.success(),
            "tar -xzf {}: {}\n{}",
            tarball.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let unpacked = unpacking.keep();
        if std::fs::rename(&unpacked, &dir).is_err() {
            // Another run got there first.
            std::fs::remove_dir_all(&unpacked).unwrap();
        }
    }
    let roots: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("reg-tests").is_dir())
        .collect();
    match roots.as_slice() {
        [root] => root.clone(),
        _ => panic!("{}: want one directory holding reg-tests/, found {roots:?}", dir.display()),
    }
}

/// Answers a script's requirements for the haproxy under test.
struct Judge<'a> {
    haproxy: &'a Path,
    conditions: HashMap<String, bool>,
    /// `haproxy -vv`.
    build: String,
}

impl Judge<'_> {
    fn new(haproxy: &Path) -> Judge<'_> {
        let out = Command::new(haproxy).arg("-vv").env_clear().output().unwrap();
        let build = String::from_utf8_lossy(&out.stdout).into_owned();
        Judge { haproxy, conditions: HashMap::new(), build }
    }

    /// Why `requirement` is not met, if it is not.
    fn unmet(&mut self, requirement: &Requirement) -> Option<String> {
        match requirement {
            Requirement::Condition(condition) => {
                let holds = *self.conditions.entry(condition.clone()).or_insert_with(|| {
                    Command::new(self.haproxy)
                        .args(["-cc", condition])
                        .env_clear()
                        .output()
                        .unwrap()
                        .status
                        .success()
                });
                (!holds).then(|| format!("-cc '{condition}'"))
            }
            Requirement::Services(services) => {
                let listed = self.listed("Available services :");
                let missing: Vec<&String> =
                    services.iter().filter(|s| !listed.contains(s)).collect();
                (!missing.is_empty()).then(|| format!("services {missing:?}"))
            }
            Requirement::ExcludedTargets(targets) => {
                let target = self.listed("TARGET  =").into_iter().next().unwrap_or_default();
                targets.contains(&target).then(|| format!("target {target} excluded"))
            }
            Requirement::Tool(_) => None,
            Requirement::Unknown(what) => Some(format!("unknown requirement {what}")),
        }
    }

    /// The words after `label` on its line of `haproxy -vv`.
    fn listed(&self, label: &str) -> Vec<String> {
        self.build
            .lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .map(|rest| rest.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::companion;

    #[test]
    fn a_named_file_brings_its_companions() {
        for (file, named) in [
            ("common.pem", "common.pem"),
            ("common.pem.ocsp", "common.pem"),
            ("common.key", "common.crt"),
            ("ocsp_update/multicert/a.pem.rsa", "ocsp_update"),
            ("ocsp_update/multicert/a.pem.rsa.issuer", "ocsp_update/multicert/a.pem.rsa"),
            ("errors/400.http", ""),
        ] {
            assert!(companion(file, named), "{file} for {named}");
        }
        for (file, named) in [
            ("ocsp_update_rootca.crt", "ocsp_update"),
            ("commonx.key", "common.crt"),
            ("ca.key", "ocsp_update/ca.crt"),
        ] {
            assert!(!companion(file, named), "{file} for {named}");
        }
    }
}
