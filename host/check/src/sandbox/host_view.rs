//! What a check sees of the host itself: nothing that is the host's own
//! (docs/checking.md, "What HAProxy sees of the host").
//!
//! The host name is a fixed one ([`HOST_NAME`]), set in the check's UTS
//! namespace; HAProxy's local peer name (`HAPROXY_LOCALPEER`) is given as
//! the same name with `-L` on every check, namespaces or not, sandbox or not.
//! Lua's module search paths are fixed to the check directory
//! ([`LUA_PATH`], [`LUA_CPATH`]), so neither `package.path` nor a failed
//! `require` names a host directory.
//!
//! Files: in the check's own mount namespace, stand-ins written once per
//! checker in its private directory are bind-mounted over the host's
//! `/etc/resolv.conf` (one loopback name server: a `parse-resolv-conf`
//! render gets the verdict it gets on any host with a name server),
//! `/etc/hosts` (localhost only) and `os-release` (empty; `/etc/os-release`
//! is a link into `/usr/lib`, which Landlock keeps readable for run-time
//! loading, so a grant could not hide it). The mounts are made in the child
//! before its capabilities go, with raw system calls on paths prepared
//! here; mount events stay in the namespace (its mounts are made private
//! first). Without namespaces on the host there is no mount namespace: the
//! host's files then show as they are, and the start-up line says
//! namespaces are off.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The host name a check sees, and HAProxy's local peer name.
pub const HOST_NAME: &str = "rendergate-check";
/// Lua modules come from the check directory only.
pub const LUA_PATH: &str = "./?.lua;./?/init.lua";
pub const LUA_CPATH: &str = "./?.so";

/// Each stand-in: its file name and content, and the host paths it covers.
const STAND_INS: [(&str, &str, &[&str]); 3] = [
    ("resolv.conf", "nameserver 127.0.0.1\n", &["/etc/resolv.conf"]),
    ("hosts", "127.0.0.1 localhost\n::1 localhost\n", &["/etc/hosts"]),
    ("os-release", "", &["/etc/os-release", "/usr/lib/os-release"]),
];

/// The stand-ins on disk, and the mounts that put them in place.
#[derive(Debug)]
pub struct HostView {
    /// `(stand-in, host path)` pairs, as C strings for the child.
    binds: Vec<(CString, CString)>,
    resolv_conf: PathBuf,
}

impl HostView {
    /// Writes the stand-ins into `dir/host-view` (`dir`: the checker's
    /// private directory, removed with it), owner-only and read-only: the
    /// check runs as the gate's user, in whatever user namespace.
    pub fn create(dir: &Path) -> io::Result<HostView> {
        use std::os::unix::fs::DirBuilderExt;
        let view = dir.join("host-view");
        std::fs::DirBuilder::new().mode(0o700).create(&view)?;
        let mut binds = Vec::new();
        for (name, content, targets) in STAND_INS {
            let path = view.join(name);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o400)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)?;
            file.write_all(content.as_bytes())?;
            let source = c_path(&path)?;
            for target in targets {
                binds.push((source.clone(), CString::new(*target).expect("no NUL in a constant")));
            }
        }
        Ok(HostView { binds, resolv_conf: view.join("resolv.conf") })
    }

    /// The stand-in for `/etc/resolv.conf`: what Landlock grants a render
    /// asking for `parse-resolv-conf` when the mounts are made.
    pub fn resolv_conf(&self) -> &Path {
        &self.resolv_conf
    }

    /// In the child, just after `unshare` with a new mount namespace: makes
    /// its mounts private, then mounts each stand-in over its host path (a
    /// host without that path has nothing to hide). Returns 0 or an errno.
    /// Raw system calls only.
    pub fn mount(&self) -> i32 {
        let e = super::namespaces::private_mounts();
        if e != 0 {
            return e;
        }
        for (source, target) in &self.binds {
            // SAFETY: C strings prepared in the parent.
            let r = unsafe {
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            };
            if r != 0 {
                let e = super::landlock::errno();
                if e != libc::ENOENT {
                    return e;
                }
            }
        }
        0
    }
}

/// In the child, inside its own UTS namespace: the fixed host name.
/// Returns 0 or an errno. One raw system call.
pub fn set_host_name() -> i32 {
    // SAFETY: a constant buffer of the length given.
    if unsafe { libc::sethostname(HOST_NAME.as_ptr().cast(), HOST_NAME.len()) } != 0 {
        return super::landlock::errno();
    }
    0
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stand_ins_are_written_read_only_and_cover_their_host_paths() {
        let dir = tempfile::tempdir().unwrap();
        let view = HostView::create(dir.path()).unwrap();
        let resolv = std::fs::read_to_string(view.resolv_conf()).unwrap();
        assert_eq!(resolv, "nameserver 127.0.0.1\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(view.resolv_conf()).unwrap().permissions().mode() & 0o777,
            0o400
        );
        assert_eq!(
            std::fs::metadata(dir.path().join("host-view")).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let targets: Vec<_> = view.binds.iter().map(|(_, t)| t.to_str().unwrap()).collect();
        assert_eq!(
            targets,
            ["/etc/resolv.conf", "/etc/hosts", "/etc/os-release", "/usr/lib/os-release"]
        );
        // a second checker in the same directory would be a bug: refused
        assert!(HostView::create(dir.path()).is_err());
    }
}
