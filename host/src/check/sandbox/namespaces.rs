//! Namespaces: the check gets a network of its own (no interface but a
//! down loopback), its own IPC, host name and mounts (where the host view's
//! stand-ins are mounted: [`super::host_view`]), inside a user namespace so
//! no privilege is needed and root in it is nobody outside.
//!
//! No uid map is written: `haproxy -c` needs no ids, and with none mapped
//! the child's root has no power over any file outside (DAC applies).
//! Without user namespaces but as root, network/IPC/UTS are unshared
//! alone (CAP_SYS_ADMIN allows it); capabilities are dropped right after.

/// What the child unshares: user+net+ipc+uts+mount, net+ipc+uts+mount, or nothing.
pub const WITH_USER: libc::c_int = libc::CLONE_NEWUSER | WITHOUT_USER;
pub const WITHOUT_USER: libc::c_int = libc::CLONE_NEWNET | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS | libc::CLONE_NEWNS;

/// In the child: 0 or an errno. Raw system call only.
pub fn unshare(flags: libc::c_int) -> i32 {
    if flags == 0 {
        return 0;
    }
    // SAFETY: unshare has no memory effects.
    if unsafe { libc::unshare(flags) } != 0 { super::landlock::errno() } else { 0 }
}

/// Tries `unshare(flags)` in a throw-away child: the answer says whether
/// checks can have these namespaces. Used once, by the probe.
pub fn try_in_child(flags: libc::c_int) -> Result<(), i32> {
    // SAFETY: the child calls only unshare and _exit (async-signal-safe),
    // so forking a multi-threaded process is fine.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(super::landlock::errno());
    }
    if pid == 0 {
        let e = unshare(flags);
        // SAFETY: leaves the child at once, running no destructor.
        unsafe { libc::_exit(e.min(255)) };
    }
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && super::landlock::errno() != libc::EINTR {
            return Err(super::landlock::errno());
        }
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, e) => Err(e),
        _ => Err(libc::EINVAL),
    }
}
