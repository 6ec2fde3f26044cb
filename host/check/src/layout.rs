//! Where a render's files land in a check directory, and the guarantee that
//! they land nowhere else.
//!
//! [`arrange`] resolves and validates every path of a render before a single
//! byte is written: a render with one bad path writes nothing at all.
//! [`Arrangement::write`] then creates the files through the check directory's
//! handle (a cap-std [`Dir`]: nothing can be reached outside it), each one
//! new, regular and owner-only, never through a symlink. The config is
//! written byte for byte as sent: nothing of a render is ever rewritten.

use super::at;
use super::limits::{MAX_PATH_BYTES, MAX_PATH_DEPTH};
use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, OpenOptions, OpenOptionsExt};
use rendergate_core::render::{FileKind, Render, TreeEntry};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The config's own name in the check directory; no render file may take it.
pub const CONFIG_NAME: &str = "haproxy.cfg";

/// A render path that cannot be laid out. Each variant names the path exactly
/// as the controller sent it (Debug-quoted, so a NUL or newline stays
/// visible), cut when it is too long to be shown whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderPathError {
    #[error("render file path {path:?} escapes the check directory")]
    Escapes { path: String },
    #[error("render file path {path:?} contains a NUL byte")]
    NulByte { path: String },
    #[error("render file path {path:?} names no file")]
    Empty { path: String },
    #[error("render file path {path:?} would overwrite the config ({CONFIG_NAME} is reserved)")]
    Reserved { path: String },
    #[error("render file paths {path:?} and {other:?} land on the same file ({resolved})")]
    Duplicate { path: String, other: String, resolved: String },
    #[error("render file path {path:?} is a file, but {other:?} needs it to be a directory")]
    Nested { path: String, other: String },
    #[error(
        "render file path {path:?}… is {bytes} bytes long, more than the {limit} a render path may have"
    )]
    TooLong { path: String, bytes: usize, limit: usize },
    #[error(
        "render file path {path:?} lands {depth} components deep, more than the {limit} a render path may have"
    )]
    TooDeep { path: String, depth: usize, limit: usize },
}

/// One auxiliary file, placed: where it goes (relative to the check
/// directory, only normal components).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedFile {
    pub relative: PathBuf,
}

/// The file arrangement of one check directory: where each of a render's
/// files lands, every path validated, ready to be written. Borrows the
/// render: maps can be large and need not be copied.
#[derive(Debug, Clone)]
pub struct Arrangement<'a> {
    render: &'a Render,
    files: Vec<PlacedFile>,
    /// The check directory as a tree; the root is node 0.
    nodes: Vec<Node<'a>>,
}

/// One name in the check directory: a render file, or a directory that
/// files need.
#[derive(Debug, Clone)]
struct Node<'a> {
    name: &'a str,
    /// A render file lands here; else it is a directory.
    file: bool,
    /// The file (an index into the render's files) that lands here, or the
    /// first file that needed the directory: a clash or a failed write
    /// names it.
    by: usize,
    /// In the order the render first needed them.
    children: Vec<usize>,
}

/// How long and how deep a render path may be.
#[derive(Clone, Copy, Debug)]
struct PathLimits {
    bytes: usize,
    depth: usize,
}

/// Resolves every file of `render` inside the check directory, refusing the
/// whole render at the first path that is too long or too deep, or that
/// could escape or collide.
/// `config_dir` is where the render lies in the check's world (an absolute
/// path under it lands at its place relative to it).
pub fn arrange<'a>(
    render: &'a Render,
    config_dir: &Path,
) -> Result<Arrangement<'a>, RenderPathError> {
    let limits = PathLimits { bytes: MAX_PATH_BYTES, depth: MAX_PATH_DEPTH };
    arrange_within(render, config_dir, limits)
}

