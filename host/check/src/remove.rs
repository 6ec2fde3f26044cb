//! Removing what a render left, whatever modes its code gave it. A render's
//! Lua or native code runs as the gate's own user and may `chmod 000` the
//! directory it lies in, or any directory it made: a plain recursive
//! removal then stops at the first it cannot read, and the render (a
//! private key among its files) would outlive its check, or, in the
//! config directory, make every later check fail. The owner may always
//! give a directory back its modes, so removal does that first, top down,
//! never following a symlink, with nothing of the check running any more
//! (its process group is dead before its directory goes; of a check dropped
//! mid-run in a PID namespace of its own, dying: its init gone, the kernel
//! kills the rest).

use cap_std::fs::Dir;
use rustix::fs::{AtFlags, Mode};
use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;

/// Gives the directory `name` in `dir`, and every directory under it, the
/// owner's modes again, top down, so that all of it can be read and removed.
///
/// `chmod u=rwx` by name: a directory of mode 000 cannot be opened to
/// `fchmod` it. Nothing runs that could swap it for a symlink between
/// readdir and here (the check's processes are dead), and a symlink's
/// target would be refused by the kernel all the same unless it is the
/// gate's own.
fn reclaim(dir: &Dir, name: &OsStr) -> io::Result<()> {
    let opened = rustix::fs::chmodat(dir.as_fd(), name, Mode::RWXU, AtFlags::empty())
        .map_err(io::Error::from)
        .and_then(|()| crate::at::open_dir(dir, name));
    let sub = match opened {
        Ok(sub) => sub,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in sub.entries()? {
        let entry = entry?;
        // the entry itself: readdir's type, never a symlink's target
        if entry.file_type()?.is_dir() {
            reclaim(&sub, &entry.file_name())?;
        }
    }
    Ok(())
}

/// Removes the directory `name` in `parent` with everything in it; when a
/// plain removal is refused, gives the tree back its owner's modes and
/// removes it again.
pub fn remove_dir_all(parent: &Dir, name: &OsStr) -> io::Result<()> {
    let mut removed = parent.remove_dir_all(name);
    if removed.as_ref().is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied) {
        reclaim(parent, name)?;
        removed = parent.remove_dir_all(name);
    }
    match removed {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn set_mode(path: &std::path::Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    // Run as root these cannot see a mode refuse anything (root ignores
    // modes): tests/hostile/chmod_render.rs runs the gate unprivileged.
    // What holds for root too: a symlink's target is never changed.
    #[test]
    fn a_tree_chmodded_000_is_removed_and_what_its_symlinks_name_keeps_its_modes() {
        let work = tempfile::tempdir().unwrap();
        let outside = work.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        set_mode(&outside, 0o555);
        // A tree as a render's code leaves it: directories of mode 000 and
        // 0500, a key inside, and a symlink to a directory outside that must
        // keep its modes.
        let check = work.path().join("check");
        std::fs::create_dir_all(check.join("a/b/c")).unwrap();
        std::fs::write(check.join("a/b/c/key.pem"), "PRIVATE").unwrap();
        std::fs::write(check.join("a/file"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, check.join("a/out")).unwrap();
        set_mode(&check.join("a/b/c"), 0o000);
        set_mode(&check.join("a/b"), 0o500);
        set_mode(&check.join("a"), 0o000);
        let parent = Dir::open_ambient_dir(work.path(), cap_std::ambient_authority()).unwrap();
        remove_dir_all(&parent, OsStr::new("check")).unwrap();
        assert!(!check.exists());
        let mode = std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o555, "a symlink's target was changed");
    }
}
