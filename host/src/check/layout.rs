//! Where a render's files land in a check directory, and the guarantee that
//! they land nowhere else.
//!
//! [`plan`] resolves and validates every path of a render before a single
//! byte is written: a render with one bad path writes nothing at all.
//! [`Layout::write`] then creates the files through the check directory's
//! handle (a cap-std [`Dir`]: nothing can be reached outside it), each one
//! new, regular and owner-only, never through a symlink. The config it
//! writes is the checked copy ([`super::checked_copy`]).

use crate::render::{FileKind, Render};
use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, OpenOptions, OpenOptionsExt};
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The config's own name in the check directory; no render file may take it.
pub const CONFIG_NAME: &str = "haproxy.cfg";

/// A render path that cannot be laid out. Each variant names the path exactly
/// as the controller sent it (Debug-quoted, so a NUL or newline stays visible).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
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
}

/// One auxiliary file, placed: where it goes (relative to the check
/// directory, only normal components) and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedFile<'a> {
    pub relative: PathBuf,
    pub content: &'a str,
}

/// A render, validated and ready to be written into a check directory.
/// Borrows the render: maps can be large and need not be copied.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    config: &'a str,
    files: Vec<PlacedFile<'a>>,
}

/// Resolves every file of `render` inside the check directory, refusing the
/// whole render at the first path that could escape or collide.
pub fn plan(render: &Render) -> Result<Layout<'_>, LayoutError> {
    let mut files = Vec::with_capacity(render.files().len());
    // resolved components → the path as sent, to name both sides of a clash
    let mut taken: HashMap<Vec<&str>, &str> = HashMap::new();
    let mut resolved_all: Vec<(Vec<&str>, &str)> = Vec::new();
    for file in render.files() {
        let components = resolve(file.kind, &file.path)?;
        if components.first() == Some(&CONFIG_NAME) {
            // `haproxy.cfg` itself, or anything that needs it to be a directory
            return Err(LayoutError::Reserved { path: file.path.clone() });
        }
        if let Some(other) = taken.insert(components.clone(), &file.path) {
            return Err(LayoutError::Duplicate {
                path: other.to_owned(),
                other: file.path.clone(),
                resolved: components.join("/"),
            });
        }
        resolved_all.push((components, &file.path));
    }
    // A file at `a/b` and another at `a/b/c` cannot both exist.
    let mut directories: HashMap<&[&str], &str> = HashMap::new();
    for (components, path) in &resolved_all {
        for end in 1..components.len() {
            directories.entry(&components[..end]).or_insert(path);
        }
    }
    for (components, path) in &resolved_all {
        if let Some(other) = directories.get(components.as_slice()) {
            return Err(LayoutError::Nested { path: (*path).to_owned(), other: (*other).to_owned() });
        }
    }
    for ((components, _), file) in resolved_all.iter().zip(render.files()) {
        files.push(PlacedFile { relative: components.iter().collect(), content: &file.content });
    }
    Ok(Layout { config: render.config(), files })
}

/// The path's place in the check directory, as normal components
/// (docs/behaviour.md, "Files of a render").
fn resolve(kind: FileKind, path: &str) -> Result<Vec<&str>, LayoutError> {
    let err_path = || path.to_owned();
    if path.contains('\0') {
        return Err(LayoutError::NulByte { path: err_path() });
    }
    if path.is_empty() {
        return Err(LayoutError::Empty { path: err_path() });
    }
    // `..` is refused everywhere, even where only the last component is used:
    // a path that tries to climb is a bug or an attack, never a file name.
    if path.split('/').any(|c| c == "..") {
        return Err(LayoutError::Escapes { path: err_path() });
    }
    // A trailing `/` names a directory, not a file.
    let name = path.rsplit('/').next().unwrap_or_default();
    if name.is_empty() || name == "." {
        return Err(LayoutError::Empty { path: err_path() });
    }
    if path.starts_with('/') || !path.contains('/') {
        // absolute or bare: the kind's directory + the file name
        return Ok(vec![kind.directory(), name]);
    }
    // relative with a `/`: the path itself, without `.` or empty components
    Ok(path.split('/').filter(|c| !c.is_empty() && *c != ".").collect())
}

impl<'a> Layout<'a> {
    /// The auxiliary files in render order.
    pub fn files(&self) -> &[PlacedFile<'a>] {
        &self.files
    }

