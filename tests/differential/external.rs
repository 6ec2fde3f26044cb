//! Where the corpora written outside the project are found, and what a
//! missing one means. They are read at run time and never copied into the
//! repository: the real-world corpus (`RENDERGATE_CORPORA`, a directory
//! holding `realworld/`) and HAProxy's sources (`RENDERGATE_HAPROXY_SOURCES`,
//! a directory holding the tarball the regression tests come from). Each is
//! looked for in its env var (`.ci/run` sets both), else in `shared/` in the
//! directory holding the checkout, else `/work/shared/…`. Missing fails in CI
//! (`CI` set, tests/needs.rs); elsewhere the skip is said on the terminal
//! even when the test's output is captured.

use crate::needs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The first of `$env`, `shared/<shared>` beside the checkout and
/// `/work/shared/<shared>` for which `holds` is true, or every place looked
/// at.
pub fn locate(env: &str, shared: &str, holds: impl Fn(&Path) -> bool) -> Result<PathBuf, String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("host/ has a parent");
    let beside = workspace.parent().unwrap_or(workspace).join("shared");
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os(env).filter(|d| !d.is_empty()) {
        candidates.push(dir.into());
    }
    candidates.push(beside.join(shared));
    candidates.push(Path::new("/work/shared").join(shared));
    candidates.iter().find(|dir| holds(dir)).cloned().ok_or_else(|| {
        let looked: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
        format!("not found in {} (set {env})", looked.join(", "))
    })
}

/// `what` is missing, so `skipped` cannot run: a failure in CI; elsewhere
/// a skip, said on the terminal itself (libtest captures `eprintln!`, not
/// writes to the stderr handle).
pub fn absent(what: &str, skipped: &str) {
    needs::missing(what, skipped);
    let _ = writeln!(
        std::io::stderr(),
        "\n*** differential test: {what}; {skipped} SKIPPED (in CI this fails) ***\n"
    );
}

/// Every regular file under `dir`, as paths relative to it, sorted. A
/// symbolic link to a regular file counts as one (HAProxy's reg-tests link
/// `checks/common.pem` to `../ssl/common.pem`); other links, to
/// directories or nowhere, and special files are left out.
pub fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let entry = entry.unwrap();
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            let to_file = kind.is_symlink() && path.metadata().is_ok_and(|m| m.is_file());
            if kind.is_dir() {
                walk(root, &path, out);
            } else if kind.is_file() || to_file {
                let relative = path.strip_prefix(root).unwrap();
                let relative = relative
                    .to_str()
                    .unwrap_or_else(|| panic!("{}: not a UTF-8 path", path.display()));
                out.push(relative.to_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
