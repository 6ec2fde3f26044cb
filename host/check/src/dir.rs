//! A directory on disk as a render, for `rendergate check DIR`.
//!
//! `DIR/haproxy.cfg` is the config; every other regular file becomes a
//! general file at the same relative path (`./maps/a.map` lands at
//! `maps/a.map` in the check directory). What a render sent as NDJSON
//! cannot hold — an empty directory, a name that is not UTF-8 — is kept as
//! the render's tree ([`TreeEntry`]), laid out the same way: the tree as it
//! is, as HAProxy would read it. Nothing is followed: the walk goes
//! down by directory handles, opening each entry by its one name with
//! `O_NOFOLLOW` ([`super::at`]), so a symlink anywhere in DIR is refused,
//! never read, even one swapped in during the walk; special files are
//! refused too. The render's limits ([`RenderLimits`], and the path limits
//! of [`super::limits`]) hold as it goes: a file that would pass them is
//! refused by its size, before it is read. Contents are read as bytes, the
//! config's too: HAProxy reads any byte (a DER OCSP response, a Latin-1
//! comment), so the gate judges them as it would.

use super::at;
use super::layout::CONFIG_NAME;
use super::limits::{MAX_PATH_BYTES, MAX_PATH_DEPTH, RenderLimits};
use cap_std::fs::Dir;
use rendergate_core::render::{FileKind, Render, RenderFile, TreeEntry};
use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
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
    #[error("{}: {reason}", path.display())]
    Limit { path: PathBuf, reason: String },
}

/// Reads `dir` as one render with the given plan and render ids, within `limits`.
pub fn load(
    dir: &Path,
    plan: &str,
    render_id: &str,
    limits: &RenderLimits,
) -> Result<Render, DirError> {
    // DIR itself was named by the user and may be a symlink; nothing inside it may.
    let root = Dir::open_ambient_dir(dir, cap_std::ambient_authority())
        .map_err(|source| DirError::Io { path: dir.to_path_buf(), source })?;
    let mut walk = Walk {
        top: dir,
        limits,
        bytes: 0,
        files: Vec::new(),
        tree: Vec::new(),
        entries: 0,
        directories: 0,
    };
    let config_path = dir.join(CONFIG_NAME);
    let config = match root.symlink_metadata(CONFIG_NAME) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(DirError::NoConfig { dir: dir.to_path_buf() });
        }
        Err(source) => return Err(DirError::Io { path: config_path, source }),
        Ok(meta) if meta.is_dir() => return Err(DirError::NotAFile { path: config_path }),
        Ok(meta) => walk.read(&root, CONFIG_NAME.as_ref(), &config_path, meta.file_type())?,
    };
    walk.directory(&root, Path::new(""))?;
    Ok(Render::with_tree(plan, render_id, config, walk.files, walk.tree))
}

/// One walk over DIR: what it has read, and what the limits still allow.
struct Walk<'a> {
    top: &'a Path,
    limits: &'a RenderLimits,
    /// Bytes read so far, the config's included.
    bytes: u64,
    files: Vec<RenderFile>,
    /// Empty directories, and files whose path is not UTF-8.
    tree: Vec<TreeEntry>,
    /// Entries other than directories listed so far: each is a file of the
    /// render or refused.
    entries: usize,
    /// Directories listed so far (bounded like files: a render needs no
    /// more directories than files).
    directories: usize,
}

