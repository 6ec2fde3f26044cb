//! A directory on disk as a render, for `rendergate check DIR`.
//!
//! `DIR/haproxy.cfg` is the config; every other regular file becomes a
//! general file at the same relative path (`./maps/a.map` lands at
//! `maps/a.map` in the check directory). Nothing is followed: a symlink or
//! special file anywhere in DIR is refused, never read.

use crate::render::{FileKind, Render, RenderFile};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Why DIR cannot be read as a render. Every variant names the entry.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{}: no haproxy.cfg in this directory", dir.display())]
    NoConfig { dir: PathBuf },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: symlinks are refused", path.display())]
    Symlink { path: PathBuf },
    #[error("{}: special files (FIFO, socket, device) are refused", path.display())]
    Special { path: PathBuf },
    #[error("{}: not a regular file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{}: the file name is not UTF-8", path.display())]
    NameNotUtf8 { path: PathBuf },
    #[error("{}: the content is not UTF-8 text", path.display())]
    ContentNotUtf8 { path: PathBuf },
}

/// Reads `dir` as one render with the given plan and render ids.
pub fn load(dir: &Path, plan: &str, render_id: &str) -> Result<Render, DirError> {
    // DIR itself was named by the user and may be a symlink; nothing inside it may.
    let config_path = dir.join(super::layout::CONFIG_NAME);
    let config = match fs::symlink_metadata(&config_path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(DirError::NoConfig { dir: dir.to_path_buf() });
        }
        Err(source) => return Err(DirError::Io { path: config_path, source }),
        Ok(meta) if meta.is_dir() => return Err(DirError::NotAFile { path: config_path }),
        Ok(meta) => read_text(&config_path, meta.file_type())?,
    };
    let mut files = Vec::new();
    walk(dir, Path::new(""), &mut files)?;
    Ok(Render::new(plan, render_id, config, files))
}

/// Adds every regular file under `base/relative` (except the top-level
/// config), in byte order of names so the same tree always gives the same
/// render and checksum.
fn walk(base: &Path, relative: &Path, files: &mut Vec<RenderFile>) -> Result<(), DirError> {
    let here = base.join(relative);
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DirError::Io { path, source }
    };
    let mut entries = fs::read_dir(&here)
        .map_err(io_err(&here))?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_err(&here))?;
    entries.sort();
    for name in entries {
        let rel = relative.join(&name);
        let full = base.join(&rel);
        let meta = fs::symlink_metadata(&full).map_err(io_err(&full))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            walk(base, &rel, files)?;
            continue;
        }
        if rel.as_os_str() == super::layout::CONFIG_NAME {
            continue;
        }
        let content = read_text(&full, kind)?;
        let Some(rel_text) = rel.to_str() else {
            return Err(DirError::NameNotUtf8 { path: full });
        };
        files.push(RenderFile { kind: FileKind::General, path: format!("./{rel_text}"), content });
    }
    Ok(())
}

/// Reads a regular file as text; refuses symlinks and special files by
/// their own type, before anything is opened.
fn read_text(path: &Path, kind: fs::FileType) -> Result<String, DirError> {
    if kind.is_symlink() {
        return Err(DirError::Symlink { path: path.to_path_buf() });
    }
    if !kind.is_file() {
        return Err(DirError::Special { path: path.to_path_buf() });
    }
    let bytes = read_no_follow(path).map_err(|source| DirError::Io { path: path.to_path_buf(), source })?;
    String::from_utf8(bytes).map_err(|_| DirError::ContentNotUtf8 { path: path.to_path_buf() })
}

