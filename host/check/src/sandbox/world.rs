//! The check's world: what HAProxy finds at each path, built like a pod's
//! (docs/checking.md, "The check's world"). As in bubblewrap, a world is a
//! list of operations ([`Op`]): planned once per binary in the parent
//! ([`World::build`]), applied by one loop in the forked child with raw
//! system calls only ([`World::enter`]); a failed one is named by its index.
//!
//! The root is a tmpfs the child mounts on an empty directory in the
//! checker's private directory, and fills: empty mount points, the symlinks
//! the host has on the way to each exposed path (`/lib64 -> usr/lib64`), and
//! the stand-ins (`/etc/hosts`, `/etc/resolv.conf`, `/etc/passwd`,
//! `/etc/group`, `/etc/nsswitch.conf`).
//! In fresh user and mount namespaces the child binds onto it, read-only,
//! the public parts a check needs (the binary, the directories its loader
//! loads from — glibc opens more there at run time: `libgcc_s`, NSS and
//! gconv modules, OpenSSL's providers — and the loader's own files, the
//! system CA store, Lua's module directories, the stock files a packaged
//! HAProxy names, `--check-read` paths) and the devices; at the config
//! directory (`--config-dir`) the render: a bounded tmpfs of the child's own,
//! handed to the gate, which writes the render into it (so the check's
//! `mountinfo` shows no host path of it), or, for a child that hands
//! nothing over, the check directory bound there; writable; a bounded
//! tmpfs at `/tmp` and one at `/dev/shm`; where the binary's loader expands
//! `$ORIGIN` (it reads `/proc/self/exe`), its own `/proc/<pid>` at
//! `/proc/self`, read-only, and otherwise nothing of `/proc`; then it makes that tmpfs its root (`chroot`, or `pivot_root` where a
//! container refuses `chroot`, in its own mount namespace; see
//! [`World::enter`]'s steps). Every other path does not exist: a render cannot
//! learn whether a host path exists, nor what kind of file it is.
//!
//! The uid and gid are mapped to themselves, so HAProxy runs as the ids bare
//! `haproxy -c` runs as on this host.

use super::errno_of;
use rustix::mount::{MountFlags, mount, mount_bind};
use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Where HAProxy's pods keep the render (HAPTIC's, and a packaged HAProxy's).
pub const DEFAULT_CONFIG_DIR: &str = "/etc/haproxy";

/// The system CA store and OpenSSL's own directory (`@system-ca`, a
/// `ca-file` by path): always visible, as on a pod. Never `/etc/ssl` whole:
/// `/etc/ssl/private` holds the host's keys.
const CA_STORE: [&str; 8] = [
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/usr/lib/ssl",
    "/usr/share/ca-certificates",
    "/usr/local/share/ca-certificates",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust/extracted",
    "/etc/pki/tls/openssl.cnf",
];
/// Lua's module directories (`require` from a `lua-load`ed script).
const LUA_DIRS: [&str; 6] = [
    "/usr/share/lua",
    "/usr/local/share/lua",
    "/usr/lib/lua",
    "/usr/local/lib/lua",
    "/usr/lib/x86_64-linux-gnu/lua",
    "/usr/lib/aarch64-linux-gnu/lua",
];
/// Stock files a packaged HAProxy's default config names.
const STOCK: [&str; 1] = ["/etc/haproxy/errors"];
/// Devices a config may name (`errorfile 408 /dev/null`, Lua's randomness).
const DEVICES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"];
/// The host's own files a check reads where it has no world of its own
/// (the config-directory world, [`host_parts`]); a world shows stand-ins.
const HOST_FILES: [&str; 7] = [
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/passwd",
    "/etc/group",
];
/// The scratch tmpfs mounts, over what the root has at their place.
pub const SCRATCH: [&CStr; 2] = [c"/tmp", c"/dev/shm"];
/// Each scratch mount's own flags, beside `nosuid,nodev`: `/dev/shm`
/// without exec, as a container runtime mounts it.
const SCRATCH_FLAGS: [MountFlags; 2] = [MountFlags::empty(), MountFlags::NOEXEC];
/// The scratch `/tmp`: bounded, discarded with the namespace.
const TMP_OPTIONS: &CStr = c"size=64m,nr_inodes=4096,mode=1777";
/// The world's root: its directories, mount points and stand-ins (the
/// accounts of a large directory among them).
const ROOT_OPTIONS: &CStr = c"size=16m,nr_inodes=4096,mode=755";
/// What the render's own tmpfs holds beside the render itself: the largest
/// file a check may write (its second run's file-size bound, so that a file
/// past it meets that bound, not a full tmpfs), and room for what else
/// HAProxy writes there during `-c` (3.2's `acme` account key), as much as
/// the scratch `/tmp` holds. The tmpfs is memory: the gate's, as its own
/// writes are. A run that fills it is not judged
/// (`crate::base::CheckDir::room_filled`).
pub const RENDER_BESIDE: u64 = super::rlimits::FILE_SIZE_MAX + (64 << 20);

/// The render's own tmpfs: private to the gate's user, as large as the
/// render may be (`--max-render-size`, `--max-render-files`, each of its
/// files in a directory of its own at most), and [`RENDER_BESIDE`].
fn render_options(room: &crate::limits::RenderLimits) -> CString {
    let size = room.bytes.saturating_add(RENDER_BESIDE) >> 10;
    let inodes = room.files.saturating_mul(2).saturating_add(4096);
    CString::new(format!("size={size}k,nr_inodes={inodes},mode=700")).expect("no NUL in numbers")
}
/// How many symlinks one exposed path may go through (the kernel's own bound).
const MAX_LINKS: usize = 40;
/// The largest stock file copied into each check directory.
const MAX_STOCK_FILE: u64 = 1 << 20;

/// What the world holds besides the render: the operator's choices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldOptions {
    /// Where the render is laid out and HAProxy runs (`--config-dir`).
    pub config_dir: PathBuf,
    /// More host paths HAProxy may read (`--check-read`).
    pub reads: Vec<PathBuf>,
    /// A directory with the `passwd` and `group` HAProxy sees (`--accounts`);
    /// the host's own names and ids when unset.
    pub accounts: Option<PathBuf>,
    /// The host name HAProxy sees (`--check-hostname`); the host's when unset.
    pub hostname: Option<String>,
    /// The stock files of the fleet's HAProxy image, as its config
    /// directory holds them (`--stock-dir`): laid under each render's own,
    /// in either world. Unset: the host's packaged ones under the config
    /// directory ([`STOCK`]).
    pub stock_dir: Option<PathBuf>,
    /// More names HAProxy resolves, in hosts(5) form (`--check-hosts`): the
    /// pods' own (`hostAliases`), added to the world's `/etc/hosts`.
    pub hosts: Option<PathBuf>,
    /// How large a render may be, so its own tmpfs holds it (the
    /// checker's `--max-render-size` and `--max-render-files`).
    pub render_room: crate::limits::RenderLimits,
}

