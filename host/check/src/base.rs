//! The base directory check directories are made in:
//! `<work dir>/rendergate-<euid>`, a real directory (never a symlink) owned
//! by this process's user, mode 0700, wiped at start-up so a crashed run
//! leaves nothing behind.
//!
//! Several rendergate processes may share one base (a host running `serve`
//! and `check` side by side; the tests run many at once), so the start-up
//! wipe must take only what belongs to no live process. The choice made
//! here: **one subdirectory per checker, `<random>`, held by an exclusive
//! `flock` for as long as the checker lives**, with that checker's check
//! directories inside it:
//!
//! ```text
//! <work dir>/rendergate-<euid>/          0700, ours
//!     <random>/                          0700, flock'd by a live checker
//!         check.<n>.<nanos>/             one check, 0700
//!             haproxy.cfg, maps/…        0600, created exclusively
//! ```
//!
//! At start-up every sibling whose lock can be taken belongs to no live
//! process (the kernel drops a `flock` when its process dies, however it
//! dies) and is removed with everything in it; anything else in the base
//! (a file, a symlink) is never ours and is removed without being followed.
//! A lock is better than `kill(pid, 0) == ESRCH` on the pid in the name: a
//! reused pid would keep a crashed run's files (secrets) alive, and a
//! process in another pid namespace sharing the directory would have its
//! live directory wiped. On a filesystem without `flock` the name is
//! `<pid>.<random>`, and liveness falls back to that pid test.
//!
//! Start-up (wipe, create and lock our subdirectory) and shut-down (remove
//! our subdirectory, then the base itself when it is empty, so a clean exit
//! leaves nothing either) both run under an exclusive lock on the base: a
//! subdirectory is never seen between its creation and its lock, and a
//! process that waited for the lock while another removed the base sees,
//! after taking it, that the path no longer names the directory it locked,
//! and starts over.

use cap_std::fs::Dir;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How often start-up begins again when the base is removed under it.
const ATTEMPTS: usize = 16;

/// `rendergate-<euid>` in a work directory, with this checker's own
/// locked subdirectory in it.
#[derive(Debug)]
pub struct BaseDir {
    /// Canonical: the parent resolved once, then only names we made or checked.
    path: PathBuf,
    /// Holds our lock; closed before `base`, whose lock it is taken under.
    own: Dir,
    base: Dir,
    /// Whether `flock` works on this filesystem.
    locking: bool,
    own_path: PathBuf,
}

/// One check's directory: removed (with everything in it) when dropped,
/// or, the config directory itself, emptied ([`crate::config_dir`]).
#[derive(Debug)]
pub struct CheckDir {
    place: Place,
    path: PathBuf,
    /// The render's own tmpfs in its child's world, when the child handed
    /// one over ([`crate::sandbox::world::Op::Render`]): the render is
    /// written there, and the directory stays empty.
    render: Option<Dir>,
}

#[derive(Debug)]
enum Place {
    /// A fresh directory in this checker's subdirectory.
    Fresh(FreshDir),
    /// `--config-dir` itself, on a host without namespaces.
    ConfigDir(crate::config_dir::InConfigDir),
}

impl CheckDir {
    /// The config directory as this check's directory.
    pub fn in_config_dir(path: &Path, in_dir: crate::config_dir::InConfigDir) -> CheckDir {
        CheckDir { place: Place::ConfigDir(in_dir), path: path.to_path_buf(), render: None }
    }

    /// The same check directory, its render written into `render`, the
    /// tmpfs its child handed over.
    pub fn with_render(mut self, render: std::os::fd::OwnedFd) -> CheckDir {
        self.render = Some(Dir::from_std_file(std::fs::File::from(render)));
        self
    }

    /// Whether the render is written into memory: the tmpfs its child
    /// handed over, or a config directory on a tmpfs.
    pub fn in_memory(&self) -> bool {
        self.render.is_some()
            || matches!(&self.place, Place::ConfigDir(in_dir) if in_dir.in_memory())
    }

