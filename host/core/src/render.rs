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
    pub const ALL: [FileKind; 5] =
        [FileKind::Map, FileKind::Cert, FileKind::Ca, FileKind::CrtList, FileKind::General];

    /// The kind a wire name names.
    pub fn named(name: &str) -> Option<FileKind> {
        FileKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

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

/// One auxiliary file, exactly as the controller named it. Its content is
/// bytes, whatever their encoding on the wire: an OCSP response is DER, and
/// a map may hold any byte HAProxy reads (docs/protocol.md §2, `encoding`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderFile {
    pub kind: FileKind,
    pub path: String,
    pub content: Vec<u8>,
}

/// What a render read from a directory (`rendergate check DIR`) holds that
/// a render sent as NDJSON cannot: an empty directory (a `crt` directory,
/// `issuers-chain-path`), or a file whose name is not UTF-8. Laid out at
/// its path under the config directory, as HAProxy finds it there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeEntry {
    /// An empty directory: its path's bytes, relative to the config directory.
    Directory(Vec<u8>),
    /// A file: its path's bytes, relative to the config directory, and content.
    File { path: Vec<u8>, content: Vec<u8> },
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

/// What HAProxy reads, and its checksum. The config is bytes too: `check
/// DIR` reads it from disk, where nothing makes it UTF-8.
#[derive(Debug, PartialEq, Eq)]
struct Content {
    config: Vec<u8>,
    files: Vec<RenderFile>,
    tree: Vec<TreeEntry>,
    checksum: Checksum,
}

impl Render {
    pub fn new(
        plan: impl Into<String>,
        id: impl Into<String>,
        config: impl Into<Vec<u8>>,
        files: Vec<RenderFile>,
    ) -> Self {
        Render::with_tree(plan, id, config, files, Vec::new())
    }

