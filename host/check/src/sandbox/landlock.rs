//! Landlock: the only files the check may touch are the check directory,
//! the haproxy binary and what its loader reads; the only place it may
//! write is the check directory.
//!
//! The ruleset is built in the parent with raw system calls (the kernel ABI
//! is small, and the `landlock` crate's `restrict_self` is not meant for a
//! forked child); the child only calls `landlock_restrict_self` on its fd.
//! The check directory's rule is added from the directory's own descriptor
//! (the one the child `fchdir`s to), never from a path.
//!
//! Which files: read+execute on the binary and its ELF interpreter;
//! read-only on exactly the shared objects the loader will open, found as
//! it finds them ([`super::loader`]: run paths, `$ORIGIN`, its cache), and
//! on the loader's cache. A library outside the system directories (a
//! self-built haproxy's private OpenSSL) is granted by its own path, so the
//! loader never falls back to the system copy. The system library
//! directories (`/lib`, `/lib64`, `/usr/lib`, `/usr/lib64`) stay readable
//! too: they hold no secrets, and what a check loads at run time rather
//! than at start (a Lua C module, an NSS or OpenSSL module) must load as
//! it does without the sandbox, or a render passing bare would be refused.
//! `execute` is granted on the binary and the loader only, so nothing else
//! can be `execve`d even though seccomp must allow our own `execve` (mapping
//! a library needs read, not execute). Inside the check's world
//! ([`super::world`]) Landlock grants what the world shows: its read-only
//! parts and stand-ins read, its devices read and write, the scratch `/tmp`
//! read and write (a rule added in the child, where `/tmp` exists).
//!
//! The check directory is readable, and writable as far as HAProxy writes
//! during `-c`: new regular files, written and truncated (3.2 writes an
//! `acme` section's missing account key next to the config; bare, that
//! passes). No directories, links, devices, sockets or removals, so nothing
//! written can lead outside, and the gate removes all of it with the
//! directory. How much a file may hold is bounded by `RLIMIT_FSIZE`
//! ([`super::rlimits`]).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;

pub const FS_EXECUTE: u64 = 1 << 0;
pub const FS_WRITE_FILE: u64 = 1 << 1;
pub const FS_READ_FILE: u64 = 1 << 2;
pub const FS_READ_DIR: u64 = 1 << 3;
pub const FS_MAKE_REG: u64 = 1 << 8;
/// Every filesystem right of ABI 1 (execute … make_sym).
const FS_ABI1: u64 = (1 << 13) - 1;
const FS_REFER: u64 = 1 << 13; // ABI 2
const FS_TRUNCATE: u64 = 1 << 14; // ABI 3
const FS_IOCTL_DEV: u64 = 1 << 15; // ABI 5
const NET_BIND_TCP: u64 = 1 << 0; // ABI 4
const NET_CONNECT_TCP: u64 = 1 << 1; // ABI 4
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0; // ABI 6
const SCOPE_SIGNAL: u64 = 1 << 1; // ABI 6

/// System library directories, readable for what a check loads at run time.
pub const LIBRARY_DIRS: [&str; 4] = ["/lib", "/lib64", "/usr/lib", "/usr/lib64"];
/// What the check may do in its own directory: read, and create, write
/// and truncate regular files.
pub const CHECK_DIR_ACCESS: u64 =
    FS_READ_FILE | FS_READ_DIR | FS_WRITE_FILE | FS_MAKE_REG | FS_TRUNCATE;
/// What the check may do in its scratch `/tmp` (a tmpfs of its own).
pub const SCRATCH_ACCESS: u64 = CHECK_DIR_ACCESS | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR;
const FS_REMOVE_DIR: u64 = 1 << 4;
const FS_REMOVE_FILE: u64 = 1 << 5;
const FS_MAKE_DIR: u64 = 1 << 7;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The kernel's Landlock ABI version, or the errno saying why there is none
/// (ENOSYS: not built in; EOPNOTSUPP: built in but disabled at boot).
pub fn abi() -> Result<u32, i32> {
    // SAFETY: with a NULL attr and size 0 this call only returns the version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOSYS))
    } else {
        Ok(v as u32)
    }
}