impl Walk<'_> {
    /// Adds every regular file under `here` (DIR/`relative`; the top-level
    /// config excepted), in byte order of names so the same tree always
    /// gives the same render and checksum.
    fn directory(&mut self, here: &Dir, relative: &Path) -> Result<(), DirError> {
        let shown = self.top.join(relative);
        let io_err = |source| DirError::Io { path: shown.clone(), source };
        let mut names: Vec<(OsString, cap_std::fs::FileType)> = Vec::new();
        // Counted as listed: a directory of millions of entries is refused
        // before their names are all held.
        for entry in here.entries().map_err(io_err)? {
            let entry = entry.map_err(io_err)?;
            let name = entry.file_name();
            if relative.as_os_str().is_empty() && name == CONFIG_NAME {
                continue;
            }
            let kind = entry.file_type().map_err(io_err)?;
            let listed = if kind.is_dir() { &mut self.directories } else { &mut self.entries };
            *listed += 1;
            if *listed > self.limits.files {
                let limit = self.limits.files;
                let reason = if kind.is_dir() {
                    format!(
                        "more than {limit} directories, more than a render within --max-render-files {limit} needs"
                    )
                } else {
                    self.limits.too_many_files(&format!("at least {listed}"))
                };
                return Err(DirError::Limit { path: shown, reason });
            }
            names.push((name, kind));
        }
        if names.is_empty() && !relative.as_os_str().is_empty() {
            self.tree.push(TreeEntry::Directory(relative.as_os_str().as_bytes().to_vec()));
        }
        names.sort_by(|(a, _), (b, _)| a.cmp(b));
        for (name, kind) in names {
            let rel = relative.join(&name);
            let path = self.top.join(&rel);
            // as a render path: `./` and the path, for a directory too (an
            // empty one is laid out as it is)
            let length = rel.as_os_str().len() + 2;
            if length > MAX_PATH_BYTES {
                let reason = format!(
                    "the render path is {length} bytes long, more than the {MAX_PATH_BYTES} a render path may have"
                );
                return Err(DirError::Limit { path, reason });
            }
            if kind.is_dir() {
                // its files would land deeper than a render path may
                if rel.components().count() >= MAX_PATH_DEPTH {
                    let reason = format!(
                        "deeper than the {MAX_PATH_DEPTH} components a render path may have"
                    );
                    return Err(DirError::Limit { path, reason });
                }
                let sub = at::open_dir(here, &name).map_err(|e| refusal(&path, e))?;
                self.directory(&sub, &rel)?;
                continue;
            }
            let content = self.read(here, &name, &path, kind)?;
            match rel.to_str() {
                Some(text) => self.files.push(RenderFile {
                    kind: FileKind::General,
                    path: format!("./{text}"),
                    content,
                }),
                None => self
                    .tree
                    .push(TreeEntry::File { path: rel.as_os_str().as_bytes().to_vec(), content }),
            }
        }
        Ok(())
    }

    /// Reads the regular file `name` in `here`, within the bytes the limit
    /// leaves. Symlinks and special files are refused by their
    /// type before anything is opened, and again by the handle once opened
    /// (the entry may have been swapped in between).
    fn read(
        &mut self,
        here: &Dir,
        name: &std::ffi::OsStr,
        path: &Path,
        kind: cap_std::fs::FileType,
    ) -> Result<Vec<u8>, DirError> {
        if kind.is_symlink() {
            return Err(DirError::Symlink { path: path.to_path_buf() });
        }
        if !kind.is_file() {
            return Err(DirError::Special { path: path.to_path_buf() });
        }
        let io_err = |source| DirError::Io { path: path.to_path_buf(), source };
        let file = at::open_file(here, name).map_err(|e| refusal(path, e))?;
        let meta = file.metadata().map_err(io_err)?;
        if !meta.is_file() {
            return Err(DirError::Special { path: path.to_path_buf() });
        }
        let room = self.limits.bytes.saturating_sub(self.bytes);
        let too_big = |read: u64| DirError::Limit {
            path: path.to_path_buf(),
            reason: self.limits.too_many_bytes(&format!("at least {}", self.bytes + read)),
        };
        if meta.len() > room {
            return Err(too_big(meta.len()));
        }
        // Never more than the room and a byte, should the file grow
        // meanwhile; held in memory, so a size the allocator refuses is an
        // error, not the process's end.
        let Some(mut bytes) = buffer(meta.len()) else {
            let reason = format!("{} bytes cannot be held in memory to be read", meta.len());
            return Err(DirError::Limit { path: path.to_path_buf(), reason });
        };
        file.take(room + 1).read_to_end(&mut bytes).map_err(io_err)?;
        if bytes.len() as u64 > room {
            return Err(too_big(bytes.len() as u64));
        }
        self.bytes += bytes.len() as u64;
        Ok(bytes)
    }
}

/// An empty buffer for `len` bytes, or `None` where the allocator refuses
/// that much (the process would abort on a plain allocation).
fn buffer(len: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(usize::try_from(len).ok()?).ok()?;
    Some(bytes)
}

