//! A render: one `haproxy.cfg` plus its auxiliary files, with the identity
//! the gate gives it (plan id, render id, and a checksum it computes itself).

use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::Arc;

/// The kinds of auxiliary file a render carries. The kind decides where an
/// absolute or bare path lands in the check directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    Map,
    Cert,
    Ca,
    CrtList,
    General,
}

impl FileKind {
    /// The wire name (docs/protocol.md §2).
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Map => "map",
            FileKind::Cert => "cert",
            FileKind::Ca => "ca",
            FileKind::CrtList => "crt-list",
            FileKind::General => "general",
        }
    }

    /// The kind's directory inside the check directory (docs/checking.md, "The check directory").
    pub fn directory(self) -> &'static str {
        match self {
            FileKind::Map => "maps",
            FileKind::Cert | FileKind::Ca => "ssl",
            FileKind::CrtList | FileKind::General => "general",
        }
    }
}

/// One auxiliary file, exactly as the controller named it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RenderFile {
    pub kind: FileKind,
    pub path: String,
    pub content: String,
}

/// The checksum over everything HAProxy reads: `sha256:<hex>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Checksum(String);

impl Checksum {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One render as the gate holds it. Immutable once built: the checksum is
/// computed at construction and always matches the content. The content is
/// shared, so a clone is cheap: a check prepares its directory on a blocking
/// thread from its own clone (docs/checking.md, "The check directory").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Render {
    plan: String,
    id: String,
    correlation: Option<String>,
    content: Arc<Content>,
}

/// What HAProxy reads, and its checksum.
#[derive(Debug, PartialEq, Eq)]
struct Content {
    config: String,
    files: Vec<RenderFile>,
    checksum: Checksum,
}

impl Render {
    pub fn new(
        plan: impl Into<String>,
        id: impl Into<String>,
        config: impl Into<String>,
        files: Vec<RenderFile>,
    ) -> Self {
        let config = config.into();
        let checksum = checksum(&config, &files);
        let content = Arc::new(Content { config, files, checksum });
        Render { plan: plan.into(), id: id.into(), correlation: None, content }
    }

    /// Attaches the controller's correlation id, echoed on the verdict.
    pub fn with_correlation(mut self, correlation: Option<String>) -> Self {
        self.correlation = correlation;
        self
    }

    pub fn plan(&self) -> &str {
        &self.plan
    }
    pub fn id(&self) -> &str {
        &self.id
    }
    pub fn correlation(&self) -> Option<&str> {
        self.correlation.as_deref()
    }
    pub fn config(&self) -> &str {
        &self.content.config
    }
    pub fn files(&self) -> &[RenderFile] {
        &self.content.files
    }
    pub fn checksum(&self) -> &Checksum {
        &self.content.checksum
    }
}

/// Length-prefixed fields, so that no two different renders can frame to the
/// same byte stream (moving bytes between a path and a content, say).
/// File order is part of the content (two paths that land on one file are
/// refused by the checker, so order never changes what HAProxy reads, but
/// hashing it keeps the checksum a plain function of the input).
fn checksum(config: &str, files: &[RenderFile]) -> Checksum {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(b"rendergate-render-v1");
    field(config.as_bytes());
    for f in files {
        field(f.kind.as_str().as_bytes());
        field(f.path.as_bytes());
        field(f.content.as_bytes());
    }
    let digest = h.finalize();
    Checksum(format!("sha256:{}", crate::hex::hex(&digest)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(kind: FileKind, path: &str, content: &str) -> RenderFile {
        RenderFile { kind, path: path.into(), content: content.into() }
    }

    #[test]
    fn checksum_covers_config_kind_path_and_content_but_not_ids() {
        let base = Render::new("p", "r", "global\n", vec![file(FileKind::Map, "a.map", "x y")]);
        let same = Render::new("q", "s", "global\n", vec![file(FileKind::Map, "a.map", "x y")]);
        assert_eq!(base.checksum(), same.checksum());
        assert!(base.checksum().as_str().starts_with("sha256:"));
        assert_eq!(base.checksum().as_str().len(), 7 + 64);
        for other in [
            Render::new("p", "r", "global \n", vec![file(FileKind::Map, "a.map", "x y")]),
            Render::new("p", "r", "global\n", vec![file(FileKind::General, "a.map", "x y")]),
            Render::new("p", "r", "global\n", vec![file(FileKind::Map, "b.map", "x y")]),
            Render::new("p", "r", "global\n", vec![file(FileKind::Map, "a.map", "x z")]),
            Render::new("p", "r", "global\n", vec![file(FileKind::Map, "a.mapx", " y")]),
            Render::new("p", "r", "global\n", vec![]),
        ] {
            assert_ne!(base.checksum(), other.checksum(), "{other:?}");
        }
    }
}