/// Every right this ABI can deny, so whatever is not granted is denied.
fn handled(abi: u32) -> RulesetAttr {
    let mut fs = FS_ABI1;
    if abi >= 2 {
        fs |= FS_REFER;
    }
    if abi >= 3 {
        fs |= FS_TRUNCATE;
    }
    if abi >= 5 {
        fs |= FS_IOCTL_DEV;
    }
    let net = if abi >= 4 { NET_BIND_TCP | NET_CONNECT_TCP } else { 0 };
    let scoped = if abi >= 6 { SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL } else { 0 };
    RulesetAttr { handled_access_fs: fs, handled_access_net: net, scoped }
}

/// What one ruleset grants: paths and the rights on each.
#[derive(Debug, Default, Clone)]
pub struct Grants {
    pub rules: Vec<(PathBuf, u64)>,
    /// TCP `bind` left to the network namespace: in the world's own network
    /// only, where it reaches nothing. HAProxy 3.x's `SO_REUSEPORT` probe
    /// binds a stream socket to an ephemeral port, then a second to the
    /// port it got, which no rule by port can foresee.
    pub bind_in_own_network: bool,
}

impl Grants {
    /// The fixed part: the binary, its loader and the libraries the loader
    /// opens, the system library directories. A binary whose headers
    /// cannot be read gets only itself (it then fails to start, and the
    /// check says so).
    pub fn for_binary(binary: &Path) -> Grants {
        Grants::for_closure(binary, super::loader::closure(binary).ok().as_ref())
    }

    /// [`Grants::for_binary`] with the loader's closure already found.
    pub fn for_closure(binary: &Path, closure: Option<&super::loader::Closure>) -> Grants {
        let mut rules = vec![(binary.to_path_buf(), FS_EXECUTE | FS_READ_FILE)];
        if let Some(closure) = closure.cloned() {
            rules.extend(closure.interpreter.map(|i| (i, FS_EXECUTE | FS_READ_FILE)));
            rules.extend(closure.libraries.into_iter().map(|l| (l, FS_READ_FILE)));
            rules.extend(closure.data.into_iter().map(|d| (d, FS_READ_FILE)));
        }
        for dir in LIBRARY_DIRS {
            rules.push((dir.into(), FS_READ_FILE | FS_READ_DIR));
        }
        Grants { rules, bind_in_own_network: false }
    }

    /// Adds what `world` shows: its read-only parts read, its devices read
    /// and write (its root, a tmpfs made in the child, is granted there:
    /// [`grant_world`]).
    ///
    /// Every rule here also grants `TRUNCATE`, which can do nothing in this
    /// world: all it shows is mounted read-only (truncating is `EROFS`) but
    /// the check directory, the scratch `/tmp` and the devices (truncating a
    /// device is `EINVAL`). It matters to the cost of every `open`: Landlock
    /// looks `TRUNCATE` up on each (for a later `ftruncate`), and walks from
    /// the file up until a rule grants everything it looked up. Granted
    /// nowhere, every `open` walked up to the root, across the world's
    /// mounts: 0.3 ms of a check's HAProxy run, which opens some 300 files
    /// (the CA store twice over). The config-directory world, which shows
    /// the host's own files, grants no `TRUNCATE` outside the render.
    pub fn with_world(mut self, world: &super::world::World) -> Grants {
        self.bind_in_own_network = true;
        for path in world.exposed() {
            self.rules.push((path.clone(), FS_READ_FILE | FS_READ_DIR));
        }
        for device in world.devices() {
            self.rules.push((device.clone(), FS_READ_FILE | FS_WRITE_FILE | FS_IOCTL_DEV));
        }
        for (_, access) in &mut self.rules {
            *access |= FS_TRUNCATE;
        }
        self
    }
}

