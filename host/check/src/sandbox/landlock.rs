//! Landlock: the only files the check may touch are the check directory,
//! the haproxy binary and what its loader reads, and the world's grants;
//! the only places it may write are the check directory and, in a world,
//! its scratch `/tmp`, `/dev/shm` and devices.
//!
//! The ruleset is built in the parent with the `landlock` crate, handling
//! every right the kernel's ABI has (whatever is not granted is denied);
//! the forked child only adds the rules of its own world's tmpfs mounts
//! and calls `landlock_restrict_self` on the ruleset's descriptor, raw
//! system calls on memory prepared before the fork (the crate's
//! `restrict_self` consumes a ruleset the child only has a copy of).
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

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, make_bitflags,
};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// Rights on files and directories.
pub type Rights = BitFlags<AccessFs>;

const READ: Rights = make_bitflags!(AccessFs::{ReadFile | ReadDir});
const RUN: Rights = make_bitflags!(AccessFs::{Execute | ReadFile});
const DEVICE: Rights = make_bitflags!(AccessFs::{ReadFile | WriteFile | IoctlDev});
/// System library directories, readable for what a check loads at run time.
pub const LIBRARY_DIRS: [&str; 4] = ["/lib", "/lib64", "/usr/lib", "/usr/lib64"];
/// What the check may do in its own directory: read, and create, write
/// and truncate regular files.
pub const CHECK_DIR_ACCESS: Rights =
    make_bitflags!(AccessFs::{ReadFile | ReadDir | WriteFile | MakeReg | Truncate});
/// What the check may do in its scratch `/tmp` (a tmpfs of its own).
pub const SCRATCH_ACCESS: Rights = make_bitflags!(AccessFs::{
    ReadFile | ReadDir | WriteFile | MakeReg | Truncate | RemoveDir | RemoveFile | MakeDir
});

/// The kernel's Landlock ABI version, or the errno saying why there is none
/// (ENOSYS: not built in; EOPNOTSUPP: built in but disabled at boot), which
/// the crate's `ABI::new_current` does not tell apart.
pub fn abi() -> Result<u32, i32> {
    const CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a NULL attr and size 0 this call only returns the version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if v < 0 { Err(super::errno()) } else { Ok(v as u32) }
}

/// The newest ABI this gate knows: a newer kernel's rights are handled as
/// this one's, so a right added later (say, on Unix sockets by path) never
/// fails a check the gate was not written for.
const KNOWN: u32 = 7;

/// The ABI whose rights a ruleset handles on a kernel of ABI `abi`.
fn version(abi: u32) -> ABI {
    ABI::from(abi.min(KNOWN) as i32)
}

/// Every file right this ABI can deny, so whatever is not granted is denied.
fn handled(abi: u32) -> Rights {
    AccessFs::from_all(version(abi))
}

/// What one ruleset grants: paths and the rights on each.
#[derive(Debug, Default, Clone)]
pub struct Grants {
    pub rules: Vec<(PathBuf, Rights)>,
    /// TCP `bind` left to the network namespace: in the world's own network
    /// only, where it reaches nothing. HAProxy 3.x's `SO_REUSEPORT` probe
    /// binds a stream socket to an ephemeral port, then a second to the
    /// port it got, which no rule by port can foresee.
    pub bind_in_own_network: bool,
}

impl Grants {
    /// The fixed part: the binary, its loader and the libraries the loader
    /// opens (its `closure`), the system library directories. A binary
    /// whose headers cannot be read (no closure) gets only itself (it then
    /// fails to start, and the check says so).
    pub fn for_closure(binary: &Path, closure: Option<&super::loader::Closure>) -> Grants {
        let mut rules = vec![(binary.to_path_buf(), RUN)];
        if let Some(closure) = closure {
            rules.extend(closure.interpreter.iter().map(|i| (i.clone(), RUN)));
            let read = closure.libraries.iter().chain(&closure.data);
            rules.extend(read.map(|l| (l.clone(), AccessFs::ReadFile.into())));
        }
        rules.extend(LIBRARY_DIRS.map(|dir| (dir.into(), READ)));
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
        self.rules.extend(world.exposed().into_iter().map(|path| (path, READ)));
        self.rules.extend(world.devices().into_iter().map(|device| (device, DEVICE)));
        for (_, access) in &mut self.rules {
            *access |= AccessFs::Truncate;
        }
        self
    }