impl Default for WorldOptions {
    fn default() -> Self {
        WorldOptions {
            config_dir: DEFAULT_CONFIG_DIR.into(),
            reads: Vec::new(),
            accounts: None,
            hostname: None,
            stock_dir: None,
            hosts: None,
            render_room: crate::limits::RenderLimits::default(),
        }
    }
}

impl WorldOptions {
    /// Refuses what cannot make a world: a config directory that is not an
    /// absolute, plain path, or a read path that is not absolute.
    pub fn validate(&self) -> Result<(), String> {
        if !plain_absolute(&self.config_dir) || self.config_dir == Path::new("/") {
            return Err(format!(
                "--config-dir {}: must be an absolute path without `.` or `..`, and not /",
                self.config_dir.display()
            ));
        }
        for read in &self.reads {
            if !plain_absolute(read) {
                return Err(format!(
                    "--check-read {}: must be an absolute path without `.` or `..`",
                    read.display()
                ));
            }
            if read.starts_with(&self.config_dir) || self.config_dir.starts_with(read) {
                return Err(format!(
                    "--check-read {}: overlaps --config-dir {}, where the render is laid out",
                    read.display(),
                    self.config_dir.display()
                ));
            }
        }
        if let Some(hosts) = &self.hosts
            && let Err(e) = std::fs::File::open(hosts)
        {
            return Err(format!("--check-hosts {}: {e}", hosts.display()));
        }
        if let Some(name) = &self.hostname
            && (name.is_empty() || name.len() > 64 || name.bytes().any(|b| b == 0 || b == b'\n'))
        {
            return Err(format!("--check-hostname {name:?}: 1 to 64 bytes, no NUL or newline"));
        }
        Ok(())
    }
}

/// The config-directory world's read-only list, for a host without
/// namespaces (docs/checking.md): the public parts a world would bind
/// (the CA store, Lua's directories, the stock files outside the config
/// directory, `--check-read`) and the host's own name-service files, which
/// a world replaces with stand-ins; then the devices. The binary and its
/// loader's closure are granted beside these.
pub fn host_parts(options: &WorldOptions) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut reads: Vec<PathBuf> = public_parts(options).collect();
    reads.extend(HOST_FILES.iter().map(PathBuf::from));
    reads.extend(options.reads.iter().cloned());
    (reads, DEVICES.iter().map(PathBuf::from).collect())
}

/// The CA store, Lua's directories and the packaged stock paths outside the
/// config directory, shown read-only in either world (stock files under the
/// render's own directory are copied: the render's files win).
fn public_parts(options: &WorldOptions) -> impl Iterator<Item = PathBuf> + '_ {
    let stock = STOCK.iter().filter(|p| !Path::new(p).starts_with(&options.config_dir));
    CA_STORE.iter().chain(&LUA_DIRS).chain(stock).map(PathBuf::from)
}