/// Opens with `O_NOFOLLOW | O_NONBLOCK`, so a file swapped for a symlink or a
/// FIFO after it was looked at is still not followed nor waited on.
fn read_no_follow(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::layout;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let full = tmp.path().join(path);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(full, content).unwrap();
        }
        tmp
    }

    #[test]
    fn loads_config_and_every_other_file_sorted() {
        let tmp = tree(&[
            ("haproxy.cfg", "global\n"),
            ("x.lua", "-- x"),
            ("maps/b.map", "b"),
            ("maps/a.map", "a"),
            ("sub/haproxy.cfg", "not the config"),
            ("A", "upper"),
        ]);
        let render = load(tmp.path(), "plan-1", "render-1").unwrap();
        assert_eq!(render.plan(), "plan-1");
        assert_eq!(render.id(), "render-1");
        assert_eq!(render.config(), "global\n");
        let got: Vec<(FileKind, &str, &str)> =
            render.files().iter().map(|f| (f.kind, f.path.as_str(), f.content.as_str())).collect();
        assert_eq!(
            got,
            [
                (FileKind::General, "./A", "upper"),
                (FileKind::General, "./maps/a.map", "a"),
                (FileKind::General, "./maps/b.map", "b"),
                (FileKind::General, "./sub/haproxy.cfg", "not the config"),
                (FileKind::General, "./x.lua", "-- x"),
            ]
        );
    }

    #[test]
    fn files_land_at_their_relative_path_in_the_check_directory() {
        let tmp = tree(&[("haproxy.cfg", "global\n"), ("maps/a.map", "a"), ("x.lua", "x")]);
        let render = load(tmp.path(), "p", "r").unwrap();
        let layout = layout::plan(&render).unwrap();
        let placed: Vec<&Path> = layout.files().iter().map(|f| f.relative.as_path()).collect();
        assert_eq!(placed, [Path::new("maps/a.map"), Path::new("x.lua")]);
    }

    #[test]
    fn a_missing_config_is_named() {
        let tmp = tree(&[("maps/a.map", "a")]);
        let err = load(tmp.path(), "p", "r").unwrap_err();
        assert!(matches!(err, DirError::NoConfig { .. }), "{err:?}");
        assert_eq!(err.to_string(), format!("{}: no haproxy.cfg in this directory", tmp.path().display()));
    }

    #[test]
    fn symlinks_are_refused_anywhere() {
        let outside = tree(&[("secret", "s")]);
        // a symlinked file, deep down
        let tmp = tree(&[("haproxy.cfg", "global\n"), ("maps/a.map", "a")]);
        std::os::unix::fs::symlink(outside.path().join("secret"), tmp.path().join("maps/link.map")).unwrap();
        let err = load(tmp.path(), "p", "r").unwrap_err();
        assert_eq!(err.to_string(), format!("{}: symlinks are refused", tmp.path().join("maps/link.map").display()));
        // a symlinked directory
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("d")).unwrap();
        assert!(matches!(load(tmp.path(), "p", "r").unwrap_err(), DirError::Symlink { .. }));
        // the config itself
        let tmp = tree(&[("real.cfg", "global\n")]);
        std::os::unix::fs::symlink(tmp.path().join("real.cfg"), tmp.path().join("haproxy.cfg")).unwrap();
        assert!(matches!(load(tmp.path(), "p", "r").unwrap_err(), DirError::Symlink { .. }));
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        let fifo = tmp.path().join("pipe");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let err = load(tmp.path(), "p", "r").unwrap_err();
        assert_eq!(err.to_string(), format!("{}: special files (FIFO, socket, device) are refused", fifo.display()));
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        let _socket = std::os::unix::net::UnixListener::bind(tmp.path().join("sock")).unwrap();
        assert!(matches!(load(tmp.path(), "p", "r").unwrap_err(), DirError::Special { .. }));
    }

    #[test]
    fn non_utf8_content_is_named() {
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        fs::write(tmp.path().join("bin.map"), [0xff, 0xfe, 0x00]).unwrap();
        let err = load(tmp.path(), "p", "r").unwrap_err();
        assert_eq!(err.to_string(), format!("{}: the content is not UTF-8 text", tmp.path().join("bin.map").display()));
        let tmp = tree(&[]);
        fs::write(tmp.path().join("haproxy.cfg"), [0xc3]).unwrap();
        assert!(matches!(load(tmp.path(), "p", "r").unwrap_err(), DirError::ContentNotUtf8 { .. }));
    }

    #[test]
    fn non_utf8_names_are_named() {
        use std::os::unix::ffi::OsStrExt;
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        fs::write(tmp.path().join(std::ffi::OsStr::from_bytes(b"bad\xff")), "x").unwrap();
        assert!(matches!(load(tmp.path(), "p", "r").unwrap_err(), DirError::NameNotUtf8 { .. }));
    }

    #[test]
    fn the_same_tree_gives_the_same_checksum() {
        let a = tree(&[("haproxy.cfg", "global\n"), ("z", "1"), ("a/b", "2")]);
        let b = tree(&[("a/b", "2"), ("z", "1"), ("haproxy.cfg", "global\n")]);
        assert_eq!(load(a.path(), "p", "r").unwrap().checksum(), load(b.path(), "p", "r").unwrap().checksum());
    }
}
