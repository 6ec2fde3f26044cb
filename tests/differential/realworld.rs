//! The real-world corpus: HAProxy configurations written outside the
//! project (production setups, Debian's default, ingress controllers'
//! renders, templates), one directory each: `haproxy.cfg`, the files it
//! reads by relative paths, and `SOURCE` (where it came from; not part of
//! the render, so left out). Read at run time from the shared corpora
//! directory (external.rs), byte for byte; nothing of it is in the
//! repository. A case is named `realworld/<directory>`.

use crate::case::Case;
use crate::external;
use std::path::Path;

/// The corpora directory holding `realworld/`, if there is one.
pub fn locate() -> Result<std::path::PathBuf, String> {
    external::locate("RENDERGATE_CORPORA", "corpora", |d| d.join("realworld").is_dir())
}

/// Every case of `corpora/realworld`, in directory order.
pub fn cases(corpora: &Path) -> Vec<Case> {
    let root = corpora.join("realworld");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.path())
        .collect();
    dirs.sort();
    let cases: Vec<Case> = dirs.iter().map(|dir| case(dir)).collect();
    assert!(!cases.is_empty(), "{}: no case directories", root.display());
    cases
}

fn case(dir: &Path) -> Case {
    let name = dir.file_name().unwrap().to_str().expect("a UTF-8 case name");
    let read = |relative: &str| {
        std::fs::read(dir.join(relative))
            .unwrap_or_else(|e| panic!("{}/{relative}: {e}", dir.display()))
    };
    let mut case = Case::new(format!("realworld/{name}"), read("haproxy.cfg"));
    let source = String::from_utf8_lossy(&read("SOURCE")).trim().to_owned();
    case.source = Some(format!("realworld corpus, from {source}"));
    for relative in external::files_under(dir) {
        if relative != "haproxy.cfg" && relative != "SOURCE" {
            let content = read(&relative);
            case.files.push((relative, content));
        }
    }
    case
}