fn plain_absolute(path: &Path) -> bool {
    path.is_absolute()
        && path.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// One operation of a world, in the order [`World::enter`] applies them
/// in the child: the whole world is this list, made in the parent.
#[derive(Debug)]
pub enum Op {
    /// A tmpfs: the world's root (read-only at [`Op::ReadOnly`]), the
    /// scratch `/tmp` and `/dev/shm`.
    Tmpfs { target: CString, flags: MountFlags, options: &'static CStr },
    /// An empty directory (0755), on the way to a shown path or a mount point.
    Dir { path: CString },
    /// A file (0444) with this content: a stand-in, or empty to bind onto.
    File { path: CString, content: Vec<u8> },
    /// A symlink the host has on the way to a shown path (`/lib64 -> usr/lib64`).
    Symlink { path: CString, target: CString },
    /// A host path shown: remounted read-only with these flags (its own
    /// file system's locked flags kept), or a device as it is (`None`).
    Bind { source: CString, target: CString, remount: Option<MountFlags> },
    /// The check's own `/proc` (a PID namespace's). A container whose
    /// `/proc` hides parts of the host's refuses a fresh one (EPERM): then
    /// the world has none, as without a PID namespace.
    Proc { target: CString },
    /// This process's `/proc/<pid>` at `/proc/self`, read-only, for the
    /// loader's `$ORIGIN`; skipped where [`Op::Proc`] mounted a `/proc`.
    ProcSelf { target: CString, remount: MountFlags },
    /// The render, where a pod keeps it: a tmpfs of its own, handed to the
    /// gate to write the render into ([`World::enter`]); for a child that
    /// hands nothing over, the working directory (the check directory)
    /// bound there.
    Render { target: CString, options: CString },
    /// Read-only from here on (the root, last).
    ReadOnly { target: CString, flags: MountFlags },
}

impl Op {
    /// In the child: `own_proc`, an [`Op::Proc`] mounted; `own_render`, the
    /// render gets a tmpfs of its own. System calls only, on what the
    /// parent prepared.
    fn apply(&self, own_proc: &mut bool, own_render: bool) -> rustix::io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        match self {
            Op::Tmpfs { target, flags, options } => {
                mount(c"tmpfs", target.as_c_str(), c"tmpfs", *flags, *options)
            }
            Op::Dir { path } => rustix::fs::mkdir(path.as_c_str(), Mode::from_raw_mode(0o755)),
            Op::File { path, content } => {
                let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
                let file = rustix::fs::open(path.as_c_str(), flags, Mode::from_raw_mode(0o444))?;
                write_all(&file, content)
            }
            Op::Symlink { path, target } => rustix::fs::symlink(target.as_c_str(), path.as_c_str()),
            Op::Bind { source, target, remount } => {
                mount_bind(source, target)?;
                remount.map_or(Ok(()), |flags| read_only(target, flags))
            }
            Op::Proc { target } => {
                let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
                // Only the processes HAProxy may trace are listed: not the
                // init, a copy of the gate outside the world's root, whose
                // `mountinfo` would show the host's mounts. `hidepid=4`
                // (Linux 5.8) exempts no group; `hidepid=2`, before it,
                // shows every process to group 0.
                let proc = |options: &CStr| {
                    let flags = flags | MountFlags::RDONLY;
                    mount(c"proc", target.as_c_str(), c"proc", flags, Some(options))
                };
                let mounted = match proc(c"hidepid=4") {
                    Err(rustix::io::Errno::INVAL) => proc(c"hidepid=2"),
                    mounted => mounted,
                };
                match mounted {
                    Ok(()) => {
                        *own_proc = true;
                        Ok(())
                    }
                    Err(rustix::io::Errno::PERM) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Op::ProcSelf { .. } if *own_proc => Ok(()),
            Op::ProcSelf { target, remount } => {
                mount_bind(c"/proc/self", target)?;
                read_only(target, *remount)
            }
            Op::Render { target, options } if own_render => {
                let flags = MountFlags::NOSUID | MountFlags::NODEV;
                mount(c"tmpfs", target.as_c_str(), c"tmpfs", flags, options.as_c_str())
            }
            Op::Render { target, .. } => mount_bind(c".", target),
            Op::ReadOnly { target, flags } => read_only(target, *flags),
        }
    }
}

/// A stock file under the config directory: copied into each check
/// directory unless the render has a file at its place.
#[derive(Debug, Clone)]
pub struct StockFile {
    /// Relative to the config directory.
    pub relative: PathBuf,
    pub content: Vec<u8>,
}

/// A world, prepared: its operations, and what they show.
#[derive(Debug)]
pub struct World {
    /// The mount point of the world's root tmpfs: the checker's own
    /// directory, covered only in the child's mount namespace.
    root: CString,
    /// The world, applied in order in the child's own mount namespace.
    ops: Vec<Op>,
    config_inside: CString,
    /// `/proc/self/uid_map` and friends, written after `unshare`.
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    hostname: String,
    stock: Vec<StockFile>,
    options: WorldOptions,
}

/// What a path is on the host, once its symlinks are followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Device,
}

impl World {
    /// Plans the world with its root mounted over `private` (the checker's
    /// own directory, owner-only) in the child's mount namespace, so that
    /// nothing is made on the host's disk, for checks running `binary`,
    /// whose loader loads and reads `closure` (the libraries' directories
    /// are shown whole).
    pub fn build(
        private: &Path,
        binary: &Path,
        closure: &super::loader::Closure,
        options: &WorldOptions,
    ) -> io::Result<World> {
        options.validate().map_err(io::Error::other)?;
        let mut skeleton = Skeleton::new(private)?;
        // the scratch tmpfs mounts first, over the root's /tmp and /dev/shm:
        // what lies under them is made once they are mounted
        for (dir, own_flags) in SCRATCH.into_iter().zip(SCRATCH_FLAGS) {
            skeleton.dirs(c_str_path(dir))?;
            let target = c_path(&skeleton.inside(c_str_path(dir)))?;
            let flags = MountFlags::NOSUID | MountFlags::NODEV | own_flags;
            skeleton.ops.push(Op::Tmpfs { target, flags, options: TMP_OPTIONS });
        }

        let mut public: Vec<PathBuf> = vec![binary.to_path_buf()];
        let libraries = closure.interpreter.iter().chain(&closure.libraries);
        public.extend(libraries.filter_map(|l| library_part(l)));
        public.extend(closure.data.iter().cloned());
        public.extend(public_parts(options));
        public.extend(options.reads.iter().cloned());
        let stock = stock_files(options)?;
        // each path walked once: the libraries mostly share one directory
        let mut seen = std::collections::HashSet::new();
        public.retain(|path| seen.insert(path.clone()));
        for path in public.iter().chain(&DEVICES.map(PathBuf::from)) {
            skeleton.expose(path)?;
        }
        let found = skeleton.outermost();
        if found.iter().any(|(p, _)| options.config_dir.starts_with(p)) {
            return Err(io::Error::other(format!(
                "--config-dir {} lies inside a read-only part of the check's world",
                options.config_dir.display()
            )));
        }
        // the render's place is a mount point too
        let render_point = (options.config_dir.clone(), Kind::Dir);
        for (path, kind) in found.iter().chain([&render_point]) {
            match kind {
                Kind::Dir => skeleton.dirs(path)?,
                Kind::File | Kind::Device => skeleton.file(path, Vec::new())?,
            }
        }
        skeleton.dirs(Path::new("/proc"))?;
        if closure.uses_origin {
            skeleton.dirs(Path::new("/proc/self"))?;
        }
        let hostname = options.hostname.clone().unwrap_or_else(host_name);
        let accounts = options.accounts.as_deref().unwrap_or(Path::new("/etc"));
        for (name, content) in stand_ins(&hostname, accounts, options.hosts.as_deref())? {
            skeleton.file(&Path::new("/etc").join(name), content)?;
        }

        for (path, kind) in &found {
            let remount = match kind {
                Kind::Device => None,
                _ => Some(locked_flags(path)? | MountFlags::RDONLY | MountFlags::NOSUID),
            };
            let (source, target) = (c_path(path)?, c_path(&skeleton.inside(path))?);
            skeleton.ops.push(Op::Bind { source, target, remount });
        }
        let config_target = skeleton.inside(&options.config_dir);
        let mut ops = skeleton.ops;
        ops.push(Op::Proc { target: c_path(&private.join("proc"))? });
        if closure.uses_origin {
            let remount = locked_flags(Path::new("/proc/self"))?
                | MountFlags::RDONLY
                | MountFlags::NOSUID
                | MountFlags::NODEV
                | MountFlags::NOEXEC;
            ops.push(Op::ProcSelf { target: c_path(&private.join("proc/self"))?, remount });
        }
        let render = render_options(&options.render_room);
        ops.push(Op::Render { target: c_path(&config_target)?, options: render });
        let flags = MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV;
        ops.push(Op::ReadOnly { target: c_path(private)?, flags });

        let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        Ok(World {
            root: c_path(private)?,
            ops,
            config_inside: c_path(&options.config_dir)?,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            hostname,
            stock,
            options: options.clone(),
        })
    }

    /// Where the render lies inside the world.
    pub fn render_inside(&self) -> &CStr {
        &self.config_inside
    }

    /// Where a path of the child's root lies as the check sees it (`/etc/hosts`).
    fn inside(&self, c: &CStr) -> PathBuf {
        let (root, path) = (c_str_path(&self.root), c_str_path(c));
        Path::new("/").join(path.strip_prefix(root).unwrap_or(path))
    }

    /// What operation `index` makes (`bind /usr/lib`), for a failure's reason.
    pub fn describe(&self, index: usize) -> Option<String> {
        let inside = |c: &CString| self.inside(c).display().to_string();
        Some(match self.ops.get(index)? {
            Op::Tmpfs { target, .. } => format!("tmpfs {}", inside(target)),
            Op::Dir { path } => format!("directory {}", inside(path)),
            Op::File { path, .. } => format!("file {}", inside(path)),
            Op::Symlink { path, .. } => format!("symlink {}", inside(path)),
            Op::Bind { source, .. } => format!("bind {}", source.to_string_lossy()),
            Op::Proc { .. } => "proc /proc".into(),
            Op::ProcSelf { .. } => "bind /proc/self".into(),
            Op::Render { target, .. } => format!("render at {}", inside(target)),
            Op::ReadOnly { target, .. } => format!("read-only {}", inside(target)),
        })
    }

    /// The host paths shown read-only (real paths, symlinks followed), as
    /// the world's binds say: Landlock's read grants and `--explain`.
    pub fn exposed(&self) -> Vec<PathBuf> {
        self.binds(true)
    }

    /// The devices shown, as the world's binds say.
    pub fn devices(&self) -> Vec<PathBuf> {
        self.binds(false)
    }

    /// The sources of the binds remounted read-only (`read_only`), or of
    /// those bound as they are (devices).
    fn binds(&self, read_only: bool) -> Vec<PathBuf> {
        let source = |op: &Op| match op {
            Op::Bind { source, remount, .. } if remount.is_some() == read_only => {
                Some(c_str_path(source).to_path_buf())
            }
            _ => None,
        };
        self.ops.iter().filter_map(source).collect()
    }

    /// The scratch mounts and how each is made (`size=64m,…,noexec`), as
    /// the world's tmpfs operations say (the root's own left out), for
    /// `--explain`.
    pub fn scratch(&self) -> Vec<(PathBuf, String)> {
        let scratch = |op: &Op| match op {
            Op::Tmpfs { target, flags, options } if *target != self.root => {
                let noexec = if flags.contains(MountFlags::NOEXEC) { ",noexec" } else { "" };
                Some((self.inside(target), format!("{}{noexec}", options.to_string_lossy())))
            }
            _ => None,
        };
        self.ops.iter().filter_map(scratch).collect()
    }

    /// The stand-ins: the files the world writes rather than binds a host
    /// path onto, as its operations say (`--explain`).
    pub fn stand_ins(&self) -> Vec<PathBuf> {
        let bound: std::collections::HashSet<&CString> = (self.ops.iter())
            .filter_map(|op| match op {
                Op::Bind { target, .. } => Some(target),
                _ => None,
            })
            .collect();
        let written = |op: &Op| match op {
            Op::File { path, .. } if !bound.contains(path) => Some(self.inside(path)),
            _ => None,
        };
        self.ops.iter().filter_map(written).collect()
    }

    /// Stock files copied into each check directory.
    pub fn stock(&self) -> &[StockFile] {
        &self.stock
    }

    pub fn options(&self) -> &WorldOptions {
        &self.options
    }

    /// Whether the world shows `/proc/self` (the loader expands `$ORIGIN`).
    pub fn proc_self(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, Op::ProcSelf { .. }))
    }

    /// The host name checks see.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// In the child, right after `unshare` of user, mount, network, IPC and
    /// UTS namespaces, with the check directory as its working directory:
    /// maps the ids, makes the mounts, enters the root and the config
    /// directory, and sets the host name when `--check-hostname` gives one
    /// (the new UTS namespace keeps this host's name otherwise: a container's
    /// filter refuses `sethostname` without `CAP_SYS_ADMIN`). `own_users`:
    /// the namespaces include a user namespace whose ids are still to be
    /// mapped. Raw system calls on memory prepared before the fork only.
    /// Returns the step that failed, the operation's index for
    /// [`Step::Mount`], and its errno.
    ///
    /// `channel`, when not -1, is where the render's own tmpfs is handed to
    /// the gate ([`Op::Render`]), right after the mounts.
    pub fn enter(
        &self,
        own_users: bool,
        own_processes: bool,
        resolver: RawFd,
        channel: RawFd,
    ) -> Result<(), (Step, Option<usize>, i32)> {
        let step = |step: Step, e: i32| if e == 0 { Ok(()) } else { Err((step, None, e)) };
        if own_users {
            step(Step::MapIds, errno_of(self.map_ids()))?;
        }
        step(Step::Loopback, super::network::loopback_up())?;
        step(Step::Route, super::network::default_routes())?;
        if resolver >= 0 {
            step(Step::Resolver, super::network::hand_over_resolver(resolver))?;
        }
        step(Step::PrivateMounts, super::namespaces::private_mounts())?;
        let mut own_proc = false;
        // the check's own `/proc` only in its own PID namespace
        let ops = self.ops.iter().enumerate();
        for (index, op) in ops.filter(|(_, op)| own_processes || !matches!(op, Op::Proc { .. })) {
            let applied = op.apply(&mut own_proc, channel >= 0);
            applied.map_err(|e| (Step::Mount, Some(index), e.raw_os_error()))?;
        }
        if channel >= 0 {
            step(Step::Render, self.hand_over_render(channel))?;
        }
        self.pivot().map_err(|(at, e)| (at, None, e))?;
        step(Step::Chdir, errno_of(rustix::process::chdir(self.config_inside.as_c_str())))?;
        // `sethostname` for `--check-hostname` only
        if self.options.hostname.is_some() {
            step(Step::Hostname, errno_of(rustix::system::sethostname(self.hostname.as_bytes())))?;
        }
        Ok(())
    }

    fn map_ids(&self) -> rustix::io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        let files: [(&CStr, &[u8]); 3] = [
            (c"/proc/self/uid_map", &self.uid_map),
            (c"/proc/self/setgroups", b"deny"),
            (c"/proc/self/gid_map", &self.gid_map),
        ];
        files.into_iter().try_for_each(|(path, content)| {
            write_all(&rustix::fs::open(path, OFlags::WRONLY, Mode::empty())?, content)
        })
    }

    /// Opens the render's tmpfs and sends it over `channel` (the gate
    /// writes the render through it). 0 or an errno.
    fn hand_over_render(&self, channel: RawFd) -> i32 {
        use rustix::fs::{Mode, OFlags};
        let Some(Op::Render { target, .. }) =
            self.ops.iter().find(|op| matches!(op, Op::Render { .. }))
        else {
            return libc::ENOENT;
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        match rustix::fs::open(target.as_c_str(), flags, Mode::empty()) {
            Ok(dir) => super::network::hand_over(channel, super::network::RENDER, &dir),
            Err(e) => e.raw_os_error(),
        }
    }

    /// Makes the world's root the root. `chroot` first: detaching the old root
    /// after `pivot_root` waits for an RCU grace period (17 to 60 ms
    /// measured here), and the old root's mounts stay unreachable all the
    /// same (no descriptor leads out: all are close-on-exec, the check
    /// directory's is closed at exec; `..` stops at the root; the
    /// capability `chroot` needs is dropped right after). A container's
    /// seccomp filter refuses `chroot` to a process without
    /// `CAP_SYS_CHROOT` even in its own user namespace (podman's and
    /// CRI-O's default profile), while `pivot_root` is allowed there: then
    /// the root is pivoted and the old one detached. A failure is told by
    /// the way that answered ([`Step::Chroot`] or [`Step::PivotRoot`]).
    fn pivot(&self) -> Result<(), (Step, i32)> {
        use rustix::io::Errno;
        let chroot_failed = |e: Errno| (Step::Chroot, e.raw_os_error());
        rustix::process::chdir(self.root.as_c_str()).map_err(chroot_failed)?;
        match rustix::process::chroot(c".") {
            Err(Errno::PERM) => {}
            chrooted => return chrooted.map_err(chroot_failed),
        }
        // `pivot_root(".", ".")` stacks the old root on the new one
        // (pivot_root(2), "NOTES"); detaching it leaves the new alone.
        rustix::process::pivot_root(c".", c".")
            .and_then(|()| rustix::mount::unmount(c".", rustix::mount::UnmountFlags::DETACH))
            .and_then(|()| rustix::process::chdir(c"/"))
            .map_err(|e| (Step::PivotRoot, e.raw_os_error()))
    }
}