impl Grants {
    /// Adds the config-directory world's read-only list and devices
    /// ([`super::world::host_parts`]): a host without namespaces.
    pub fn with_host_parts(mut self, options: &super::world::WorldOptions) -> Grants {
        let (reads, devices) = super::world::host_parts(options);
        self.rules.extend(reads.into_iter().map(|path| (path, FS_READ_FILE | FS_READ_DIR)));
        for device in devices {
            self.rules.push((device, FS_READ_FILE | FS_WRITE_FILE | FS_IOCTL_DEV));
        }
        self
    }
}

/// The world's scratch directories, tmpfs mounted in the child.
const SCRATCH: [&std::ffi::CStr; 2] = [c"/tmp", c"/dev/shm"];

/// In the child, in the world's root: grants the root read-only (a tmpfs
/// made in the child: its directories and stand-ins), the scratch
/// directories, and `/proc` read-only where it is the check's own (a `proc`
/// mount of its PID namespace; not the host's `/proc/self` shown for the
/// loader alone). 0 or an errno.
pub fn grant_world(ruleset_fd: RawFd, abi: u32) -> i32 {
    let e = grant_dir(ruleset_fd, abi, c"/", FS_READ_FILE | FS_READ_DIR | FS_TRUNCATE);
    if e != 0 {
        return e;
    }
    for dir in SCRATCH {
        let e = grant_dir(ruleset_fd, abi, dir, SCRATCH_ACCESS);
        if e != 0 {
            return e;
        }
    }
    if own_proc() {
        return grant_dir(ruleset_fd, abi, c"/proc", FS_READ_FILE | FS_READ_DIR);
    }
    0
}

/// Whether `/proc` is a `proc` file system (mounted for the check's own
/// processes). Raw system call on a buffer on the stack.
fn own_proc() -> bool {
    const PROC_SUPER_MAGIC: libc::c_long = 0x9fa0;
    // SAFETY: a zeroed plain struct, written by the kernel.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a constant C string and a valid buffer.
    unsafe { libc::statfs(c"/proc".as_ptr(), &mut fs) == 0 && fs.f_type == PROC_SUPER_MAGIC }
}

fn grant_dir(ruleset_fd: RawFd, abi: u32, dir: &std::ffi::CStr, access: u64) -> i32 {
    // SAFETY: a constant C string; the fd is closed below.
    let fd =
        unsafe { libc::open(dir.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return errno();
    }
    let access = access & handled(abi).handled_access_fs;
    let rule = PathBeneathAttr { allowed_access: access, parent_fd: fd };
    // SAFETY: rule is a valid packed struct; both fds are open.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset_fd,
            RULE_PATH_BENEATH,
            &rule as *const PathBeneathAttr,
            0u32,
        )
    };
    let e = if r != 0 { errno() } else { 0 };
    // SAFETY: our own fd.
    unsafe { libc::close(fd) };
    e
}

/// Builds a ruleset fd (close-on-exec) granting `grants` plus
/// [`CHECK_DIR_ACCESS`] on the check directory, given by its descriptor. Paths that do not exist are
/// skipped (a host without `/lib64`).
pub fn ruleset(abi: u32, grants: &Grants, check_dir: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut attr = handled(abi);
    if grants.bind_in_own_network {
        attr.handled_access_net &= !NET_BIND_TCP;
    }
    // SAFETY: attr is a valid, fully initialised struct of the size given;
    // unknown trailing fields are zero, which older kernels accept.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us; nobody else owns it.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    for (path, access) in &grants.rules {
        let Some(target) = open_path(path)? else {
            continue;
        };
        let is_dir = target.1;
        // a file only takes file rights; READ_DIR on a file is EINVAL
        let access = if is_dir { *access } else { *access & !FS_READ_DIR };
        add_rule(&ruleset, target.0.as_raw_fd(), access & attr.handled_access_fs)
            .map_err(|e| io::Error::new(e.kind(), format!("rule for {}: {e}", path.display())))?;
    }
    if !is_directory(check_dir.as_raw_fd())? {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the check directory's descriptor is not a directory",
        ));
    }
    add_rule(&ruleset, check_dir.as_raw_fd(), CHECK_DIR_ACCESS & attr.handled_access_fs)
        .map_err(|e| io::Error::new(e.kind(), format!("rule for the check directory: {e}")))?;
    Ok(ruleset)
}

