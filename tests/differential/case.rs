//! One case of the corpus: a config and the files next to it, and how both
//! sides get their own copy of them.
//!
//! The gate and bare HAProxy each read a fresh directory holding the same
//! files. Only one thing differs: `default-path origin /etc/haproxy` stays
//! as it is for the gate (which points it at its check directory, the
//! stand-in for /etc/haproxy), while bare HAProxy's copy names its own
//! directory instead, the place the render would be deployed to.

use crate::sides::Kind;
use std::path::Path;

pub struct Case {
    /// Unique in the corpus; `gen-0042`, `flood-64KiB-at-end`, `quiet-alone`, …
    pub name: String,
    /// The seed the case was generated from (none for hand-written ones).
    pub seed: Option<u64>,
    pub config: String,
    /// Paths relative to the config's directory, and their contents.
    pub files: Vec<(String, String)>,
    /// Where the gate says something else than bare HAProxy on purpose.
    pub deviation: Option<Deviation>,
}

/// A documented difference (docs/checking.md says why): besides agreeing,
/// the case passes only when both sides say exactly these kinds, so any other
/// difference still shows. (On some versions HAProxy prints a line first, and
/// the two sides agree.)
#[derive(Clone, Copy, Debug)]
pub struct Deviation {
    pub bare: Kind,
    pub gate: Kind,
    pub why: &'static str,
}

/// The origin a render names for where it is deployed.
pub const ORIGIN: &str = "/etc/haproxy";

impl Case {
    pub fn new(name: impl Into<String>, config: impl Into<String>) -> Case {
        Case {
            name: name.into(),
            seed: None,
            config: config.into(),
            files: Vec::new(),
            deviation: None,
        }
    }

    pub fn deviating(mut self, bare: Kind, gate: Kind, why: &'static str) -> Case {
        self.deviation = Some(Deviation { bare, gate, why });
        self
    }

    pub fn with_file(mut self, path: &str, content: impl Into<String>) -> Case {
        self.files.push((path.to_owned(), content.into()));
        self
    }

    /// Writes the case into `dir` as the gate reads it.
    pub fn write_for_gate(&self, dir: &Path) {
        self.write(dir, &self.config);
    }

    /// Writes the case into `dir` (an absolute path) as bare HAProxy reads
    /// it: the same files, `default-path origin` pointed at `dir`.
    pub fn write_for_bare(&self, dir: &Path) {
        let dir_text = dir.to_str().expect("a UTF-8 temporary directory");
        assert!(
            dir_text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)),
            "{dir_text}"
        );
        let config = self.config.replace(
            &format!("default-path origin {ORIGIN}"),
            &format!("default-path origin {dir_text}"),
        );
        self.write(dir, &config);
    }

    fn write(&self, dir: &Path, config: &str) {
        std::fs::write(dir.join("haproxy.cfg"), config).unwrap();
        for (path, content) in &self.files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
    }

    /// How to rebuild the case: its seed, or that it is hand-written.
    pub fn origin(&self) -> String {
        match self.seed {
            Some(seed) => format!("seed {seed:#018x}"),
            None => "hand-written".to_owned(),
        }
    }
}
