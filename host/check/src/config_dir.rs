//! The config directory as the check directory, on a host that gives no
//! namespaces (docs/checking.md, "Without namespaces"): each render is laid
//! out in `--config-dir` itself, so that an absolute path in it resolves as
//! on a pod, and the directory is emptied after every check.
//!
//! The directory must be the gate's own: a real directory (never a
//! symlink) it can write, empty when claimed, and held by one process at a
//! time (an exclusive `flock` for the checker's life). Checks in it run one
//! at a time (a one-permit semaphore, held by the check directory until it
//! is emptied). While a render lies in it the directory carries the
//! extended attribute [`MARK`]: a gate killed mid-check (SIGKILL, a crash)
//! leaves its render behind, and the next gate empties a directory it finds
//! marked and unlocked instead of refusing it as someone else's. Where the
//! file system has no user xattrs there is no mark, and such leftovers are
//! refused as any other content is.

use crate::base::{flock, open_dir_nofollow};
use cap_std::fs::Dir;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The extended attribute saying "a render of rendergate's lies here".
pub const MARK: &std::ffi::CStr = c"user.rendergate.render";

/// A claimed config directory.
#[derive(Debug)]
pub struct ConfigDir {
    path: PathBuf,
    /// Its modes when claimed, given back before each emptying: a render's
    /// code may `chmod` the directory it lies in.
    mode: u32,
    /// Read, lockable; also the handle files are written through.
    dir: Dir,
    /// On a tmpfs (a memory-backed `emptyDir`): writing in it waits on no disk.
    in_memory: bool,
    slot: Arc<Semaphore>,
}