    /// Writes `config` (the checked copy of the render's config, see
    /// [`super::checked_copy`]) as `haproxy.cfg`, and every file, into `dir`,
    /// a fresh, private directory. Files are created exclusively, as regular
    /// files, and never through a symlink, so nothing outside `dir` can be
    /// touched.
    pub fn write(&self, dir: &Dir, config: &str) -> io::Result<()> {
        create_file(dir, CONFIG_NAME.as_ref(), config.as_bytes()).map_err(|e| naming(CONFIG_NAME.as_ref(), e))?;
        let mut made: HashSet<PathBuf> = HashSet::new();
        for file in &self.files {
            let written = file.relative.parent().map_or(Ok(()), |parent| create_dirs(dir, parent, &mut made));
            written
                .and_then(|()| create_file(dir, &file.relative, file.content.as_bytes()))
                .map_err(|e| naming(&file.relative, e))?;
        }
        Ok(())
    }

    /// The render's config, as sent.
    pub fn config(&self) -> &'a str {
        self.config
    }
}

/// Says which file failed, relative to the check directory (never a host path).
fn naming(relative: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", relative.display()))
}

/// Creates each directory of `relative` in `dir` (mode 0700), one level
/// at a time, refusing anything already there that is not a real directory.
fn create_dirs(dir: &Dir, relative: &Path, made: &mut HashSet<PathBuf>) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.mode(0o700);
    let mut so_far = PathBuf::new();
    for component in relative.components() {
        so_far.push(component);
        if made.contains(&so_far) {
            continue;
        }
        match dir.create_dir_with(&so_far, &builder) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // only in a directory someone else wrote into; never follow it
                if !dir.symlink_metadata(&so_far)?.file_type().is_dir() {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{} exists and is not a directory", so_far.display()),
                    ));
                }
            }
            Err(e) => return Err(e),
        }
        made.insert(so_far.clone());
    }
    Ok(())
}