    /// Whether this is the config directory itself (emptied, not removed).
    pub fn is_config_dir(&self) -> bool {
        matches!(self.place, Place::ConfigDir(_))
    }

    /// The handle files are written through: the render's own tmpfs where
    /// its child handed one over, else the directory.
    pub fn dir(&self) -> &Dir {
        self.render.as_ref().unwrap_or_else(|| self.own())
    }

    /// Whether a run filled the render's own tmpfs (less than 1 MiB or no
    /// inode left), so that a refusal may be the room's, not the render's:
    /// its size, said so. `None` for a directory on the host's disk.
    pub fn room_filled(&self) -> Option<u64> {
        let render = self.render.as_ref()?;
        let fs = rustix::fs::fstatvfs(render).ok()?;
        let left = fs.f_bavail.saturating_mul(fs.f_frsize);
        let size = fs.f_blocks.saturating_mul(fs.f_frsize);
        (left < 1 << 20 || fs.f_favail == 0).then_some(size)
    }

    /// The directory itself.
    fn own(&self) -> &Dir {
        match &self.place {
            Place::Fresh(fresh) => &fresh.dir,
            Place::ConfigDir(in_dir) => in_dir.dir(),
        }
    }

    /// The absolute path on the host; nothing is opened by it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path taken out of messages: a fresh directory's (a host detail
    /// HAProxy names where a pod would name the config directory), nothing
    /// for the config directory, which is the pod's own path.
    pub fn hidden(&self) -> &Path {
        match self.place {
            Place::Fresh(_) => &self.path,
            Place::ConfigDir(_) => Path::new(""),
        }
    }

    /// The directory's descriptor: the child `fchdir`s to it and
    /// Landlock's rule is added from it.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.own().as_fd()
    }
}

/// A fresh check directory, removed with all a render left in it whatever
/// modes its code gave it ([`crate::remove`]).
#[derive(Debug)]
struct FreshDir {
    /// This checker's subdirectory, where it was made.
    parent: Dir,
    name: std::ffi::OsString,
    dir: Dir,
}

impl Drop for FreshDir {
    fn drop(&mut self) {
        if let Err(e) = crate::remove::remove_dir_all(&self.parent, &self.name) {
            tracing::warn!(
                "cannot remove a check directory ({}): {e}; the next gate to start here removes it",
                self.name.to_string_lossy()
            );
        }
    }
}

/// A name no other check directory of this checker has: a counter and the
/// clock (a clash is made again). No pid: the path of a check directory
/// shows in a check's own `/proc/self/mountinfo`.
fn fresh_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("check.{}.{nanos:08x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

impl BaseDir {
    /// Makes (or checks) `<parent>/rendergate-<euid>`, wipes what no live
    /// process holds in it, and makes this checker's subdirectory. The error
    /// names the problem; the checker says it for every check.
    pub fn open(parent: &Path) -> Result<BaseDir, String> {
        let fail = |what: String| {
            format!("cannot create a check directory in {}: {what}", parent.display())
        };
        let parent_real = std::fs::canonicalize(parent).map_err(|e| fail(e.to_string()))?;
        let euid = rustix::process::geteuid().as_raw();
        let path = parent_real.join(format!("rendergate-{euid}"));
        for _ in 0..ATTEMPTS {
            let created = match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                Err(e) => return Err(fail(format!("{}: {e}", path.display()))),
            };
            // None: removed by a process shutting down between the two steps
            let Some(file) = open_private(&path, euid, created).map_err(fail)? else { continue };
            let locking = match flock(file.as_fd(), rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => true,
                Err(e) if unsupported(&e) => false,
                Err(e) => return Err(fail(format!("cannot lock {}: {e}", path.display()))),
            };
            // A process shutting down removed the base while we waited for its lock.
            if !same_file(&path, &file) {
                continue;
            }
            let base = Dir::from_std_file(file);
            wipe(&base, locking, &path);
            let (own_name, own) =
                make_own(&base, locking).map_err(|e| fail(format!("{}: {e}", path.display())))?;
            if locking {
                let _ = flock(base.as_fd(), rustix::fs::FlockOperation::Unlock);
            }
            return Ok(BaseDir { own_path: path.join(&own_name), path, own, base, locking });
        }
        Err(fail(format!("{} keeps being removed while it is set up", path.display())))
    }

    /// This checker's subdirectory, where its check directories are made.
    pub fn own_path(&self) -> &Path {
        &self.own_path
    }

    /// A fresh, private, empty check directory in this checker's subdirectory.
    pub fn check_dir(&self) -> io::Result<CheckDir> {
        // owner-only: the render may hold secrets (the subdirectory around
        // it is 0700 already)
        let (name, dir) = make_dir(&self.own, || Ok(fresh_name()))?;
        let dir = FreshDir { parent: self.own.try_clone()?, name: name.clone().into(), dir };
        Ok(CheckDir { path: self.own_path.join(&name), place: Place::Fresh(dir), render: None })
    }
}

