//! One case of the corpus: a config and the files next to it (bytes, as a
//! render carries them), and how both sides get their own copy of them.
//!
//! The gate and bare HAProxy each read a fresh directory holding the same
//! files. Only one thing differs: `default-path origin /etc/haproxy` stays
//! as it is for the gate (which shows the render at /etc/haproxy, its config
//! directory, as on a pod), while bare HAProxy's copy names its own
//! directory instead, the place the render would be deployed to; in a case
//! that names its own directory by /etc/haproxy throughout (HAProxy's
//! regression tests' `${testdir}`), every such path does.

use crate::sides::Kind;
use std::path::Path;

pub struct Case {
    /// Unique in the corpus; `gen-0042`, `flood-64KiB-at-end`, `quiet-alone`, …
    pub name: String,
    /// The seed the case was generated from (none for hand-written ones).
    pub seed: Option<u64>,
    /// Where a case written outside the project comes from (a corpus
    /// directory's `SOURCE`, a regression test's file and line).
    pub source: Option<String>,
    pub config: Vec<u8>,
    /// Paths relative to the config's directory, and their contents.
    pub files: Vec<(String, Vec<u8>)>,
    /// Where the gate says something else than bare HAProxy on purpose.
    pub deviation: Option<Deviation>,
    /// The config names its own directory [`ORIGIN`] wherever it names it,
    /// not only in `default-path origin`.
    pub at_origin: bool,
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
    pub fn new(name: impl Into<String>, config: impl Into<Vec<u8>>) -> Case {
        Case {
            name: name.into(),
            seed: None,
            source: None,
            config: config.into(),
            files: Vec::new(),
            deviation: None,
            at_origin: false,
        }
    }

    pub fn deviating(mut self, bare: Kind, gate: Kind, why: &'static str) -> Case {
        self.deviation = Some(Deviation { bare, gate, why });
        self
    }

    pub fn with_file(mut self, path: &str, content: impl Into<Vec<u8>>) -> Case {
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
        let config = if self.at_origin {
            replace(&self.config, ORIGIN.as_bytes(), dir_text.as_bytes())
        } else {
            replace(
                &self.config,
                format!("default-path origin {ORIGIN}").as_bytes(),
                format!("default-path origin {dir_text}").as_bytes(),
            )
        };
        self.write(dir, &config);
    }

    /// The config as text, for reports (hand-written and generated configs
    /// are UTF-8; a corpus's may not be).
    pub fn config_text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.config)
    }

    fn write(&self, dir: &Path, config: &[u8]) {
        std::fs::write(dir.join("haproxy.cfg"), config).unwrap();
        for (path, content) in &self.files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
    }

    /// How to rebuild the case: its seed, or that it is hand-written.
    pub fn origin(&self) -> String {
        match (self.seed, &self.source) {
            (Some(seed), _) => format!("seed {seed:#018x}"),
            (None, Some(source)) => source.clone(),
            (None, None) => "hand-written".to_owned(),
        }
    }
}

/// `haystack` with every `from` replaced by `to`.
fn replace(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}