/// One operation of [`World::enter`], named in a check's reason when it
/// fails ("sandbox setup failed in layer 'world' at chroot: …").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    MapIds = 1,
    Loopback = 2,
    PrivateMounts = 3,
    Mount = 4,
    Chroot = 5,
    PivotRoot = 6,
    Chdir = 7,
    Hostname = 8,
    Route = 9,
    Resolver = 10,
    Render = 11,
}

impl Step {
    /// Every step, by the system call or file an operator greps for.
    pub const ALL: [(Step, &'static str); 11] = [
        (Step::MapIds, "uid_map"),
        (Step::Loopback, "loopback"),
        (Step::Route, "default route"),
        (Step::Resolver, "resolver socket"),
        (Step::PrivateMounts, "private mounts"),
        (Step::Mount, "mount"),
        (Step::Render, "render handed over"),
        (Step::Chroot, "chroot"),
        (Step::PivotRoot, "pivot_root"),
        (Step::Chdir, "chdir"),
        (Step::Hostname, "sethostname"),
    ];
}

/// What the planned world has at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Made {
    Dir,
    File,
    Symlink,
}

/// The world being planned: every exposed host path found, with its kind,
/// and the operations that make the root's own entries.
struct Skeleton {
    root: PathBuf,
    /// Real host paths (symlinks followed) and what they are.
    found: BTreeMap<PathBuf, Kind>,
    /// The root's entries planned so far, by their path in the world.
    made: BTreeMap<PathBuf, Made>,
    ops: Vec<Op>,
}