/// [`arrange`] in time linear in the render's paths, whatever their limits:
/// each component is looked up once, under its parent, in a tree of the
/// check directory (no path is compared with its prefixes).
fn arrange_within<'a>(
    render: &'a Render,
    config_dir: &Path,
    limits: PathLimits,
) -> Result<Arrangement<'a>, RenderPathError> {
    // "/etc/haproxy/": the prefix of paths that land where they say
    let under = format!("{}/", config_dir.to_string_lossy());
    let sent = render.files();
    let mut files = Vec::with_capacity(sent.len());
    let mut nodes = vec![Node { name: "", file: false, by: 0, children: Vec::new() }];
    // (parent node, name) → node
    let mut index: HashMap<(usize, &str), usize> = HashMap::with_capacity(sent.len() * 2);
    for (at_file, file) in sent.iter().enumerate() {
        let components = resolve(file.kind, &file.path, &under, limits)?;
        if components.first() == Some(&CONFIG_NAME) {
            // `haproxy.cfg` itself, or anything that needs it to be a directory
            return Err(RenderPathError::Reserved { path: file.path.clone() });
        }
        let (name, directories) =
            components.split_last().expect("resolve gives at least one component");
        let mut parent = 0;
        for directory in directories {
            parent = match index.get(&(parent, *directory)) {
                Some(&node) if nodes[node].file => {
                    return Err(RenderPathError::Nested {
                        path: sent[nodes[node].by].path.clone(),
                        other: file.path.clone(),
                    });
                }
                Some(&node) => node,
                None => add(&mut nodes, &mut index, parent, directory, false, at_file),
            };
        }
        if let Some(&node) = index.get(&(parent, *name)) {
            let (earlier, path) = (sent[nodes[node].by].path.clone(), file.path.clone());
            return Err(if nodes[node].file {
                RenderPathError::Duplicate {
                    path: earlier,
                    other: path,
                    resolved: components.join("/"),
                }
            } else {
                RenderPathError::Nested { path, other: earlier }
            });
        }
        add(&mut nodes, &mut index, parent, name, true, at_file);
        files.push(PlacedFile { relative: components.iter().collect() });
    }
    Ok(Arrangement { render, files, nodes })
}

/// Adds the node `name` under `parent`; `file` and `by` as [`Node`]'s.
fn add<'a>(
    nodes: &mut Vec<Node<'a>>,
    index: &mut HashMap<(usize, &'a str), usize>,
    parent: usize,
    name: &'a str,
    file: bool,
    by: usize,
) -> usize {
    let at = nodes.len();
    index.insert((parent, name), at);
    nodes.push(Node { name, file, by, children: Vec::new() });
    nodes[parent].children.push(at);
    at
}

/// The path's place in the check directory, as normal components
/// (docs/checking.md, "The check directory").
fn resolve<'p>(
    kind: FileKind,
    path: &'p str,
    config_dir: &str,
    limits: PathLimits,
) -> Result<Vec<&'p str>, RenderPathError> {
    let err_path = || path.to_owned();
    // First, so that nothing else reads a path of any length.
    if path.len() > limits.bytes {
        return Err(RenderPathError::TooLong {
            // the head of a path too long to show whole
            path: path[..crate::verdict::char_floor(path, 64)].to_owned(),
            bytes: path.len(),
            limit: limits.bytes,
        });
    }
    if path.contains('\0') {
        return Err(RenderPathError::NulByte { path: err_path() });
    }
    // `..` is refused everywhere, even where only the last component is used:
    // a path that tries to climb is a bug or an attack, never a file name.
    if path.split('/').any(|c| c == "..") {
        return Err(RenderPathError::Escapes { path: err_path() });
    }
    // A trailing `/` names a directory, not a file.
    let name = path.rsplit('/').next().unwrap_or_default();
    if name.is_empty() || name == "." {
        return Err(RenderPathError::Empty { path: err_path() });
    }
    // absolute under the config directory: its place there, as on a pod
    let relative = path.strip_prefix(config_dir);
    if relative.is_none() && (path.starts_with('/') || !path.contains('/')) {
        // absolute elsewhere, or bare: the kind's directory + the file name
        return Ok(vec![kind.directory(), name]);
    }
    // relative with a `/`: the path itself, without `.` or empty components
    let components: Vec<&str> =
        relative.unwrap_or(path).split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    if components.len() > limits.depth {
        return Err(RenderPathError::TooDeep {
            path: err_path(),
            depth: components.len(),
            limit: limits.depth,
        });
    }
    Ok(components)
}

/// Bytes written to a file between two looks at whether to go on, so that
/// one large file (or a slow disk) cannot hold a check past its deadline.
const WRITE_CHUNK: usize = 1 << 20;

