//! One entry of a directory, opened from the directory's handle and never
//! through a symlink: `openat(dirfd, name, O_NOFOLLOW)` with a single name.
//! A walk that goes down by these handles reads what it listed, whatever is
//! renamed or swapped for a symlink along the way (docs/checking.md,
//! "`check DIR`").

use cap_std::fs::Dir;
use rustix::fs::OFlags;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

/// The directory `name` in `parent`. A symlink there is refused (`ELOOP`),
/// and so is anything but a directory (`ENOTDIR`).
pub fn open_dir(parent: &Dir, name: &OsStr) -> io::Result<Dir> {
    match open(parent, name, OFlags::RDONLY | OFlags::DIRECTORY) {
        Ok(fd) => Ok(Dir::from_std_file(File::from(fd))),
        // With O_DIRECTORY, Linux answers a symlink with ENOTDIR: say which.
        Err(e)
            if e.raw_os_error() == Some(libc::ENOTDIR)
                && parent.symlink_metadata(name).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            Err(io::Error::from_raw_os_error(libc::ELOOP))
        }
        Err(e) => Err(e),
    }
}

/// The file `name` in `parent`, to read. A symlink there is refused
/// (`ELOOP`); a FIFO swapped in is opened without waiting (`O_NONBLOCK`), so
/// the caller can refuse it by its type.
pub fn open_file(parent: &Dir, name: &OsStr) -> io::Result<File> {
    open(parent, name, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY).map(File::from)
}

/// Whether an error from [`open_dir`] or [`open_file`] means the entry is
/// a symlink now.
pub fn is_symlink_refusal(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

fn open(parent: &Dir, name: &OsStr, flags: OFlags) -> io::Result<OwnedFd> {
    // One name, never a path: nothing but the entry itself is resolved.
    if name.is_empty() || name == "." || name == ".." || name.as_bytes().contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not one entry's name"),
        ));
    }
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(parent, name, flags, rustix::fs::Mode::empty())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn handle(path: &std::path::Path) -> Dir {
        Dir::open_ambient_dir(path, cap_std::ambient_authority()).unwrap()
    }

    #[test]
    fn a_symlink_is_refused_as_a_file_and_as_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), tmp.path().join("file")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("dir")).unwrap();
        std::os::unix::fs::symlink("real", tmp.path().join("inside")).unwrap();
        std::fs::create_dir(tmp.path().join("real")).unwrap();
        let dir = handle(tmp.path());
        for name in ["file", "dir", "inside"] {
            let e = open_file(&dir, name.as_ref()).unwrap_err();
            assert!(is_symlink_refusal(&e), "{name}: {e}");
            let e = open_dir(&dir, name.as_ref()).unwrap_err();
            assert!(is_symlink_refusal(&e), "{name}: {e}");
        }
        assert!(open_dir(&dir, "real".as_ref()).is_ok());
    }

    #[test]
    fn only_one_name_is_resolved() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/x"), "x").unwrap();
        let dir = handle(tmp.path());
        for name in ["sub/x", "..", ".", ""] {
            assert_eq!(
                open_file(&dir, name.as_ref()).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{name}"
            );
        }
    }

    #[test]
    fn a_directory_opened_by_handle_stays_itself_when_its_name_is_swapped() {
        // The race of a walk by path names: DIR/sub is listed as a directory,
        // then swapped for a symlink to somewhere else before it is read.
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("key"), "secret").unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/key"), "public").unwrap();
        let dir = handle(tmp.path());
        let sub = open_dir(&dir, "sub".as_ref()).unwrap();
        std::fs::rename(tmp.path().join("sub"), tmp.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("sub")).unwrap();
        // the handle still reads what was listed...
        let mut text = String::new();
        open_file(&sub, "key".as_ref()).unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "public");
        // ...and opening the name again refuses the symlink
        assert!(is_symlink_refusal(&open_dir(&dir, "sub".as_ref()).unwrap_err()));
    }
}