/// `O_EXCL` (never reuse or truncate what is there: the file is a new
/// regular file, never a FIFO or device) + `O_NOFOLLOW` (never write through
/// a symlink), owner-only, resolved beneath `dir` (cap-std).
fn create_file(dir: &Dir, relative: &Path, content: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW);
    let mut file = dir.open_with(relative, &options)?;
    file.write_all(content)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::RenderFile;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn handle(dir: &Path) -> Dir {
        Dir::open_ambient_dir(dir, cap_std::ambient_authority()).unwrap()
    }

    fn render(files: &[(FileKind, &str)]) -> Render {
        let files = files
            .iter()
            .map(|(kind, path)| RenderFile { kind: *kind, path: (*path).into(), content: format!("content of {path}") })
            .collect();
        Render::new("plan", "r1", "global\n", files)
    }

    fn placed(files: &[(FileKind, &str)]) -> Vec<String> {
        let r = render(files);
        plan(&r).unwrap().files().iter().map(|f| f.relative.to_str().unwrap().to_owned()).collect()
    }

    fn refused(files: &[(FileKind, &str)]) -> LayoutError {
        plan(&render(files)).unwrap_err()
    }

    #[test]
    fn absolute_paths_land_in_the_kind_directory() {
        assert_eq!(
            placed(&[
                (FileKind::Map, "/etc/haproxy/maps/a.map"),
                (FileKind::Cert, "/etc/ssl/x.pem"),
                (FileKind::Ca, "/ca.pem"),
                (FileKind::CrtList, "/etc/haproxy/list.txt"),
                (FileKind::General, "/etc/haproxy/errors/503.http"),
            ]),
            ["maps/a.map", "ssl/x.pem", "ssl/ca.pem", "general/list.txt", "general/503.http"]
        );
    }

    #[test]
    fn bare_names_land_in_the_kind_directory() {
        assert_eq!(
            placed(&[(FileKind::Map, "a.map"), (FileKind::Cert, "c.pem"), (FileKind::General, "haproxy.cfg")]),
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
            assert_eq!(refused(&[(FileKind::Map, path)]), LayoutError::Escapes { path: path.into() }, "{path}");
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
        assert!(matches!(refused(&[(FileKind::Map, "a\0.map")]), LayoutError::NulByte { .. }));
        assert!(matches!(refused(&[(FileKind::Map, "/\0/../a")]), LayoutError::NulByte { .. }));
        for path in ["", "/", ".", "./", "maps/", "/etc/haproxy/", "a/.", "/etc/."] {
            assert_eq!(refused(&[(FileKind::Map, path)]), LayoutError::Empty { path: path.into() }, "{path:?}");
        }
    }

    #[test]
    fn the_config_name_is_reserved() {
        for path in ["./haproxy.cfg", "./haproxy.cfg/x", "haproxy.cfg/x", "././haproxy.cfg"] {
            assert_eq!(refused(&[(FileKind::General, path)]), LayoutError::Reserved { path: path.into() }, "{path}");
        }
    }

    #[test]
    fn two_files_on_one_place_are_refused() {
        let err = refused(&[(FileKind::Map, "/a/x.map"), (FileKind::Map, "/b/x.map")]);
        assert_eq!(
            err,
            LayoutError::Duplicate { path: "/a/x.map".into(), other: "/b/x.map".into(), resolved: "maps/x.map".into() }
        );
        // different spellings of one place
        assert!(matches!(
            refused(&[(FileKind::Map, "x.map"), (FileKind::General, "./maps/x.map")]),
            LayoutError::Duplicate { .. }
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
            assert!(matches!(plan(&render(&files)).unwrap_err(), LayoutError::Nested { .. }), "{files:?}");
        }
        let err = refused(&[(FileKind::General, "a/b"), (FileKind::General, "a/b/c")]);
        assert_eq!(err, LayoutError::Nested { path: "a/b".into(), other: "a/b/c".into() });
        // siblings sharing a directory are fine
        assert_eq!(placed(&[(FileKind::General, "a/b"), (FileKind::General, "a/c")]), ["a/b", "a/c"]);
    }

    #[test]
    fn writes_config_and_files_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("check");
        std::fs::create_dir(&dir).unwrap();
        let r = Render::new(
            "p",
            "r",
            "global\n  default-path origin /etc/haproxy\n",
            vec![
                RenderFile { kind: FileKind::Map, path: "/etc/haproxy/maps/a.map".into(), content: "k v\n".into() },
                RenderFile { kind: FileKind::General, path: "deep/er/x.lua".into(), content: "-- lua".into() },
            ],
        );
        let layout = plan(&r).unwrap();
        assert_eq!(layout.config(), "global\n  default-path origin /etc/haproxy\n");
        layout.write(&handle(&dir), "the checked copy\n").unwrap();
        let config = std::fs::read_to_string(dir.join("haproxy.cfg")).unwrap();
        assert_eq!(config, "the checked copy\n");
        assert_eq!(std::fs::read_to_string(dir.join("maps/a.map")).unwrap(), "k v\n");
        assert_eq!(std::fs::read_to_string(dir.join("deep/er/x.lua")).unwrap(), "-- lua");
        for file in ["haproxy.cfg", "maps/a.map", "deep/er/x.lua"] {
            assert_eq!(std::fs::metadata(dir.join(file)).unwrap().permissions().mode() & 0o777, 0o600, "{file}");
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
        let r = Render::new(
            "p",
            "r",
            "global\n",
            vec![RenderFile { kind: FileKind::Map, path: "a.map".into(), content: "x".into() }],
        );
        assert!(plan(&r).unwrap().write(&handle(&dir), "global\n").is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

        let dir2 = tmp.path().join("check2");
        std::fs::create_dir(&dir2).unwrap();
        std::fs::create_dir(dir2.join("maps")).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), dir2.join("maps/a.map")).unwrap();
        let err = plan(&r).unwrap().write(&handle(&dir2), "global\n").unwrap_err();
        assert!(err.to_string().starts_with("maps/a.map: "), "{err}");
        assert!(!outside.join("victim").exists());

        // a relative link climbing out, and one staying inside: neither is followed
        for (n, target) in [(3, "../outside"), (4, "real")] {
            let dir = tmp.path().join(format!("check{n}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::create_dir(dir.join("real")).unwrap();
            std::os::unix::fs::symlink(target, dir.join("maps")).unwrap();
            let err = plan(&r).unwrap().write(&handle(&dir), "global\n").unwrap_err();
            assert!(err.to_string().starts_with("maps/a.map: "), "{err}");
            assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
            assert_eq!(std::fs::read_dir(dir.join("real")).unwrap().count(), 0);
        }

        // a FIFO where a file goes: refused at once, never opened (which would block)
        let dir5 = tmp.path().join("check5");
        std::fs::create_dir_all(dir5.join("maps")).unwrap();
        let fifo = std::ffi::CString::new(dir5.join("maps/a.map").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let err = plan(&r).unwrap().write(&handle(&dir5), "global\n").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
    }
}