/// An entry that could not be opened: a symlink now, or another failure.
fn refusal(path: &Path, e: io::Error) -> DirError {
    if at::is_symlink_refusal(&e) {
        DirError::Symlink { path: path.to_path_buf() }
    } else {
        DirError::Io { path: path.to_path_buf(), source: e }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout;
    use std::fs;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let full = tmp.path().join(path);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(full, content).unwrap();
        }
        tmp
    }

    /// `dir` as a render, within the default limits.
    fn loaded(dir: &Path) -> Result<Render, DirError> {
        load(dir, "p", "r", &RenderLimits::default())
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
        let render = load(tmp.path(), "plan-1", "render-1", &RenderLimits::default()).unwrap();
        assert_eq!(render.plan(), "plan-1");
        assert_eq!(render.id(), "render-1");
        assert_eq!(render.config(), b"global\n");
        let got: Vec<(FileKind, &str, &[u8])> =
            render.files().iter().map(|f| (f.kind, f.path.as_str(), &f.content[..])).collect();
        assert_eq!(
            got,
            [
                (FileKind::General, "./A", &b"upper"[..]),
                (FileKind::General, "./maps/a.map", b"a"),
                (FileKind::General, "./maps/b.map", b"b"),
                (FileKind::General, "./sub/haproxy.cfg", b"not the config"),
                (FileKind::General, "./x.lua", b"-- x"),
            ]
        );
    }

    #[test]
    fn files_land_at_their_relative_path_in_the_check_directory() {
        let tmp = tree(&[("haproxy.cfg", "global\n"), ("maps/a.map", "a"), ("x.lua", "x")]);
        let render = loaded(tmp.path()).unwrap();
        let arrangement = layout::arrange(&render, std::path::Path::new("/etc/haproxy")).unwrap();
        let placed: Vec<&Path> = arrangement.files().iter().map(|f| f.relative.as_path()).collect();
        assert_eq!(placed, [Path::new("maps/a.map"), Path::new("x.lua")]);
    }

    #[test]
    fn a_missing_config_is_named() {
        let tmp = tree(&[("maps/a.map", "a")]);
        let err = loaded(tmp.path()).unwrap_err();
        assert!(matches!(err, DirError::NoConfig { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("{}: no haproxy.cfg in this directory", tmp.path().display())
        );
    }

    #[test]
    fn symlinks_are_refused_anywhere() {
        let outside = tree(&[("secret", "s")]);
        // a symlinked file, deep down
        let tmp = tree(&[("haproxy.cfg", "global\n"), ("maps/a.map", "a")]);
        std::os::unix::fs::symlink(outside.path().join("secret"), tmp.path().join("maps/link.map"))
            .unwrap();
        let err = loaded(tmp.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: symlinks are refused", tmp.path().join("maps/link.map").display())
        );
        // a symlinked directory
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("d")).unwrap();
        assert!(matches!(loaded(tmp.path()).unwrap_err(), DirError::Symlink { .. }));
        // the config itself
        let tmp = tree(&[("real.cfg", "global\n")]);
        std::os::unix::fs::symlink(tmp.path().join("real.cfg"), tmp.path().join("haproxy.cfg"))
            .unwrap();
        assert!(matches!(loaded(tmp.path()).unwrap_err(), DirError::Symlink { .. }));
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        let fifo = tmp.path().join("pipe");
        let mode = rustix::fs::Mode::from_raw_mode(0o600);
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, mode, 0).unwrap();
        let err = loaded(tmp.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: special files (FIFO, socket, device) are refused", fifo.display())
        );
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        let _socket = std::os::unix::net::UnixListener::bind(tmp.path().join("sock")).unwrap();
        assert!(matches!(loaded(tmp.path()).unwrap_err(), DirError::Special { .. }));
    }

    #[test]
    fn any_bytes_are_read_as_they_are_and_written_back_so() {
        let tmp = tree(&[]);
        let config = b"global\n# caf\xe9 \xff\n";
        let der = [0x30, 0x82, 0x01, 0xff, 0x00, 0x0a, 0xfe];
        fs::write(tmp.path().join("haproxy.cfg"), config).unwrap();
        fs::write(tmp.path().join("a.ocsp"), der).unwrap();
        let render = loaded(tmp.path()).unwrap();
        assert_eq!(render.config(), config);
        assert_eq!(render.files()[0].content, der);
        // sizes count bytes: the config's 16 and the file's 7
        let at = |bytes| load(tmp.path(), "p", "r", &RenderLimits { bytes, ..Default::default() });
        assert!(at(23).is_ok());
        assert!(matches!(at(22).unwrap_err(), DirError::Limit { .. }));
        // laid out byte for byte
        let out = laid_out(&render);
        assert_eq!(fs::read(out.path().join("haproxy.cfg")).unwrap(), config);
        assert_eq!(fs::read(out.path().join("a.ocsp")).unwrap(), der);
    }

    /// `render` written into a new directory, as a check lays it out.
    fn laid_out(render: &Render) -> tempfile::TempDir {
        let out = tempfile::tempdir().unwrap();
        let handle = Dir::open_ambient_dir(out.path(), cap_std::ambient_authority()).unwrap();
        layout::arrange(render, Path::new("/etc/haproxy"))
            .unwrap()
            .write(&handle, &mut |_| true)
            .unwrap();
        out
    }

    /// Empty directories and names that are not UTF-8 are carried as they
    /// are, and laid out where HAProxy finds them.
    #[test]
    fn empty_directories_and_any_name_bytes_are_carried_and_laid_out() {
        use std::os::unix::ffi::OsStrExt;
        let tmp = tree(&[("haproxy.cfg", "global\n"), ("maps/a.map", "x y\n")]);
        let odd = std::ffi::OsStr::from_bytes(b"bad\xff");
        fs::write(tmp.path().join(odd), "x").unwrap();
        fs::create_dir_all(tmp.path().join(odd).with_extension("d").join("inner")).unwrap();
        fs::create_dir_all(tmp.path().join("ssl/crts")).unwrap();
        let render = loaded(tmp.path()).unwrap();
        assert_eq!(render.files().len(), 1, "{render:?}");
        assert_eq!(
            render.tree(),
            [
                TreeEntry::File { path: b"bad\xff".to_vec(), content: b"x".to_vec() },
                TreeEntry::Directory(b"bad\xff.d/inner".to_vec()),
                TreeEntry::Directory(b"ssl/crts".to_vec()),
            ]
        );
        let out = laid_out(&render);
        assert_eq!(fs::read(out.path().join(odd)).unwrap(), b"x");
        assert!(out.path().join(odd).with_extension("d").join("inner").is_dir());
        assert!(out.path().join("ssl/crts").is_dir());
        assert_eq!(fs::read(out.path().join("maps/a.map")).unwrap(), b"x y\n");
    }

    #[test]
    fn the_same_tree_gives_the_same_checksum() {
        let a = tree(&[("haproxy.cfg", "global\n"), ("z", "1"), ("a/b", "2")]);
        let b = tree(&[("a/b", "2"), ("z", "1"), ("haproxy.cfg", "global\n")]);
        assert_eq!(loaded(a.path()).unwrap().checksum(), loaded(b.path()).unwrap().checksum());
    }

    #[test]
    fn past_the_file_count_is_refused_as_listed() {
        let tmp = tree(&[("haproxy.cfg", "global\n"), ("a", "1"), ("d/b", "2"), ("d/c", "3")]);
        let at = |files| load(tmp.path(), "p", "r", &RenderLimits { files, ..Default::default() });
        assert_eq!(at(3).unwrap().files().len(), 3);
        let err = at(2).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: the render has at least 3 files, more than --max-render-files 2",
                tmp.path().join("d").display()
            )
        );
    }

    #[test]
    fn past_the_size_a_file_is_refused_by_its_size_unread() {
        let tmp = tree(&[("haproxy.cfg", "global\n"), ("a", "0123456789")]);
        let at = |bytes| load(tmp.path(), "p", "r", &RenderLimits { bytes, ..Default::default() });
        assert_eq!(at(17).unwrap().files().len(), 1);
        let err = at(16).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: the render has at least 17 bytes, more than --max-render-size 16",
                tmp.path().join("a").display()
            )
        );
        // the config counts too
        assert!(matches!(at(6).unwrap_err(), DirError::Limit { .. }));
        // a sparse file of 1 TiB: refused by its size, never read
        let sparse = fs::File::create(tmp.path().join("b")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        let started = std::time::Instant::now();
        let err = at(1 << 30).unwrap_err().to_string();
        assert!(
            err.ends_with(
                "the render has at least 1099511627793 bytes, more than --max-render-size 1GiB"
            ),
            "{err}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }

    #[test]
    fn a_directory_too_deep_for_a_render_path_is_refused() {
        let deep = vec!["d"; MAX_PATH_DEPTH - 1].join("/");
        let tmp = tree(&[("haproxy.cfg", "global\n"), (&format!("{deep}/f"), "x")]);
        let render = loaded(tmp.path()).unwrap();
        assert_eq!(render.files()[0].path, format!("./{deep}/f"));
        layout::arrange(&render, std::path::Path::new("/etc/haproxy")).unwrap();
        let tmp = tree(&[("haproxy.cfg", "global\n"), (&format!("{deep}/d/f"), "x")]);
        let err = loaded(tmp.path()).unwrap_err();
        assert!(
            err.to_string().ends_with("deeper than the 32 components a render path may have"),
            "{err}"
        );
    }

    #[test]
    fn an_empty_directory_whose_path_is_too_long_for_a_render_is_refused() {
        // 31 nested directories of 255 bytes: empty, yet a path of some 7.9 KB
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        let long = "d".repeat(255);
        // made one by one from handles: the whole path is past PATH_MAX
        let mut deep = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        for _ in 0..31 {
            deep.create_dir(&long).unwrap();
            deep = deep.open_dir(&long).unwrap();
        }
        let err = loaded(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("a render path may have"), "{err}");
        // one of them is a path a render may have
        let tmp = tree(&[("haproxy.cfg", "global\n")]);
        fs::create_dir(tmp.path().join(&long)).unwrap();
        loaded(tmp.path()).unwrap();
    }

    #[test]
    fn a_buffer_larger_than_memory_can_hold_is_refused_not_an_abort() {
        assert!(buffer(u64::MAX).is_none());
        assert!(buffer(1 << 62).is_none());
        assert!(buffer(10).is_some_and(|b| b.capacity() >= 10 && b.is_empty()));
    }
}