    /// A render with entries only a directory can hold ([`TreeEntry`]).
    pub fn with_tree(
        plan: impl Into<String>,
        id: impl Into<String>,
        config: impl Into<Vec<u8>>,
        files: Vec<RenderFile>,
        tree: Vec<TreeEntry>,
    ) -> Self {
        let config = config.into();
        let checksum = checksum(&config, &files, &tree);
        let content = Arc::new(Content { config, files, tree, checksum });
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
    pub fn config(&self) -> &[u8] {
        &self.content.config
    }
    pub fn files(&self) -> &[RenderFile] {
        &self.content.files
    }
    /// What only a directory can hold; empty for a render sent as NDJSON.
    pub fn tree(&self) -> &[TreeEntry] {
        &self.content.tree
    }
    pub fn checksum(&self) -> &Checksum {
        &self.content.checksum
    }
}

/// Length-prefixed fields, so that no two different renders can frame to the
/// same byte stream (moving bytes between a path and a content, say).
/// Over bytes only: a file sent as text or as base64 is one content with
/// one checksum, and a text file's bytes are its UTF-8, as before bytes.
/// File order is part of the content (two paths that land on one file are
/// refused by the checker, so order never changes what HAProxy reads, but
/// hashing it keeps the checksum a plain function of the input). The tree
/// follows the files, and only where there is one: a render without one
/// keeps the checksum it always had.
fn checksum(config: &[u8], files: &[RenderFile], tree: &[TreeEntry]) -> Checksum {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(b"rendergate-render-v1");
    field(config);
    for f in files {
        field(f.kind.as_str().as_bytes());
        field(f.path.as_bytes());
        field(&f.content);
    }
    if !tree.is_empty() {
        field(b"tree");
    }
    for entry in tree {
        match entry {
            TreeEntry::Directory(path) => {
                field(b"directory");
                field(path);
            }
            TreeEntry::File { path, content } => {
                field(b"file");
                field(path);
                field(content);
            }
        }
    }
    let digest = h.finalize();
    Checksum(format!("sha256:{}", crate::hex::hex(&digest)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(kind: FileKind, path: &str, content: impl Into<Vec<u8>>) -> RenderFile {
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

    /// The framing, computed apart from the gate (Python's hashlib over the
    /// same length-prefixed fields): a text render's checksum is what it
    /// was when content was text, so verdicts already kept stay valid.
    #[test]
    fn a_tree_changes_the_checksum_and_none_keeps_it() {
        let files = || vec![file(FileKind::Map, "a.map", "x y")];
        let plain = Render::new("p", "r", "global\n", files());
        assert_eq!(plain, Render::with_tree("p", "r", "global\n", files(), vec![]));
        let dir = |p: &[u8]| TreeEntry::Directory(p.to_vec());
        let trees = [
            vec![dir(b"ssl/crts")],
            vec![dir(b"ssl/crt")],
            vec![TreeEntry::File { path: b"ssl/crts".to_vec(), content: vec![] }],
            vec![TreeEntry::File { path: b"\xff.map".to_vec(), content: b"x".to_vec() }],
        ];
        let mut seen = vec![plain.checksum().clone()];
        for tree in trees {
            let sum = Render::with_tree("p", "r", "global\n", files(), tree).checksum().clone();
            assert!(!seen.contains(&sum), "{sum}");
            seen.push(sum);
        }
    }

    #[test]
    fn checksums_are_pinned_for_text_and_for_bytes() {
        let text = Render::new("p", "r", "global\n", vec![file(FileKind::Map, "a.map", "x y")]);
        assert_eq!(
            text.checksum().as_str(),
            "sha256:86caf884017ddee8c3b89a193b06d45e8dd6fa85bbf329b65c5fa8a03be89d31"
        );
        let bytes = Render::new(
            "p",
            "r",
            &b"global\n# \xff\n"[..],
            vec![file(FileKind::Cert, "ssl/a.ocsp", &b"\x30\x82\x00\xff"[..])],
        );
        assert_eq!(
            bytes.checksum().as_str(),
            "sha256:604782b6e7b266695ba9a3f8f00ce11bdbc523c3aaac5c87019a1b6217d7bd68"
        );
    }

    #[test]
    fn one_content_has_one_checksum_however_it_was_held() {
        let from_text = Render::new("p", "r", "global\n", vec![file(FileKind::Map, "a", "é\n")]);
        let from_bytes = Render::new(
            "p",
            "r",
            b"global\n".to_vec(),
            vec![file(FileKind::Map, "a", vec![0xc3, 0xa9, b'\n'])],
        );
        assert_eq!(from_text.checksum(), from_bytes.checksum());
        // one byte that is not UTF-8 is another content
        let other = Render::new("p", "r", "global\n", vec![file(FileKind::Map, "a", vec![0xff])]);
        assert_ne!(from_text.checksum(), other.checksum());
        assert_eq!(other.files()[0].content, [0xff]);
        let other_config = Render::new("p", "r", &b"global\xff"[..], vec![]);
        assert_eq!(other_config.config(), b"global\xff");
        assert_ne!(other_config.checksum(), Render::new("p", "r", "global\n", vec![]).checksum());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn kind() -> impl Strategy<Value = FileKind> {
            prop_oneof![
                Just(FileKind::Map),
                Just(FileKind::Cert),
                Just(FileKind::Ca),
                Just(FileKind::CrtList),
                Just(FileKind::General),
            ]
        }

        /// A config and files, each content any bytes.
        type Parts = (Vec<u8>, Vec<(FileKind, String, Vec<u8>)>);

        fn render() -> impl Strategy<Value = Parts> {
            let bytes = || proptest::collection::vec(any::<u8>(), 0..24);
            (bytes(), proptest::collection::vec((kind(), "[a-z./]{0,8}", bytes()), 0..4))
        }

        fn checksum_of((config, files): &Parts) -> Checksum {
            let files = files.iter().map(|(k, p, c)| file(*k, p, c.clone())).collect();
            Render::new("p", "r", config.clone(), files).checksum().clone()
        }

        proptest! {
            /// Any bytes: the same render has the same checksum, and two
            /// renders with the same checksum are the same (no collision
            /// among small renders, whose bytes can move between fields).
            #[test]
            fn the_checksum_is_a_function_of_the_bytes_and_tells_them_apart(
                a in render(),
                b in render(),
            ) {
                prop_assert_eq!(checksum_of(&a), checksum_of(&a.clone()));
                prop_assert_eq!(a == b, checksum_of(&a) == checksum_of(&b));
            }

            /// One byte changed anywhere in a content is another checksum.
            #[test]
            fn one_byte_changed_is_another_checksum(
                a in render(),
                at in any::<prop::sample::Index>(),
                flip in 1u8..,
            ) {
                let mut b = a.clone();
                let contents: Vec<&mut Vec<u8>> = std::iter::once(&mut b.0)
                    .chain(b.1.iter_mut().map(|f| &mut f.2))
                    .filter(|c| !c.is_empty())
                    .collect();
                prop_assume!(!contents.is_empty());
                let n = contents.iter().map(|c| c.len()).sum::<usize>();
                let mut i = at.index(n);
                for c in contents {
                    if i < c.len() {
                        c[i] ^= flip;
                        break;
                    }
                    i -= c.len();
                }
                prop_assert_ne!(checksum_of(&a), checksum_of(&b));
            }
        }
    }
}