impl<'a> Arrangement<'a> {
    /// The auxiliary files in render order.
    pub fn files(&self) -> &[PlacedFile] {
        &self.files
    }

    /// Writes the render's config as `haproxy.cfg`, byte for byte as sent,
    /// and every file, into `dir`,
    /// a fresh, private directory. Files are created exclusively, as regular
    /// files, and never through a symlink, so nothing outside `dir` can be
    /// touched. Each directory is made once and entered by its handle, so
    /// the work is linear in the render.
    ///
    /// `go_on` is asked, with the number of files written so far, before
    /// every file, directory and chunk of a file; when it says no, writing
    /// stops with [`io::ErrorKind::Interrupted`] (the caller knows why).
    pub fn write(&self, dir: &Dir, go_on: &mut dyn FnMut(usize) -> bool) -> io::Result<()> {
        let mut written = 0;
        fill_config(dir, self.render.config(), &mut || go_on(written))
            .map_err(|e| naming(CONFIG_NAME.as_ref(), e))?;
        // Depth first; a stack of open directories, at most as deep as a path.
        let mut stack: Vec<(Option<Dir>, std::slice::Iter<'_, usize>)> =
            vec![(None, self.nodes[0].children.iter())];
        while let Some((handle, children)) = stack.last_mut() {
            let Some(&at) = children.next() else {
                stack.pop();
                continue;
            };
            let here = handle.as_ref().unwrap_or(dir);
            let node = &self.nodes[at];
            stop_unless(go_on(written))?;
            let named = |e| naming(&self.files[node.by].relative, e);
            if node.file {
                let content = &self.render.files()[node.by].content;
                create_file(here, node.name.as_ref(), content, &mut || go_on(written))
                    .map_err(named)?;
                written += 1;
            } else {
                let entered = create_dir(here, node.name.as_ref()).map_err(named)?;
                stack.push((Some(entered), node.children.iter()));
            }
        }
        // what only a directory holds (its tree), after the files
        for entry in self.render.tree() {
            stop_unless(go_on(written))?;
            write_tree_entry(dir, entry, &mut || go_on(written))?;
            written += 1;
        }
        Ok(())
    }
}

/// Stops writing, with [`io::ErrorKind::Interrupted`], when `go_on` said no.
fn stop_unless(go_on: bool) -> io::Result<()> {
    if go_on {
        return Ok(());
    }
    Err(io::Error::new(io::ErrorKind::Interrupted, "writing the check directory was stopped"))
}

/// One entry of a render's tree ([`TreeEntry`], from `check DIR`): its
/// directories made (or entered) one by one by handle, never through a
/// symlink, then the empty directory or the new file. Its path is a
/// directory walk's (names of one component each, none `.` or `..`).
fn write_tree_entry(
    dir: &Dir,
    entry: &TreeEntry,
    go_on: &mut dyn FnMut() -> bool,
) -> io::Result<()> {
    let (TreeEntry::Directory(path) | TreeEntry::File { path, .. }) = entry;
    let relative = Path::new(OsStr::from_bytes(path));
    let named = |e| naming(relative, e);
    let plain = relative.components().all(|c| matches!(c, std::path::Component::Normal(_)));
    if !plain || relative.as_os_str().is_empty() {
        return Err(named(io::Error::new(io::ErrorKind::InvalidInput, "not a plain path")));
    }
    let mut names = relative.iter();
    // a file's own name is its last part; a directory's every part is a directory
    let file = match entry {
        TreeEntry::File { content, .. } => names.next_back().map(|name| (name, content)),
        TreeEntry::Directory(_) => None,
    };
    let mut here: Option<Dir> = None;
    for name in names {
        here = Some(create_dir(here.as_ref().unwrap_or(dir), name).map_err(named)?);
    }
    let Some((name, content)) = file else { return Ok(()) };
    create_file(here.as_ref().unwrap_or(dir), name, content, go_on).map_err(named)
}

/// Says which file failed, relative to the check directory (never a host path).
fn naming(relative: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", relative.display()))
}

/// Creates the directory `name` in `parent` (mode 0700) and enters it by
/// handle, refusing anything already there that is not a real directory.
fn create_dir(parent: &Dir, name: &OsStr) -> io::Result<Dir> {
    let mut builder = DirBuilder::new();
    builder.mode(0o700);
    match parent.create_dir_with(name, &builder) {
        Ok(()) => {}
        // only in a directory someone else wrote into; never followed (below)
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    at::open_dir(parent, name).map_err(|e| {
        if at::is_symlink_refusal(&e) || e.raw_os_error() == Some(libc::ENOTDIR) {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a directory", name.to_string_lossy()),
            )
        } else {
            e
        }
    })
}

/// Makes `haproxy.cfg` in a check directory made ahead, empty, before its
/// render comes: creating a file is the dearest part of writing a small one
/// (0.2–0.4 ms on an ext4 `/tmp`, against 8 µs to fill it; BENCHMARKS.md).
pub fn make_config(dir: &Dir) -> io::Result<()> {
    dir.open_with(CONFIG_NAME, &new_file()).map(drop)
}

/// Writes the config into the empty `haproxy.cfg` made ahead
/// ([`make_config`]), or into a new one; anything else there is refused.
fn fill_config(dir: &Dir, content: &[u8], go_on: &mut dyn FnMut() -> bool) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).custom_flags(libc::O_NOFOLLOW);
    let file = match dir.open_with(CONFIG_NAME, &options) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return create_file(dir, CONFIG_NAME.as_ref(), content, go_on);
        }
        other => other?,
    };
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() != 0 {
        return Err(io::Error::new(io::ErrorKind::AlreadyExists, "not the empty file made for it"));
    }
    write_chunks(file, content, go_on)
}