    /// Adds the config-directory world's read-only list and devices
    /// ([`super::world::host_parts`]): a host without namespaces.
    pub fn with_host_parts(mut self, options: &super::world::WorldOptions) -> Grants {
        let (reads, devices) = super::world::host_parts(options);
        self.rules.extend(reads.into_iter().map(|path| (path, READ)));
        self.rules.extend(devices.into_iter().map(|device| (device, DEVICE)));
        self
    }
}

/// In the child, in the world's root: grants the root read-only (a tmpfs
/// made in the child: its directories and stand-ins), the scratch
/// directories, and `/proc` read-only where it is the check's own (a `proc`
/// mount of its PID namespace; not the host's `/proc/self` shown for the
/// loader alone), and `render`, the render's own tmpfs where it has one,
/// as the check directory. 0 or an errno.
pub fn grant_world(ruleset_fd: RawFd, abi: u32, render: Option<&std::ffi::CStr>) -> i32 {
    // fixed arrays and options: nothing allocated in the child
    let root = [(c"/", READ | AccessFs::Truncate)];
    let proc = own_proc().then_some((c"/proc", READ));
    let scratch = super::world::SCRATCH.map(|dir| (dir, SCRATCH_ACCESS));
    let render = render.map(|dir| (dir, CHECK_DIR_ACCESS));
    let mut dirs = root.into_iter().chain(proc).chain(scratch).chain(render);
    super::errno_of(dirs.try_for_each(|(dir, access)| grant_dir(ruleset_fd, abi, dir, access)))
}

/// Whether `/proc` is a `proc` file system (mounted for the check's own
/// processes).
fn own_proc() -> bool {
    rustix::fs::statfs(c"/proc").is_ok_and(|fs| fs.f_type == rustix::fs::PROC_SUPER_MAGIC)
}

/// In the child: one rule, by a raw `landlock_add_rule` on memory of its own
/// (the crate's rules are built before the fork).
fn grant_dir(
    ruleset_fd: RawFd,
    abi: u32,
    dir: &std::ffi::CStr,
    access: Rights,
) -> rustix::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd =
        rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const RULE_PATH_BENEATH: libc::c_int = 1;
    let rule = PathBeneathAttr {
        allowed_access: (access & handled(abi)).bits(),
        parent_fd: fd.as_raw_fd(),
    };
    // SAFETY: rule is a valid packed struct; both fds are open. No crate
    // makes this call on a descriptor it does not own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset_fd,
            RULE_PATH_BENEATH,
            &rule as *const PathBeneathAttr,
            0u32,
        )
    };
    if r != 0 { Err(rustix::io::Errno::from_raw_os_error(super::errno())) } else { Ok(()) }
}

/// Builds a ruleset fd (close-on-exec) granting `grants` plus
/// [`CHECK_DIR_ACCESS`] on the check directory, given by its descriptor.
/// Paths that do not exist are skipped (a host without `/lib64`).
pub fn ruleset(abi: u32, grants: &Grants, check_dir: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let failed = |what: &str, e: RulesetError| io::Error::other(format!("{what}: {e}"));
    let version = version(abi);
    let handled_fs = handled(abi);
    let mut created =
        handling(version, grants.bind_in_own_network).map_err(|e| failed("landlock ruleset", e))?;
    for (path, access) in &grants.rules {
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            Err(landlock::PathFdError::OpenCall { source, .. })
                if source.kind() == io::ErrorKind::NotFound =>
            {
                continue;
            }
            Err(e) => return Err(io::Error::other(format!("rule for {}: {e}", path.display()))),
        };
        // a file only takes file rights; READ_DIR on a file is EINVAL
        let access = match is_directory(fd.as_fd())? {
            true => *access,
            false => *access & AccessFs::from_file(version),
        };
        created = created
            .add_rule(PathBeneath::new(fd, access & handled_fs))
            .map_err(|e| failed(&format!("rule for {}", path.display()), e))?;
    }
    if !is_directory(check_dir)? {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the check directory's descriptor is not a directory",
        ));
    }
    created = created
        .add_rule(PathBeneath::new(check_dir, CHECK_DIR_ACCESS & handled_fs))
        .map_err(|e| failed("rule for the check directory", e))?;
    Option::<OwnedFd>::from(created).ok_or_else(|| io::Error::other("landlock gave no ruleset"))
}