/// One `path_beneath` rule: `access` on what `parent_fd` (any descriptor,
/// `O_PATH` included) refers to and everything beneath it.
fn add_rule(ruleset: &OwnedFd, parent_fd: RawFd, access: u64) -> io::Result<()> {
    let rule = PathBeneathAttr { allowed_access: access, parent_fd };
    // SAFETY: rule is a valid packed struct; both fds are open.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &rule as *const PathBeneathAttr,
            0u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn is_directory(fd: RawFd) -> io::Result<bool> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; st is a valid out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

/// `O_PATH` handle (following symlinks: the rule is on the real file) and
/// whether it is a directory; `None` when the path does not exist.
fn open_path(path: &Path) -> io::Result<Option<(OwnedFd, bool)>> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is NUL-terminated.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::NotFound { Ok(None) } else { Err(e) };
    }
    // SAFETY: open returned a fresh fd.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let is_dir = is_directory(fd.as_raw_fd())?;
    Ok(Some((fd, is_dir)))
}

/// In the child: enter the ruleset's domain. Returns 0 or an errno. Raw
/// system call only (async-signal-safe).
pub fn restrict_self(ruleset_fd: RawFd) -> i32 {
    // SAFETY: a plain system call on an fd we own.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset_fd, 0u32) } != 0 {
        return errno();
    }
    0
}

pub(super) fn errno() -> i32 {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loader_and_its_libraries_are_granted_by_their_own_paths() {
        let grants = Grants::for_binary(Path::new("/bin/sh"));
        let right = |p: &Path| grants.rules.iter().find(|(r, _)| r == p).map(|(_, a)| *a);
        assert_eq!(right(Path::new("/bin/sh")), Some(FS_EXECUTE | FS_READ_FILE));
        let closure = crate::sandbox::loader::closure(Path::new("/bin/sh")).unwrap();
        let interp = closure.interpreter.unwrap();
        assert_eq!(right(&interp), Some(FS_EXECUTE | FS_READ_FILE));
        assert!(!closure.libraries.is_empty());
        for lib in &closure.libraries {
            assert_eq!(right(lib), Some(FS_READ_FILE), "{}", lib.display());
        }
        assert_eq!(right(Path::new(crate::sandbox::loader::LD_SO_CACHE)), Some(FS_READ_FILE));
        // nothing else may be executed
        let executable: Vec<_> = grants.rules.iter().filter(|(_, a)| a & FS_EXECUTE != 0).collect();
        assert_eq!(executable.len(), 2, "{executable:?}");
        // a file that is no ELF: itself only, and the system directories
        let text = Grants::for_binary(Path::new("/etc/hostname"));
        assert_eq!(text.rules.len(), 1 + LIBRARY_DIRS.len());
    }

    #[test]
    fn handled_rights_grow_with_the_abi() {
        assert_eq!(handled(1).handled_access_fs, FS_ABI1);
        assert_eq!(handled(1).scoped, 0);
        assert_eq!(handled(3).handled_access_fs, FS_ABI1 | FS_REFER | FS_TRUNCATE);
        let v7 = handled(7);
        assert_eq!(v7.handled_access_net, NET_BIND_TCP | NET_CONNECT_TCP);
        assert_eq!(v7.scoped, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL);
        assert_eq!(v7.handled_access_fs & FS_IOCTL_DEV, FS_IOCTL_DEV);
    }

    #[test]
    fn a_ruleset_builds_on_this_host_and_skips_missing_paths() {
        let Ok(abi) = abi() else { return };
        let dir = tempfile::tempdir().unwrap();
        let mut grants = Grants::for_binary(Path::new("/bin/sh"));
        grants.rules.push(("/does/not/exist".into(), FS_READ_FILE));
        let handle = std::fs::File::open(dir.path()).unwrap();
        ruleset(abi, &grants, std::os::fd::AsFd::as_fd(&handle)).unwrap();
        // the check directory is given as a directory, never as a file
        let file = std::fs::File::open("/bin/sh").unwrap();
        let err = ruleset(abi, &grants, std::os::fd::AsFd::as_fd(&file)).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }
}