impl Skeleton {
    /// A root tmpfs of its own: nothing of the gate's host paths in it,
    /// and nothing to remove after the check.
    fn new(root: &Path) -> io::Result<Skeleton> {
        let flags = MountFlags::NOSUID | MountFlags::NODEV;
        Ok(Skeleton {
            root: root.to_path_buf(),
            found: BTreeMap::new(),
            made: BTreeMap::from([(PathBuf::from("/"), Made::Dir)]),
            ops: vec![Op::Tmpfs { target: c_path(root)?, flags, options: ROOT_OPTIONS }],
        })
    }

    /// The place of a host path in the world's root.
    fn inside(&self, path: &Path) -> PathBuf {
        self.root.join(path.strip_prefix("/").unwrap_or(path))
    }

    /// Follows `path` on the host component by component, mirroring each
    /// symlink on the way into the world, and records the real path it
    /// ends at. A path that does not exist is left out.
    fn expose(&mut self, path: &Path) -> io::Result<()> {
        let mut pending: Vec<PathBuf> = vec![path.to_path_buf()];
        let mut links = 0;
        'paths: while let Some(path) = pending.pop() {
            let mut at = PathBuf::from("/");
            let parts: Vec<&OsStr> = path
                .components()
                .filter(|c| matches!(c, Component::Normal(_)))
                .map(|c| c.as_os_str())
                .collect();
            for (i, part) in parts.iter().enumerate() {
                let next = at.join(part);
                let meta = match std::fs::symlink_metadata(&next) {
                    Ok(meta) => meta,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue 'paths,
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => continue 'paths,
                    Err(e) => return Err(e),
                };
                let ty = meta.file_type();
                if ty.is_symlink() {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(io::Error::other(format!(
                            "too many symlinks in {}",
                            path.display()
                        )));
                    }
                    let target = std::fs::read_link(&next)?;
                    self.mirror_link(&next, &target)?;
                    // an absolute target replaces `at`
                    let mut rest = at.join(target);
                    rest.extend(&parts[i + 1..]);
                    pending.push(normalise(&rest));
                    continue 'paths;
                }
                if i + 1 == parts.len() {
                    use std::os::unix::fs::FileTypeExt;
                    let kind = if ty.is_dir() {
                        Kind::Dir
                    } else if ty.is_char_device() {
                        Kind::Device
                    } else if ty.is_file() {
                        Kind::File
                    } else {
                        continue 'paths; // sockets, FIFOs: never shown
                    };
                    self.found.insert(next.clone(), kind);
                } else if !ty.is_dir() {
                    continue 'paths;
                }
                at = next;
            }
        }
        Ok(())
    }

    /// The same symlink at the same place in the world (once).
    /// A host symlink on the way to a scratch mount (`/dev -> …`) cannot be
    /// mirrored where the scratch's directories are: no world.
    fn mirror_link(&mut self, at: &Path, target: &Path) -> io::Result<()> {
        if let Some(&made) = self.made.get(at) {
            let mut scratch = SCRATCH.iter().map(|dir| c_str_path(dir));
            return match scratch.find(|dir| dir.starts_with(at) && *dir != at) {
                Some(dir) if made == Made::Dir => Err(lies_through(dir, at)),
                _ => Ok(()),
            };
        }
        at.parent().map_or(Ok(()), |parent| self.dirs(parent))?;
        let (path, target) = (c_path(&self.inside(at))?, c_path(target)?);
        self.ops.push(Op::Symlink { path, target });
        self.made.insert(at.to_path_buf(), Made::Symlink);
        Ok(())
    }

    /// The paths to bind: those found, but none inside another found
    /// directory (it shows through its parent's bind).
    fn outermost(&self) -> Vec<(PathBuf, Kind)> {
        let mut out: Vec<(PathBuf, Kind)> = Vec::new();
        for (path, kind) in &self.found {
            let covered = out.iter().any(|(p, k)| *k == Kind::Dir && path.starts_with(p));
            if !covered {
                out.push((path.clone(), *kind));
            }
        }
        out
    }

    /// A file with `content` (empty: a mount point), unless the path is
    /// taken: a stand-in whose name an exposed path's symlink took (the
    /// host's then wins), or a mount point already planned.
    fn file(&mut self, path: &Path, content: Vec<u8>) -> io::Result<()> {
        if self.made.contains_key(path) {
            return Ok(());
        }
        path.parent().map_or(Ok(()), |parent| self.dirs(parent))?;
        self.ops.push(Op::File { path: c_path(&self.inside(path))?, content });
        self.made.insert(path.to_path_buf(), Made::File);
        Ok(())
    }

    /// `path` and the directories on the way to it. A world's directory
    /// never lies through one of its symlinks (those lead to the host's).
    fn dirs(&mut self, path: &Path) -> io::Result<()> {
        let mut at = PathBuf::from("/");
        for part in path.components().filter(|c| matches!(c, Component::Normal(_))) {
            at.push(part);
            match self.made.get(&at) {
                Some(Made::Dir) => {}
                Some(_) => return Err(lies_through(path, &at)),
                None => {
                    self.ops.push(Op::Dir { path: c_path(&self.inside(&at))? });
                    self.made.insert(at.clone(), Made::Dir);
                }
            }
        }
        Ok(())
    }
}