impl Drop for BaseDir {
    /// Removes our subdirectory (no check is running: checks borrow the
    /// checker), then the base if nobody else is in it.
    fn drop(&mut self) {
        if self.locking {
            let _ = flock(self.base.as_fd(), rustix::fs::FlockOperation::LockExclusive);
        }
        if let Some(own_name) = self.own_path.file_name() {
            let _ = crate::remove::remove_dir_all(&self.base, own_name);
        }
        // ENOTEMPTY while another process has its subdirectory here: fine.
        let _ = std::fs::remove_dir(&self.path);
        // closing `own`, then `base`, releases their locks
    }
}

/// Opens the base without following a symlink and checks it is ours and
/// private; `None` when it has just gone.
fn open_private(path: &Path, euid: libc::uid_t, created: bool) -> Result<Option<File>, String> {
    let shown = path.display();
    let file = match open_dir_nofollow(path) {
        Ok(file) => file,
        Err(e) => {
            let symlink = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            return Err(match e.raw_os_error() {
                // With O_DIRECTORY, Linux answers a symlink with ENOTDIR.
                Some(libc::ELOOP | libc::ENOTDIR) if symlink => {
                    format!(
                        "{shown} is a symlink; refusing it (remove it, or run with another TMPDIR or work directory)"
                    )
                }
                Some(libc::ENOTDIR) => {
                    format!("{shown} exists and is not a directory; refusing it")
                }
                Some(libc::ENOENT) => return Ok(None),
                _ => format!("{shown}: {e}"),
            });
        }
    };
    let meta = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if meta.uid() != euid {
        return Err(format!(
            "{shown} is owned by uid {}, not by this process's uid {euid}; refusing it (remove it, or run with another TMPDIR or work directory)",
            meta.uid()
        ));
    }
    if created {
        // made by us just now, with the umask's say in its mode
        file.set_permissions(std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{shown}: {e}"))?;
    } else if meta.mode() & 0o7777 & !libc::S_ISGID != 0o700 {
        // setgid aside: a directory made in a setgid parent (an emptyDir with
        // an fsGroup) has it until its maker's chmod, and it grants nothing
        return Err(format!(
            "{shown} has mode {:04o}, not 0700; refusing it (it must be private to uid {euid})",
            meta.mode() & 0o7777
        ));
    }
    Ok(Some(file))
}

/// Opens the directory `path` for reading (a lockable descriptor), never
/// through a symlink at its last component (ELOOP or ENOTDIR then).
pub(crate) fn open_dir_nofollow(path: &Path) -> io::Result<File> {
    use rustix::fs::OFlags;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::open(path, flags, rustix::fs::Mode::empty())?))
}