/// An empty ruleset handling exactly what ABI `version` has (none of it may
/// be dropped silently), but TCP `bind` when `bind_in_own_network`.
fn handling(version: ABI, bind_in_own_network: bool) -> Result<RulesetCreated, RulesetError> {
    let mut net = AccessNet::from_all(version);
    if bind_in_own_network {
        net.remove(AccessNet::BindTcp);
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(version))?;
    if !net.is_empty() {
        ruleset = ruleset.handle_access(net)?;
    }
    let scopes = Scope::from_all(version);
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes)?;
    }
    ruleset.create()
}

fn is_directory(fd: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(rustix::fs::fstat(fd)?.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

/// In the child: enter the ruleset's domain. Returns 0 or an errno. Raw
/// system call only: the child holds a copy of the ruleset's descriptor,
/// not the crate's ruleset.
pub fn restrict_self(ruleset_fd: RawFd) -> i32 {
    // SAFETY: a plain system call on an fd we own.
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset_fd, 0u32) };
    if r != 0 { super::errno() } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::loader;

    fn for_binary(binary: &Path) -> Grants {
        Grants::for_closure(binary, loader::closure(binary).ok().as_ref())
    }

    #[test]
    fn the_loader_and_its_libraries_are_granted_by_their_own_paths() {
        let grants = for_binary(Path::new("/bin/sh"));
        let right = |p: &Path| grants.rules.iter().find(|(r, _)| r == p).map(|(_, a)| *a);
        assert_eq!(right(Path::new("/bin/sh")), Some(RUN));
        let closure = loader::closure(Path::new("/bin/sh")).unwrap();
        let interp = closure.interpreter.unwrap();
        assert_eq!(right(&interp), Some(RUN));
        assert!(!closure.libraries.is_empty());
        for lib in &closure.libraries {
            assert_eq!(right(lib), Some(AccessFs::ReadFile.into()), "{}", lib.display());
        }
        assert_eq!(right(Path::new(loader::LD_SO_CACHE)), Some(AccessFs::ReadFile.into()));
        // nothing else may be executed
        let executable: Vec<_> =
            grants.rules.iter().filter(|(_, a)| a.contains(AccessFs::Execute)).collect();
        assert_eq!(executable.len(), 2, "{executable:?}");
        // a file that is no ELF: itself only, and the system directories
        let text = for_binary(Path::new("/etc/hostname"));
        assert_eq!(text.rules.len(), 1 + LIBRARY_DIRS.len());
    }

    #[test]
    fn handled_rights_grow_with_the_abi() {
        assert!(!handled(1).contains(AccessFs::Refer));
        assert!(handled(2).contains(AccessFs::Refer) && !handled(2).contains(AccessFs::Truncate));
        assert!(handled(3).contains(AccessFs::Truncate));
        assert!(handled(5).contains(AccessFs::IoctlDev));
        assert!(SCRATCH_ACCESS.contains(CHECK_DIR_ACCESS));
        // a kernel newer than the gate: its newer rights are not handled
        assert_eq!(handled(99), handled(KNOWN));
    }

    #[test]
    fn a_ruleset_builds_on_this_host_and_skips_missing_paths() {
        let Ok(abi) = abi() else { return };
        let dir = tempfile::tempdir().unwrap();
        let mut grants = for_binary(Path::new("/bin/sh"));
        grants.rules.push(("/does/not/exist".into(), AccessFs::ReadFile.into()));
        let handle = std::fs::File::open(dir.path()).unwrap();
        ruleset(abi, &grants, handle.as_fd()).unwrap();
        // the check directory is given as a directory, never as a file
        let file = std::fs::File::open("/bin/sh").unwrap();
        let err = ruleset(abi, &grants, file.as_fd()).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }
}
