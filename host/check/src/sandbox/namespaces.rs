//! Namespaces: the check gets a network of its own, its own IPC, host name
//! and mounts (where the host view's stand-ins are mounted:
//! [`super::world`]), inside a user namespace so no privilege is needed and
//! root in it is nobody outside.
//!
//! Here, no uid map is written and the loopback stays down: a world
//! ([`super::world`]) maps the ids and brings the loopback up; without
//! one, `haproxy -c` needs no ids, and with none mapped the child's root
//! has no power over any file outside (DAC applies).
//! Without user namespaces but as root, network/IPC/UTS are unshared
//! alone (CAP_SYS_ADMIN allows it); capabilities are dropped right after.

/// What the child unshares: user+net+ipc+uts, net+ipc+uts, or nothing;
/// plus `CLONE_NEWNS` where the host lets the check mount in it.
pub const WITH_USER: libc::c_int = libc::CLONE_NEWUSER | WITHOUT_USER;
pub const WITHOUT_USER: libc::c_int = libc::CLONE_NEWNET | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
/// Processes of the check's own, with a mount namespace only (their `/proc`
/// is mounted in it): a PID namespace, and a cgroup namespace where the host
/// gives one (`CLONE_NEWPID` alone otherwise).
pub const PROCESSES: libc::c_int = libc::CLONE_NEWPID | libc::CLONE_NEWCGROUP;

/// In the child, in a new mount namespace: its mounts become private, so
/// nothing mounted in it reaches the host. 0 or an errno.
pub fn private_mounts() -> i32 {
    use rustix::mount::MountPropagationFlags as Propagation;
    super::errno_of(rustix::mount::mount_change(c"/", Propagation::REC | Propagation::PRIVATE))
}

/// In the child: 0 or an errno. Raw system call only.
pub fn unshare(flags: libc::c_int) -> i32 {
    // SAFETY: unshare has no memory effects.
    if flags == 0 || unsafe { libc::unshare(flags) } == 0 { 0 } else { super::errno() }
}

/// Tries `unshare(flags)` in a throw-away child (with `CLONE_NEWNS`, also making
/// its mounts private: a host may allow the namespace but no mount in it):
/// the answer says whether checks can have these namespaces. Used by the probe.
pub fn try_in_child(flags: libc::c_int) -> Result<(), i32> {
    // SAFETY: the child calls only unshare and _exit (async-signal-safe),
    // so forking a multi-threaded process is fine.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(super::errno());
    }
    if pid == 0 {
        let mut e = unshare(flags);
        if e == 0 && flags & libc::CLONE_NEWNS != 0 {
            e = private_mounts();
        }
        // SAFETY: leaves the child at once, running no destructor.
        unsafe { libc::_exit(e.min(255)) };
    }
    let child = rustix::process::Pid::from_raw(pid);
    let wait = || rustix::process::waitpid(child, rustix::process::WaitOptions::empty());
    match rustix::io::retry_on_intr(wait).map(|w| w.and_then(|(_, s)| s.exit_status())) {
        Ok(Some(0)) => Ok(()),
        Ok(Some(e)) => Err(e),
        Ok(None) => Err(libc::EINVAL),
        Err(e) => Err(e.raw_os_error()),
    }
}