/// Why `path` cannot be in the world: `at`, on its way, is not a directory there.
fn lies_through(path: &Path, at: &Path) -> io::Error {
    io::Error::other(format!(
        "{} lies through {}, which is not a directory in the check's world",
        path.display(),
        at.display()
    ))
}

/// `a/./b/../c` → `a/c`, lexically (for a symlink's target joined to its place).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// The stock files laid under each render (its own files win): every
/// regular file under `--stock-dir`, at its path relative to it; without
/// one, the host's packaged stock files under the config directory.
pub fn stock_files(options: &WorldOptions) -> io::Result<Vec<StockFile>> {
    let mut stock = Vec::new();
    match &options.stock_dir {
        Some(dir) => read_stock_tree(dir, Path::new(""), &mut stock, 0)?,
        None => {
            for path in STOCK.iter().map(Path::new) {
                if let Ok(relative) = path.strip_prefix(&options.config_dir) {
                    read_stock(path, relative, &mut stock)?;
                }
            }
        }
    }
    Ok(stock)
}

/// The most stock files `--stock-dir` may give, and how deep they may lie.
const MAX_STOCK_FILES: usize = 4096;
const MAX_STOCK_DEPTH: usize = 8;

/// Every regular file under `dir` (symlinks followed, as the image shows
/// them), each at most [`MAX_STOCK_FILE`]: a bigger one, or too many, is an
/// error naming it, never a file silently missing from checks.
fn read_stock_tree(
    dir: &Path,
    relative: &Path,
    stock: &mut Vec<StockFile>,
    depth: usize,
) -> io::Result<()> {
    let at = dir.join(relative);
    let mut entries: Vec<_> = std::fs::read_dir(&at)
        .map_err(|e| io::Error::new(e.kind(), format!("--stock-dir {}: {e}", at.display())))?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let meta = std::fs::metadata(&path)?;
        let inner = relative.join(entry.file_name());
        if inner == Path::new(crate::layout::CONFIG_NAME) {
            continue; // the image's own config: every render has its own
        }
        if meta.is_dir() && depth < MAX_STOCK_DEPTH {
            read_stock_tree(dir, &inner, stock, depth + 1)?;
        } else if meta.is_file() {
            if meta.len() > MAX_STOCK_FILE || stock.len() >= MAX_STOCK_FILES {
                return Err(io::Error::other(format!(
                    "--stock-dir: {} is past the stock's bounds ({} files of at most {} KiB)",
                    path.display(),
                    MAX_STOCK_FILES,
                    MAX_STOCK_FILE >> 10
                )));
            }
            stock.push(StockFile { relative: inner, content: std::fs::read(&path)? });
        }
    }
    Ok(())
}

/// Reads the packaged stock file or directory at `path` into `stock`,
/// leaving out what is missing or too large.
fn read_stock(path: &Path, relative: &Path, stock: &mut Vec<StockFile>) -> io::Result<()> {
    let mut files = vec![(path.to_path_buf(), relative.to_path_buf())];
    if path.is_dir() {
        // one level: a packaged HAProxy ships flat directories of pages
        let mut entries: Vec<_> = std::fs::read_dir(path)?.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        files = entries.iter().map(|e| (e.path(), relative.join(e.file_name()))).collect();
    }
    for (path, relative) in files {
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if meta.is_file() && meta.len() <= MAX_STOCK_FILE {
            stock.push(StockFile { relative, content: std::fs::read(&path)? });
        }
    }
    Ok(())
}

/// What a world's stand-ins are made from, as it stands now: the accounts'
/// `passwd` and `group`, the host's `resolv.conf` and `--check-hosts` (size,
/// modification time, inode) and the host name (without `--check-hostname`). A world made from other sources is stale,
/// and made anew, so that a long-running gate sees an account added to the
/// host (or to `--accounts`) as bare `haproxy -c` would.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StandInSources {
    files: Vec<Option<(u64, i64, i64, u64)>>,
    hostname: Option<String>,
}

pub fn stand_in_sources(options: &WorldOptions) -> StandInSources {
    use std::os::unix::fs::MetadataExt;
    let accounts = options.accounts.as_deref().unwrap_or(Path::new("/etc"));
    let files = [accounts.join("passwd"), accounts.join("group"), PathBuf::from(RESOLV_CONF)]
        .iter()
        .chain(&options.hosts)
        .map(|path| {
            std::fs::metadata(path).ok().map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
        })
        .collect();
    let hostname = options.hostname.is_none().then(host_name);
    StandInSources { files, hostname }
}

/// The gate host's resolver configuration: its search list and options go
/// into the world's (a pod's names are searched as on the pod), its
/// nameservers never (the gate answers at 127.0.0.1).
const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The stand-ins under `/etc`: names and their content.
fn stand_ins(
    hostname: &str,
    accounts: &Path,
    extra_hosts: Option<&Path>,
) -> io::Result<Vec<(&'static str, Vec<u8>)>> {
    let mut hosts = format!(
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{hostname}\n"
    );
    if let Some(path) = extra_hosts {
        let extra = std::fs::read(path).map_err(|e| {
            io::Error::new(e.kind(), format!("--check-hosts {}: {e}", path.display()))
        })?;
        hosts.push_str(&String::from_utf8_lossy(&extra));
        if !hosts.ends_with('\n') {
            hosts.push('\n');
        }
    }
    let resolv = resolv_conf(&std::fs::read_to_string(RESOLV_CONF).unwrap_or_default());
    Ok(vec![
        ("hosts", hosts.into_bytes()),
        ("resolv.conf", resolv.into_bytes()),
        ("nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n".to_vec()),
        ("passwd", names_and_ids(&accounts.join("passwd"), 4)?.into_bytes()),
        ("group", names_and_ids(&accounts.join("group"), 3)?.into_bytes()),
    ])
}