impl ConfigDir {
    /// Claims `path`, or says why it cannot be the check directory.
    pub fn claim(path: &Path) -> Result<ConfigDir, String> {
        let shown = path.display();
        let file = open_dir_nofollow(path).map_err(|e| {
            let symlink = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            match e.raw_os_error() {
                Some(libc::ELOOP | libc::ENOTDIR) if symlink => {
                    format!("{shown} is a symlink; it must be a directory")
                }
                Some(libc::ENOTDIR) => format!("{shown} is not a directory"),
                _ => format!("{shown}: {e}"),
            }
        })?;
        match flock(file.as_fd(), rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {
                return Err(format!("{shown} is in use by another rendergate process"));
            }
            Err(e) => return Err(format!("cannot lock {shown}: {e}")),
        }
        let access = rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK;
        rustix::fs::access(path, access)
            .map_err(|e| format!("{shown} is not writable: {}", io::Error::from(e)))?;
        let mode = file.metadata().map_err(|e| format!("{shown}: {e}"))?.mode() & 0o7777;
        let in_memory = rustix::fs::fstatfs(&file)
            .is_ok_and(|fs| fs.f_type == libc::TMPFS_MAGIC as rustix::fs::FsWord);
        let slot = Arc::new(Semaphore::new(1));
        let dir = Dir::from_std_file(file);
        let claimed = ConfigDir { path: path.to_path_buf(), mode, dir, in_memory, slot };
        let content = claimed.entries().map_err(|e| format!("{shown}: {e}"))?;
        if !content.is_empty() {
            // an empty buffer asks only whether the mark exists
            if rustix::fs::fgetxattr(&claimed.dir, MARK, &mut [0u8; 0][..]).is_err() {
                return Err(format!(
                    "{shown} is not empty (it holds {}); without namespaces each render is laid out in it, so it must be an empty directory of the gate's own",
                    listed(&content)
                ));
            }
            tracing::warn!(
                "{shown}: a render left by a gate that ended mid-check ({}); removing it",
                listed(&content)
            );
            empty(&claimed.dir, claimed.mode).map_err(|e| format!("cannot empty {shown}: {e}"))?;
        }
        Ok(claimed)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's permit, if no check holds it now.
    pub fn try_free(&self) -> Option<OwnedSemaphorePermit> {
        self.slot.clone().try_acquire_owned().ok()
    }

    /// Waits for the directory to be free (one check at a time).
    pub async fn free(&self) -> OwnedSemaphorePermit {
        self.slot.clone().acquire_owned().await.expect("the semaphore is never closed")
    }

    /// The directory as this check's, marked; emptied when dropped. `permit`
    /// is [`ConfigDir::free`]'s, held until then.
    pub fn enter(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> io::Result<InConfigDir> {
        // a check whose emptying failed left something (or a mode that
        // hides what it left): not laid over
        if !self.entries().is_ok_and(|names| names.is_empty()) {
            empty(&self.dir, self.mode)?;
        }
        let set = rustix::fs::fsetxattr(&self.dir, MARK, b"1", rustix::fs::XattrFlags::empty());
        match set {
            // a file system without user xattrs: no mark (see the module's doc)
            Ok(()) | Err(rustix::io::Errno::NOTSUP | rustix::io::Errno::PERM) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(InConfigDir { config_dir: self.clone(), _permit: permit })
    }

    fn entries(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in self.dir.entries()? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
}

/// One check's use of the config directory.
#[derive(Debug)]
pub struct InConfigDir {
    config_dir: Arc<ConfigDir>,
    _permit: OwnedSemaphorePermit,
}

impl InConfigDir {
    pub fn dir(&self) -> &Dir {
        &self.config_dir.dir
    }

    /// Whether the directory is on a tmpfs.
    pub fn in_memory(&self) -> bool {
        self.config_dir.in_memory
    }
}

impl Drop for InConfigDir {
    /// Empties the directory (never following a symlink HAProxy or the
    /// render made), unmarks it, then frees it for the next check.
    fn drop(&mut self) {
        if let Err(e) = empty(&self.config_dir.dir, self.config_dir.mode) {
            tracing::error!(
                "cannot empty the config directory after a check: {e}; the next check tries again"
            );
        }
    }
}

/// Gives `dir` back its claimed `mode`, removes every entry of it whatever
/// modes the render gave them, then the mark.
fn empty(dir: &Dir, mode: u32) -> io::Result<()> {
    // Only when changed: a directory the gate does not own (an emptyDir is
    // root's, group-writable) cannot be chmodded, by the gate nor by a render.
    if rustix::fs::fstat(dir)?.st_mode & 0o7777 != mode {
        rustix::fs::fchmod(dir, rustix::fs::Mode::from_raw_mode(mode))?;
    }
    for entry in dir.entries()? {
        let entry = entry?;
        let name = entry.file_name();
        let removed = if entry.file_type()?.is_dir() {
            crate::remove::remove_dir_all(dir, &name)
        } else {
            dir.remove_file(&name)
        };
        if removed.as_ref().is_err_and(|e| e.kind() != io::ErrorKind::NotFound) {
            return removed;
        }
    }
    match rustix::fs::fremovexattr(dir, MARK) {
        Ok(())
        | Err(rustix::io::Errno::NODATA | rustix::io::Errno::NOTSUP | rustix::io::Errno::PERM) => {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// At most a few names, for a message.
fn listed(names: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut text =
        names.iter().take(SHOWN).map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(dir: &Path) -> bool {
        rustix::fs::getxattr(dir, MARK, &mut [0u8; 0][..]).is_ok()
    }

    fn mark(dir: &Path, name: &std::ffi::CStr) -> bool {
        rustix::fs::setxattr(dir, name, b"1", rustix::fs::XattrFlags::empty()).is_ok()
    }

    fn xattrs_work(dir: &Path) -> bool {
        mark(dir, c"user.probe")
    }

    #[tokio::test]
    async fn an_empty_directory_is_claimed_used_and_emptied_after_each_check() {
        let tmp = tempfile::tempdir().unwrap();
        let claimed = Arc::new(ConfigDir::claim(tmp.path()).unwrap());
        let in_dir = claimed.enter(claimed.free().await).unwrap();
        in_dir.dir().create_dir("maps").unwrap();
        in_dir.dir().write("maps/a.map", b"a b\n").unwrap();
        in_dir.dir().write("haproxy.cfg", b"global\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("link")).unwrap();
        if xattrs_work(tmp.path()) {
            assert!(marks(tmp.path()), "a render in the directory marks it");
        }
        drop(in_dir);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        assert!(!marks(tmp.path()));
        assert!(std::fs::metadata("/etc/passwd").is_ok(), "a symlink is removed, not followed");
    }

    #[tokio::test]
    async fn a_directory_on_a_tmpfs_is_written_as_memory() {
        // /dev/shm is a tmpfs; /var/tmp lies on the host's disk here and in CI
        for (parent, tmpfs) in [("/dev/shm", true), ("/var/tmp", false)] {
            let tmp = tempfile::tempdir_in(parent).unwrap();
            let on = rustix::fs::statfs(tmp.path()).unwrap().f_type;
            assert_eq!(on == libc::TMPFS_MAGIC as rustix::fs::FsWord, tmpfs, "{parent}");
            let claimed = Arc::new(ConfigDir::claim(tmp.path()).unwrap());
            let in_dir = claimed.enter(claimed.free().await).unwrap();
            assert_eq!(in_dir.in_memory(), tmpfs, "{parent}");
        }
    }

    #[tokio::test]
    async fn one_check_at_a_time() {
        let tmp = tempfile::tempdir().unwrap();
        let claimed = Arc::new(ConfigDir::claim(tmp.path()).unwrap());
        let first = claimed.enter(claimed.free().await).unwrap();
        let second =
            tokio::time::timeout(std::time::Duration::from_millis(50), claimed.free()).await;
        assert!(second.is_err(), "the second check waits for the first");
        drop(first);
        let _second = claimed.enter(claimed.free().await).unwrap();
    }

    #[test]
    fn a_directory_with_content_is_refused_and_left_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("haproxy.cfg"), "global\n").unwrap();
        let e = ConfigDir::claim(tmp.path()).unwrap_err();
        assert!(e.contains("is not empty (it holds \"haproxy.cfg\")"), "{e}");
        assert!(tmp.path().join("haproxy.cfg").exists());
    }

    #[test]
    fn a_marked_directory_holds_a_dead_gates_render_and_is_emptied() {
        let tmp = tempfile::tempdir().unwrap();
        if !xattrs_work(tmp.path()) {
            crate::needs::missing("no user xattrs on this file system", "this test");
            return;
        }
        std::fs::write(tmp.path().join("haproxy.cfg"), "global\n").unwrap();
        assert!(mark(tmp.path(), MARK));
        ConfigDir::claim(tmp.path()).unwrap();
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_second_claim_is_refused_while_the_first_lives() {
        let tmp = tempfile::tempdir().unwrap();
        let first = ConfigDir::claim(tmp.path()).unwrap();
        let e = ConfigDir::claim(tmp.path()).unwrap_err();
        assert!(e.contains("in use by another rendergate process"), "{e}");
        drop(first);
        ConfigDir::claim(tmp.path()).unwrap();
    }

    #[test]
    fn a_symlink_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(tmp.path(), tmp.path().join("link")).unwrap();
        let e = ConfigDir::claim(&tmp.path().join("link")).unwrap_err();
        assert!(e.contains("is a symlink"), "{e}");
    }
}