/// `O_EXCL` (never reuse or truncate what is there: the file is a new
/// regular file, never a FIFO or device) + `O_NOFOLLOW` (never write through
/// a symlink), owner-only, one name in `dir`. Written a chunk at a time,
/// asking `go_on` before each.
fn create_file(
    dir: &Dir,
    name: &OsStr,
    content: &[u8],
    go_on: &mut dyn FnMut() -> bool,
) -> io::Result<()> {
    write_chunks(dir.open_with(name, &new_file())?, content, go_on)
}

/// How every file of a check directory is opened: a new one (`O_EXCL`),
/// never through a symlink, owner-only.
pub(crate) fn new_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW);
    options
}

/// `content` into `file` a chunk at a time, asking `go_on` before each.
fn write_chunks(
    mut file: cap_std::fs::File,
    content: &[u8],
    go_on: &mut dyn FnMut() -> bool,
) -> io::Result<()> {
    for chunk in content.chunks(WRITE_CHUNK) {
        stop_unless(go_on())?;
        file.write_all(chunk)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rendergate_core::render::RenderFile;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    const CONFIG_DIR: &str = "/etc/haproxy";

    fn handle(dir: &Path) -> Dir {
        Dir::open_ambient_dir(dir, cap_std::ambient_authority()).unwrap()
    }

    fn file(kind: FileKind, path: &str, content: impl Into<Vec<u8>>) -> RenderFile {
        RenderFile { kind, path: path.into(), content: content.into() }
    }

    fn render(files: &[(FileKind, &str)]) -> Render {
        let files =
            files.iter().map(|&(kind, path)| file(kind, path, format!("content of {path}")));
        Render::new("plan", "r1", "global\n", files.collect::<Vec<_>>())
    }

    fn placed(files: &[(FileKind, &str)]) -> Vec<String> {
        let r = render(files);
        arrange(&r, Path::new(CONFIG_DIR))
            .unwrap()
            .files()
            .iter()
            .map(|f| f.relative.to_str().unwrap().to_owned())
            .collect()
    }

    fn refused(files: &[(FileKind, &str)]) -> RenderPathError {
        arrange(&render(files), Path::new(CONFIG_DIR)).unwrap_err()
    }

    /// Arranges `r` and writes it into `dir`, going on while `go_on` says so.
    fn write(r: &Render, dir: &Path, go_on: &mut dyn FnMut(usize) -> bool) -> io::Result<()> {
        arrange(r, Path::new(CONFIG_DIR)).unwrap().write(&handle(dir), go_on)
    }

    #[test]
    fn absolute_paths_land_at_their_place_under_the_config_dir_else_in_the_kind_directory() {
        assert_eq!(
            placed(&[
                (FileKind::Map, "/etc/haproxy/maps/a.map"),
                (FileKind::Cert, "/etc/ssl/x.pem"),
                (FileKind::Ca, "/ca.pem"),
                (FileKind::CrtList, "/etc/haproxy/list.txt"),
                (FileKind::General, "/etc/haproxy/errors/503.http"),
                (FileKind::General, "/etc/haproxyx/y.http"),
            ]),
            [
                "maps/a.map",
                "ssl/x.pem",
                "ssl/ca.pem",
                "list.txt",
                "errors/503.http",
                "general/y.http"
            ]
        );
    }

    #[test]
    fn bare_names_land_in_the_kind_directory() {
        assert_eq!(
            placed(&[
                (FileKind::Map, "a.map"),
                (FileKind::Cert, "c.pem"),
                (FileKind::General, "haproxy.cfg")
            ]),
            ["maps/a.map", "ssl/c.pem", "general/haproxy.cfg"]
        );
    }

    #[test]
    fn relative_paths_with_a_slash_land_at_that_path() {
        assert_eq!(
            placed(&[
                (FileKind::Map, "maps/a.map"),
                (FileKind::General, "./x.lua"),
                (FileKind::Cert, "certs//./deep/c.pem"),
                (FileKind::Map, "other/a.map"),
            ]),
            ["maps/a.map", "x.lua", "certs/deep/c.pem", "other/a.map"]
        );
    }

    #[test]
    fn climbing_is_refused_in_every_form() {
        for path in ["../x", "../../x", "maps/../../x", "/etc/../x.map", "..", "a/..", "./.."] {
            assert_eq!(
                refused(&[(FileKind::Map, path)]),
                RenderPathError::Escapes { path: path.into() },
                "{path}"
            );
        }
    }

    #[test]
    fn the_error_names_the_path_as_sent() {
        assert_eq!(
            refused(&[(FileKind::Map, "../x")]).to_string(),
            r#"render file path "../x" escapes the check directory"#
        );
        let nul = refused(&[(FileKind::Map, "a\0b")]).to_string();
        assert!(nul.contains(r#""a\0b""#), "{nul}");
    }

    #[test]
    fn nul_bytes_and_empty_names_are_refused() {
        assert!(matches!(refused(&[(FileKind::Map, "a\0.map")]), RenderPathError::NulByte { .. }));
        assert!(matches!(refused(&[(FileKind::Map, "/\0/../a")]), RenderPathError::NulByte { .. }));
        for path in ["", "/", ".", "./", "maps/", "/etc/haproxy/", "a/.", "/etc/."] {
            assert_eq!(
                refused(&[(FileKind::Map, path)]),
                RenderPathError::Empty { path: path.into() },
                "{path:?}"
            );
        }
    }

    #[test]
    fn the_config_name_is_reserved() {
        for path in ["./haproxy.cfg", "./haproxy.cfg/x", "haproxy.cfg/x", "././haproxy.cfg"] {
            assert_eq!(
                refused(&[(FileKind::General, path)]),
                RenderPathError::Reserved { path: path.into() },
                "{path}"
            );
        }
    }

    #[test]
    fn two_files_on_one_place_are_refused() {
        let err = refused(&[(FileKind::Map, "/a/x.map"), (FileKind::Map, "/b/x.map")]);
        assert_eq!(
            err,
            RenderPathError::Duplicate {
                path: "/a/x.map".into(),
                other: "/b/x.map".into(),
                resolved: "maps/x.map".into()
            }
        );
        // different spellings of one place
        assert!(matches!(
            refused(&[(FileKind::Map, "x.map"), (FileKind::General, "./maps/x.map")]),
            RenderPathError::Duplicate { .. }
        ));
        // same name, different kind directories: fine
        assert_eq!(
            placed(&[(FileKind::Map, "x"), (FileKind::Cert, "x"), (FileKind::General, "x")]),
            ["maps/x", "ssl/x", "general/x"]
        );
    }

    #[test]
    fn a_file_cannot_be_another_files_directory() {
        for files in [
            [(FileKind::General, "a/b"), (FileKind::General, "a/b/c")],
            [(FileKind::General, "a/b/c"), (FileKind::General, "a/b")],
            [(FileKind::General, "./maps"), (FileKind::Map, "x.map")],
        ] {
            assert!(matches!(refused(&files), RenderPathError::Nested { .. }), "{files:?}");
        }
        let err = refused(&[(FileKind::General, "a/b"), (FileKind::General, "a/b/c")]);
        assert_eq!(err, RenderPathError::Nested { path: "a/b".into(), other: "a/b/c".into() });
        // siblings sharing a directory are fine
        assert_eq!(
            placed(&[(FileKind::General, "a/b"), (FileKind::General, "a/c")]),
            ["a/b", "a/c"]
        );
    }

    #[test]
    fn paths_too_long_or_too_deep_are_refused_by_the_limit() {
        let long = format!("maps/{}", "x".repeat(MAX_PATH_BYTES));
        let err = refused(&[(FileKind::Map, long.as_str())]);
        assert_eq!(
            err,
            RenderPathError::TooLong {
                path: long[..64].to_owned(),
                bytes: MAX_PATH_BYTES + 5,
                limit: MAX_PATH_BYTES
            }
        );
        assert!(
            err.to_string()
                .ends_with("is 1029 bytes long, more than the 1024 a render path may have"),
            "{err}"
        );
        let deep = vec!["d"; MAX_PATH_DEPTH].join("/");
        assert_eq!(placed(&[(FileKind::General, deep.as_str())]), std::slice::from_ref(&deep));
        let deeper = format!("{deep}/x");
        assert_eq!(
            refused(&[(FileKind::General, deeper.as_str())]),
            RenderPathError::TooDeep {
                path: deeper.clone(),
                depth: MAX_PATH_DEPTH + 1,
                limit: MAX_PATH_DEPTH
            }
        );
        // `.` and empty components do not count; an absolute path lands two deep
        let dotted = format!("{}/x", vec!["."; 200].join("/"));
        assert_eq!(placed(&[(FileKind::General, dotted.as_str())]), ["x"]);
        assert_eq!(
            placed(&[(
                FileKind::Map,
                "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/0/1/2/3/4/5/6/x"
            )]),
            ["maps/x"]
        );
    }

    #[test]
    fn arranging_is_linear_in_the_paths_however_deep() {
        // One path of 120,000 components, and 2,000 files under one long
        // directory: comparing every path with its prefixes took minutes.
        // Without the path limits, arranging must still take milliseconds
        // (the bound is generous: a quadratic arrangement misses it by far).
        let unlimited = PathLimits { bytes: usize::MAX, depth: usize::MAX };
        let deep = format!("{}/x", vec!["a"; 120_000].join("/"));
        let shared = vec!["s"; 100].join("/");
        let mut files = vec![file(FileKind::General, &deep, "")];
        files.extend((0..2_000).map(|n| file(FileKind::General, &format!("{shared}/f{n}"), "")));
        let r = Render::new("p", "r", "global\n", files);
        let started = std::time::Instant::now();
        let arrangement = arrange_within(&r, Path::new(CONFIG_DIR), unlimited).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        // one node per distinct component: 120,000 + 1, 100, 2,000, and the root
        assert_eq!(arrangement.nodes.len(), 120_001 + 100 + 2_000 + 1);
        // and a clash deep down is still found
        let clash = file(FileKind::General, &format!("{shared}/f7/under"), "");
        let r = Render::new("p", "r", "global\n", [r.files(), &[clash]].concat());
        assert!(matches!(
            arrange_within(&r, Path::new(CONFIG_DIR), unlimited).unwrap_err(),
            RenderPathError::Nested { .. }
        ));
    }

    #[test]
    fn writing_stops_when_told_and_says_how_far_it_got() {
        let tmp = tempfile::tempdir().unwrap();
        let files: Vec<(FileKind, String)> =
            (0..10).map(|n| (FileKind::General, format!("d{}/f{n}", n % 3))).collect();
        let files: Vec<(FileKind, &str)> = files.iter().map(|(k, p)| (*k, p.as_str())).collect();
        let r = render(&files);
        let mut asked = Vec::new();
        let err = write(&r, tmp.path(), &mut |written| {
            asked.push(written);
            written < 4
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Interrupted, "{err}");
        assert_eq!(asked.last(), Some(&4));
        assert_eq!(walkdir_files(tmp.path()), 1 + 4, "the config and four files");
        // a large file is written a chunk at a time, asking between chunks
        let big = vec![file(FileKind::Map, "big", "x".repeat(3 * WRITE_CHUNK))];
        let r = Render::new("p", "r", "", big);
        let tmp = tempfile::tempdir().unwrap();
        let mut asked = 0;
        let err = write(&r, tmp.path(), &mut |_| {
            asked += 1;
            asked < 4
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Interrupted, "{err}");
        assert_eq!(
            std::fs::metadata(tmp.path().join("maps/big")).unwrap().len(),
            WRITE_CHUNK as u64
        );
    }

    fn walkdir_files(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| if p.is_dir() { walkdir_files(&p) } else { 1 })
            .sum()
    }

    #[test]
    fn writes_config_and_files_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("check");
        std::fs::create_dir(&dir).unwrap();
        let a_map = file(FileKind::Map, "/etc/haproxy/maps/a.map", "k v\n");
        let files = vec![a_map, file(FileKind::General, "deep/er/x.lua", "-- lua")];
        let r = Render::new("p", "r", "global\n  default-path origin /etc/haproxy\n", files);
        let arrangement = arrange(&r, Path::new(CONFIG_DIR)).unwrap();
        assert_eq!(arrangement.render.config(), b"global\n  default-path origin /etc/haproxy\n");
        arrangement.write(&handle(&dir), &mut |_| true).unwrap();
        // the config as sent, byte for byte
        let config = std::fs::read_to_string(dir.join("haproxy.cfg")).unwrap();
        assert_eq!(config, "global\n  default-path origin /etc/haproxy\n");
        assert_eq!(std::fs::read_to_string(dir.join("maps/a.map")).unwrap(), "k v\n");
        assert_eq!(std::fs::read_to_string(dir.join("deep/er/x.lua")).unwrap(), "-- lua");
        for file in ["haproxy.cfg", "maps/a.map", "deep/er/x.lua"] {
            assert_eq!(
                std::fs::metadata(dir.join(file)).unwrap().permissions().mode() & 0o777,
                0o600,
                "{file}"
            );
        }
        for d in ["maps", "deep", "deep/er"] {
            assert_eq!(std::fs::metadata(dir.join(d)).unwrap().mode() & 0o777, 0o700, "{d}");
        }
    }

    #[test]
    fn never_writes_through_a_symlink_or_over_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("check");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(&outside).unwrap();
        // a planted symlink, as a directory and as a file
        std::os::unix::fs::symlink(&outside, dir.join("maps")).unwrap();
        let r = Render::new("p", "r", "global\n", vec![file(FileKind::Map, "a.map", "x")]);
        assert!(write(&r, &dir, &mut |_| true).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

        let dir2 = tmp.path().join("check2");
        std::fs::create_dir(&dir2).unwrap();
        std::fs::create_dir(dir2.join("maps")).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), dir2.join("maps/a.map")).unwrap();
        let err = write(&r, &dir2, &mut |_| true).unwrap_err();
        assert!(err.to_string().starts_with("maps/a.map: "), "{err}");
        assert!(!outside.join("victim").exists());

        // a relative link climbing out, and one staying inside: neither is followed
        for (n, target) in [(3, "../outside"), (4, "real")] {
            let dir = tmp.path().join(format!("check{n}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::create_dir(dir.join("real")).unwrap();
            std::os::unix::fs::symlink(target, dir.join("maps")).unwrap();
            let err = write(&r, &dir, &mut |_| true).unwrap_err();
            assert!(err.to_string().starts_with("maps/a.map: "), "{err}");
            assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
            assert_eq!(std::fs::read_dir(dir.join("real")).unwrap().count(), 0);
        }

        // a FIFO where a file goes: refused at once, never opened (which would block)
        let dir5 = tmp.path().join("check5");
        std::fs::create_dir_all(dir5.join("maps")).unwrap();
        let (fifo, mode) = (dir5.join("maps/a.map"), rustix::fs::Mode::from_raw_mode(0o600));
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, mode, 0).unwrap();
        let err = write(&r, &dir5, &mut |_| true).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
    }
}