/// The world's `resolv.conf`: the gate's own resolver at 127.0.0.1, with
/// `host`'s search list and options (but those asking for TCP, which the
/// gate's resolver does not serve).
fn resolv_conf(host: &str) -> String {
    let mut out = String::from("nameserver 127.0.0.1\n");
    for line in host.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("search" | "domain") => out.push_str(&format!("{}\n", line.trim())),
            Some("options") => {
                let kept: Vec<&str> = words.filter(|w| !matches!(*w, "use-vc" | "tcp")).collect();
                if !kept.is_empty() {
                    out.push_str(&format!("options {}\n", kept.join(" ")));
                }
            }
            _ => {}
        }
    }
    out
}

/// `passwd` or `group` holding names and ids only: the first `fields`
/// fields of each line (`name:x:uid:gid`, `name:x:gid`), the rest empty.
fn names_and_ids(path: &Path, fields: usize) -> io::Result<String> {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    let mut out = String::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split(':').collect();
        let ids_ok =
            parts.get(2..fields).is_some_and(|ids| ids.iter().all(|id| id.parse::<u32>().is_ok()));
        if line.starts_with('#') || parts[0].is_empty() || !ids_ok {
            continue;
        }
        out.push_str(&format!("{}:x:{}", parts[0], parts[2..fields].join(":")));
        // passwd: gecos, home, shell; group: members
        out.push_str(if fields == 4 { ":::\n" } else { ":\n" });
    }
    Ok(out)
}

fn host_name() -> String {
    rustix::system::uname().nodename().to_string_lossy().into_owned()
}

/// The flags a bind of `path` cannot drop in a user namespace (they are
/// locked to those of the mount it comes from); a remount must repeat them.
fn locked_flags(path: &Path) -> io::Result<MountFlags> {
    use rustix::fs::StatVfsMountFlags as St;
    let st = rustix::fs::statvfs(path)?;
    let pairs = [
        (St::NOSUID, MountFlags::NOSUID),
        (St::NODEV, MountFlags::NODEV),
        (St::NOEXEC, MountFlags::NOEXEC),
        (St::NOATIME, MountFlags::NOATIME),
        (St::NODIRATIME, MountFlags::NODIRATIME),
        (St::RELATIME, MountFlags::RELATIME),
    ];
    Ok(pairs.into_iter().filter(|(flag, _)| st.f_flag.contains(*flag)).map(|(_, ms)| ms).collect())
}

/// A bind mount made read-only, with `flags` (its locked flags among them).
fn read_only(target: &CStr, flags: MountFlags) -> rustix::io::Result<()> {
    rustix::mount::mount_remount(target, MountFlags::BIND | flags, c"")
}

/// Writes `content` whole, in the child: a short write is `EIO`.
fn write_all(file: &impl std::os::fd::AsFd, content: &[u8]) -> rustix::io::Result<()> {
    match rustix::io::write(file, content)? {
        n if n == content.len() => Ok(()),
        _ => Err(rustix::io::Errno::IO),
    }
}