/// Whether `path` still names the directory `file` has open.
fn same_file(path: &Path, file: &File) -> bool {
    match (std::fs::symlink_metadata(path), file.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Removes every entry of the base (at `path`) that no live process
/// holds; warns of what could not be removed.
fn wipe(base: &Dir, locking: bool, path: &Path) {
    let warn = |problem: String| {
        tracing::warn!(
            "{}: a stale check directory could not be removed: {problem}",
            path.display()
        )
    };
    let entries = match base.entries() {
        Ok(entries) => entries,
        Err(e) => return warn(e.to_string()),
    };
    for entry in entries {
        match entry.map(|entry| (entry.file_name(), remove_stale(base, &entry, locking))) {
            Ok((_, Ok(()))) => {}
            Ok((_, Err(e))) if e.kind() == io::ErrorKind::NotFound => {}
            Ok((name, Err(e))) => warn(format!("{}: {e}", name.to_string_lossy())),
            Err(e) => warn(e.to_string()),
        }
    }
}

/// Removes `entry` of the base unless it is a subdirectory a live process
/// holds ([`stale`]); anything else in the base is never ours.
fn remove_stale(base: &Dir, entry: &cap_std::fs::DirEntry, locking: bool) -> io::Result<()> {
    let name = entry.file_name();
    // the entry itself, never what a symlink points at
    if !entry.file_type()?.is_dir() {
        base.remove_file(&name)
    } else if stale(base, &name, locking)? {
        crate::remove::remove_dir_all(base, &name)
    } else {
        Ok(())
    }
}

/// Whether the subdirectory `name` belongs to no live process: its lock
/// can be taken (or, without `flock`, the pid in its name is gone).
fn stale(base: &Dir, name: &OsStr, locking: bool) -> io::Result<bool> {
    if locking {
        let dir = crate::at::open_dir(base, name)?;
        match flock(dir.as_fd(), rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => return Ok(false),
            Err(e) if unsupported(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let pid = name.to_str().and_then(|n| n.split('.').next()?.parse().ok()).filter(|&p| p > 0);
    let gone = |pid| rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH);
    // not a name we make: nobody's
    Ok(pid.and_then(rustix::process::Pid::from_raw).is_none_or(gone))
}

/// Makes and locks `<random>` in the base; where the file system cannot
/// lock, `<pid>.<random>`, by which [`stale`] tells its liveness. The pid
/// is left out where it can be: the path shows in a check's own
/// `/proc/self/mountinfo` (the root of each of its binds).
fn make_own(base: &Dir, locking: bool) -> io::Result<(String, Dir)> {
    let (name, dir) = make_dir(base, || match locking {
        true => random_hex(),
        false => Ok(format!("{}.{}", std::process::id(), random_hex()?)),
    })?;
    if locking {
        flock(dir.as_fd(), rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
    }
    Ok((name, dir))
}

/// Makes a directory of mode 0700 in `parent`, under the first name
/// `name` gives that is free, and opens it (for reading: a lockable
/// descriptor, unlike cap-std's `O_PATH` directories).
fn make_dir(
    parent: &Dir,
    mut name: impl FnMut() -> io::Result<String>,
) -> io::Result<(String, Dir)> {
    let mut builder = cap_std::fs::DirBuilder::new();
    cap_std::fs::DirBuilderExt::mode(&mut builder, 0o700);
    loop {
        let name = name()?;
        match parent.create_dir_with(&name, &builder) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            created => created?,
        }
        let opened = crate::at::open_dir(parent, name.as_ref());
        if opened.is_err() {
            let _ = parent.remove_dir(&name);
        }
        return opened.map(|dir| (name, dir));
    }
}

pub(crate) fn flock(fd: BorrowedFd<'_>, op: rustix::fs::FlockOperation) -> io::Result<()> {
    Ok(rustix::io::retry_on_intr(|| rustix::fs::flock(fd, op))?)
}

/// The filesystem cannot `flock` (then liveness is told by pid).
fn unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::EINVAL))
}

fn random_hex() -> io::Result<String> {
    let mut bytes = [0u8; 8];
    io::Read::read_exact(&mut File::open("/dev/urandom")?, &mut bytes)?;
    Ok(rendergate_core::hex::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn euid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    fn base_in(work: &Path) -> PathBuf {
        std::fs::canonicalize(work).unwrap().join(format!("rendergate-{}", euid()))
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A pid that was ours and is gone.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn the_base_is_made_private_with_a_locked_subdirectory() {
        let work = tempfile::tempdir().unwrap();
        let base = BaseDir::open(work.path()).unwrap();
        assert_eq!(base.path, base_in(work.path()));
        let meta = std::fs::symlink_metadata(&base.path).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o7777, 0o700);
        assert_eq!(meta.uid(), euid());
        let own = names(&base.path);
        assert_eq!(own.len(), 1, "{own:?}");
        // locked, so no pid in its name: it shows in a check's mountinfo
        assert!(own[0].len() == 16 && own[0].bytes().all(|b| b.is_ascii_hexdigit()), "{own:?}");
        assert_eq!(base.own_path(), base.path.join(&own[0]));
        assert_eq!(std::fs::metadata(base.own_path()).unwrap().mode() & 0o7777, 0o700);
        // a clean exit leaves nothing
        drop(base);
        assert!(names(work.path()).is_empty(), "{:?}", names(work.path()));
    }

    #[test]
    fn a_check_directory_is_private_named_and_removed_when_dropped() {
        let work = tempfile::tempdir().unwrap();
        let base = BaseDir::open(work.path()).unwrap();
        let check = base.check_dir().unwrap();
        assert_eq!(check.path().parent(), Some(base.own_path()));
        let meta = std::fs::symlink_metadata(check.path()).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o7777, 0o700);
        check.dir().write("probe", "x").unwrap();
        assert_eq!(std::fs::read_to_string(check.path().join("probe")).unwrap(), "x");
        let path = check.path().to_path_buf();
        drop(check);
        assert!(!path.exists());
        assert!(names(base.own_path()).is_empty());
    }

    #[test]
    fn a_symlink_is_refused_and_not_followed() {
        let work = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), base_in(work.path())).unwrap();
        let err = BaseDir::open(work.path()).unwrap_err();
        assert!(
            err.starts_with(&format!(
                "cannot create a check directory in {}: ",
                work.path().display()
            )),
            "{err}"
        );
        assert!(err.contains("is a symlink; refusing it"), "{err}");
        assert_eq!(names(elsewhere.path()), ["keep"]);
    }

    #[test]
    fn a_file_is_refused() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(base_in(work.path()), "x").unwrap();
        let err = BaseDir::open(work.path()).unwrap_err();
        assert!(err.contains("exists and is not a directory"), "{err}");
    }

    #[test]
    fn a_base_owned_by_someone_else_is_refused() {
        let work = tempfile::tempdir().unwrap();
        let path = base_in(work.path());
        std::fs::DirBuilder::new().mode(0o700).create(&path).unwrap();
        std::fs::write(path.join("theirs"), "x").unwrap();
        if std::os::unix::fs::chown(&path, Some(65534), Some(65534)).is_err() {
            crate::needs::missing("root, to give the base away", "this test");
            return;
        }
        let err = BaseDir::open(work.path()).unwrap_err();
        assert!(
            err.contains(&format!("is owned by uid 65534, not by this process's uid {}", euid())),
            "{err}"
        );
        // nothing of theirs is touched
        assert_eq!(names(&path), ["theirs"]);
    }

    #[test]
    fn a_base_others_can_enter_is_refused() {
        let work = tempfile::tempdir().unwrap();
        let path = base_in(work.path());
        std::fs::DirBuilder::new().mode(0o700).create(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = BaseDir::open(work.path()).unwrap_err();
        assert!(err.contains("has mode 0755, not 0700"), "{err}");
    }

    /// In a setgid parent (an emptyDir with an fsGroup, mode 2777) a base
    /// another gate has just made inherits setgid until its maker's chmod:
    /// it grants nothing, so it is taken (two `check`s started together
    /// raced on it).
    #[test]
    fn a_base_with_only_setgid_beside_0700_is_taken() {
        let work = tempfile::tempdir().unwrap();
        let path = base_in(work.path());
        std::fs::DirBuilder::new().mode(0o700).create(&path).unwrap();
        // setgid with group access is still refused
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o2750)).unwrap();
        let err = BaseDir::open(work.path()).unwrap_err();
        assert!(err.contains("has mode 2750, not 0700"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o2700)).unwrap();
        let base = BaseDir::open(work.path());
        assert!(base.is_ok(), "{:?}", base.err());
    }

    #[test]
    fn start_up_wipes_what_no_live_process_holds() {
        let work = tempfile::tempdir().unwrap();
        let path = base_in(work.path());
        // a live checker in this process
        let live_here = BaseDir::open(work.path()).unwrap();
        let here = live_here.own_path().file_name().unwrap().to_string_lossy().into_owned();
        // a crashed run: its subdirectory with a check directory and a secret in it
        let dead = format!("{}.0123456789abcdef", dead_pid());
        std::fs::create_dir_all(path.join(&dead).join("check")).unwrap();
        std::fs::write(path.join(&dead).join("check/key.pem"), "secret").unwrap();
        // odd entries: never ours
        std::fs::write(path.join("stray-file"), "x").unwrap();
        let target = tempfile::tempdir().unwrap();
        std::fs::write(target.path().join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(target.path(), path.join("stray-link")).unwrap();
        // a live one in another process
        let other = "1.feedfacefeedface";
        std::fs::create_dir(path.join(other)).unwrap();
        let mut holder = hold_lock(&path.join(other));
        std::fs::write(path.join(other).join("busy"), "x").unwrap();

        let base = BaseDir::open(work.path()).unwrap();
        let mine = base.own_path().file_name().unwrap().to_string_lossy().into_owned();
        let mut expected = vec![other.to_owned(), here.clone(), mine.clone()];
        expected.sort();
        assert_eq!(names(&path), expected);
        assert_eq!(names(&path.join(other)), ["busy"]);
        assert_eq!(names(target.path()), ["keep"]);

        // once the other process is gone, the next start-up takes its directory
        holder.kill().unwrap();
        holder.wait().unwrap();
        let again = BaseDir::open(work.path()).unwrap();
        assert!(!path.join(other).exists());
        // dropping one checker keeps the base while others are in it
        drop(again);
        drop(base);
        assert_eq!(names(&path), [here]);
        drop(live_here);
        assert!(!path.exists());
    }

    /// A child process (`sleep`) holding an exclusive lock on `dir`: the
    /// descriptor is opened and locked between fork and exec, without
    /// close-on-exec, so the lock lives exactly as long as the child.
    fn hold_lock(dir: &Path) -> std::process::Child {
        use std::os::unix::{ffi::OsStrExt, process::CommandExt};
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("60");
        // SAFETY: only raw system calls on memory made before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
                if fd < 0 || libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.spawn().unwrap()
    }

    #[test]
    fn a_base_removed_while_waiting_is_made_again() {
        // the shut-down of one checker and the start-up of another, in turn
        let work = tempfile::tempdir().unwrap();
        for _ in 0..20 {
            let a = BaseDir::open(work.path()).unwrap();
            let b = std::thread::spawn({
                let work = work.path().to_path_buf();
                move || BaseDir::open(&work).unwrap()
            });
            drop(a);
            let b = b.join().unwrap();
            assert!(b.own_path().is_dir());
            assert!(b.check_dir().is_ok());
        }
    }
}