fn c_str_path(c: &CStr) -> &Path {
    Path::new(OsStr::from_bytes(c.to_bytes()))
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// What a library shows of the host: its directory whole (glibc opens
/// more there at run time), but the file alone where that directory is a
/// scratch mount or on the way to one (`/`, `/dev`, `/tmp`: an RPATH
/// there), whose bind would show the host's whole tree or lie over the
/// check's own `/tmp`.
fn library_part(library: &Path) -> Option<PathBuf> {
    let dir = library.parent()?;
    let wide = SCRATCH.iter().any(|scratch| c_str_path(scratch).starts_with(dir));
    Some(if wide { library } else { dir }.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::loader::Closure;

    #[test]
    fn the_worlds_resolver_is_the_gate_with_the_hosts_search_list() {
        let host = "# k8s\nnameserver 10.96.0.10\nsearch ns.svc.cluster.local svc.cluster.local\n\
                    options ndots:5 use-vc edns0\noptions tcp\n";
        assert_eq!(
            resolv_conf(host),
            "nameserver 127.0.0.1\nsearch ns.svc.cluster.local svc.cluster.local\noptions ndots:5 edns0\n"
        );
        assert_eq!(resolv_conf(""), "nameserver 127.0.0.1\n");
    }

    #[test]
    fn accounts_keep_names_and_ids_only() {
        let dir = tempfile::tempdir().unwrap();
        let (passwd, group) = (dir.path().join("passwd"), dir.path().join("group"));
        std::fs::write(
            &passwd,
            "root:x:0:0:root:/root:/bin/bash\n# comment\nhaproxy:x:108:113::/var/lib/haproxy:/usr/sbin/nologin\nbroken\n",
        )
        .unwrap();
        std::fs::write(&group, "root:x:0:\nhaproxy:x:113:alice,bob\n").unwrap();
        assert_eq!(names_and_ids(&passwd, 4).unwrap(), "root:x:0:0:::\nhaproxy:x:108:113:::\n");
        assert_eq!(names_and_ids(&group, 3).unwrap(), "root:x:0:\nhaproxy:x:113:\n");
        assert_eq!(names_and_ids(&dir.path().join("missing"), 3).unwrap(), "");
    }

    #[test]
    fn a_host_symlink_on_the_way_to_a_scratch_mount_gives_no_world() {
        let mut s = Skeleton::new(Path::new("/world")).unwrap();
        s.dirs(Path::new("/dev/shm")).unwrap();
        let e = s.mirror_link(Path::new("/dev"), Path::new("/devices")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/shm lies through /dev, which is not a directory in the check's world"
        );
        // the scratch mount's own place a symlink: the tmpfs covers it
        s.mirror_link(Path::new("/dev/shm"), Path::new("/run/shm")).unwrap();
        assert!(!s.ops.iter().any(|op| matches!(op, Op::Symlink { .. })));
    }

    #[test]
    fn symlinks_on_the_way_are_mirrored_and_only_outermost_paths_bound() {
        let host = tempfile::tempdir().unwrap();
        let h = host.path();
        std::fs::create_dir_all(h.join("usr/lib/x")).unwrap();
        std::fs::write(h.join("usr/lib/x/a.so"), "a").unwrap();
        std::os::unix::fs::symlink("usr/lib", h.join("lib")).unwrap();
        let mut s = Skeleton::new(Path::new("/world")).unwrap();
        s.expose(&h.join("lib/x/a.so")).unwrap();
        s.expose(&h.join("usr/lib/x")).unwrap();
        s.expose(&h.join("does/not/exist")).unwrap();
        let real = h.join("usr/lib/x");
        assert_eq!(s.outermost(), vec![(real, Kind::Dir)]);
        let link = s.ops.iter().find_map(|op| match op {
            Op::Symlink { path, target } => Some((path.clone(), target.clone())),
            _ => None,
        });
        let place = c_path(&s.inside(&h.join("lib"))).unwrap();
        assert_eq!(link, Some((place, c"usr/lib".to_owned())));
    }

    #[test]
    fn the_renders_tmpfs_holds_the_largest_render_and_what_haproxy_writes() {
        let room = crate::limits::RenderLimits { files: 10, bytes: 1 << 20 };
        assert_eq!(render_options(&room).to_str(), Ok("size=328704k,nr_inodes=4116,mode=700"));
        let default = render_options(&crate::limits::RenderLimits::default());
        assert_eq!(default.to_str(), Ok("size=458752k,nr_inodes=44096,mode=700"));
    }

    /// The world planned for `/bin/sh` with `closure` and `options`, its
    /// root's mount point (kept), and what each of its operations makes, in order.
    fn planned(closure: Closure, options: WorldOptions) -> (tempfile::TempDir, World, Vec<String>) {
        let private = tempfile::tempdir().unwrap();
        let world = World::build(private.path(), Path::new("/bin/sh"), &closure, &options).unwrap();
        let described = (0..world.ops.len()).map(|i| world.describe(i).unwrap()).collect();
        (private, world, described)
    }

    /// Where `what` is in `described`.
    fn position(described: &[String], what: &str) -> usize {
        described.iter().position(|d| d == what).unwrap_or_else(|| panic!("{what}: {described:?}"))
    }

    #[test]
    fn the_world_is_one_list_and_a_failed_operation_is_named() {
        let (_private, world, described) = planned(Closure::default(), WorldOptions::default());
        // the root's tmpfs first, read-only last; the render bound before
        assert_eq!(described.first().unwrap(), "tmpfs /");
        assert_eq!(described.last().unwrap(), "read-only /");
        let at = |what: &str| position(&described, what);
        assert!(at("directory /etc") < at("file /etc/passwd"));
        assert!(at("tmpfs /tmp") < at("render at /etc/haproxy"));
        assert!(at("directory /dev") < at("file /dev/null"));
        assert!(at("file /dev/null") < at("bind /dev/null"));
        // what `--explain` shows as scratch and stand-ins is read off the list
        let scratch: Vec<(PathBuf, String)> = world.scratch();
        let tmp = ("/tmp".into(), "size=64m,nr_inodes=4096,mode=1777".to_owned());
        let shm = ("/dev/shm".into(), "size=64m,nr_inodes=4096,mode=1777,noexec".to_owned());
        assert_eq!(scratch, [tmp, shm]);
        // the empty files bound onto (`/bin/sh`, `/dev/null`) are no stand-ins
        let stand_ins = ["hosts", "resolv.conf", "nsswitch.conf", "passwd", "group"];
        let stand_ins: Vec<PathBuf> = stand_ins.iter().map(|n| Path::new("/etc").join(n)).collect();
        assert_eq!(world.stand_ins(), stand_ins);
        // nothing but the root's mount point on disk
        let on_disk: Vec<_> = std::fs::read_dir(c_str_path(&world.root)).unwrap().collect();
        assert!(on_disk.is_empty(), "{on_disk:?}");
        // a failure names the operation
        let index = at("bind /dev/null");
        let e = super::super::tagged_step(
            super::super::Layer::World,
            Step::Mount as i32,
            Some(index),
            libc::EPERM,
        );
        let message = super::super::spawn_failure(&e, Some(&world)).unwrap();
        assert!(
            message
                .starts_with("sandbox setup failed in layer 'world' at mount (bind /dev/null): "),
            "{message}"
        );
        assert!(message.ends_with("(EPERM)"), "{message}");
    }

    #[test]
    fn what_lies_under_the_scratch_tmp_is_made_after_its_tmpfs() {
        // a --check-read path under /tmp, through a symlink on the way
        let host = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
        std::fs::create_dir(host.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", host.path().join("link")).unwrap();
        let options =
            WorldOptions { reads: vec![host.path().join("link")], ..WorldOptions::default() };
        let (_private, _, described) = planned(Closure::default(), options);
        let at = |what: String| position(&described, &what);
        let tmpfs = at("tmpfs /tmp".into());
        let h = host.path().display();
        assert!(tmpfs < at(format!("directory {h}")));
        assert!(at(format!("directory {h}")) < at(format!("symlink {h}/link")));
        assert!(at(format!("directory {h}/real")) < at(format!("bind {h}/real")));
    }

    #[test]
    fn a_library_in_tmp_is_shown_alone_not_the_hosts_tmp() {
        // an RPATH of /tmp: the library file is bound, never the host's /tmp
        // over the check's scratch one
        let library = tempfile::Builder::new().suffix(".so").tempfile_in("/tmp").unwrap();
        let system = Path::new("/usr/lib/x86_64-linux-gnu/libc.so.6");
        let libraries = vec![library.path().to_path_buf(), system.to_path_buf()];
        let closure = Closure { libraries, ..Closure::default() };
        let (_private, world, described) = planned(closure, WorldOptions::default());
        let exposed = world.exposed();
        assert!(exposed.contains(&library.path().to_path_buf()), "{exposed:?}");
        assert!(!exposed.iter().any(|p| p == Path::new("/tmp")), "{exposed:?}");
        // a system library's directory is still shown whole, where it exists
        if system.exists() {
            let dir = std::fs::canonicalize(system.parent().unwrap()).unwrap();
            assert!(exposed.contains(&dir), "{exposed:?}");
        }
        let bind = format!("bind {}", library.path().display());
        assert!(position(&described, "tmpfs /tmp") < position(&described, &bind));
    }

    #[test]
    fn bad_options_are_refused_with_the_flag_named() {
        let base = WorldOptions::default();
        for (bad, flag) in [
            (WorldOptions { config_dir: "etc/haproxy".into(), ..base.clone() }, "--config-dir"),
            (WorldOptions { config_dir: "/etc/../x".into(), ..base.clone() }, "--config-dir"),
            (WorldOptions { reads: vec!["/etc/haproxy/certs".into()], ..base.clone() }, "overlaps"),
            (WorldOptions { hostname: Some(String::new()), ..base.clone() }, "hostname"),
        ] {
            assert!(bad.validate().unwrap_err().contains(flag));
        }
        base.validate().unwrap();
    }
}
