//! Processes of the check's own: a PID namespace, its first process, and
//! the reaper that stands for haproxy outside it.
//!
//! The process that unshares a PID namespace stays outside it; its
//! children are inside, the first of them pid 1. HAProxy must not be pid
//! 1: the kernel ignores the signals a namespace's first process has no
//! handler for, among them its own SIGXFSZ at the file-size bound, and a
//! write past the bound would fail (a refusal) where it must stop the check
//! (could not run; docs/checking.md). So the check's child, right after
//! `unshare`, forks twice ([`split`]): an **init** (pid 1), which closes
//! every descriptor and only waits for the namespace to end; then
//! **haproxy's process** (pid 2), which goes on to build the world — its
//! `/proc` must be mounted from inside — and `execve`s. The child itself
//! becomes the **reaper** ([`reap`]), which is what the gate spawned and
//! waits for: it closes every descriptor at once (haproxy's output ends
//! with haproxy, and `spawn` returns when haproxy's process `execve`s or
//! reaches its hold), waits for haproxy, ends the namespace, and leaves as
//! haproxy left: its exit status, or killed by its signal. Both children
//! get SIGKILL should the reaper die first (the check's timeout kills its
//! process group, haproxy among it).
//!
//! The init is a copy of the gate, and its `/proc/1/cmdline` would show the
//! gate's command line to the render: it and the environment are blanked
//! in the child before the forks ([`Exposed`]); the init is not dumpable,
//! so its memory is no process's of the check to read, and it is named
//! `rendergate-init`.
//!
//! Raw system calls only, after the gate's fork and before `execve`.

use super::{Layer, landlock, tagged};
use std::io;

/// Where the gate's command line and environment lie in its memory
/// (`/proc/self/stat`'s `arg_start` to `env_end`), read once in the gate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exposed {
    args: (usize, usize),
    env: (usize, usize),
}

impl Exposed {
    /// This process's, read once (empty when `/proc` cannot tell).
    pub fn of_this_process() -> Exposed {
        static EXPOSED: std::sync::OnceLock<Exposed> = std::sync::OnceLock::new();
        *EXPOSED.get_or_init(|| {
            let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
            Exposed::parse(&stat).unwrap_or_default()
        })
    }

    fn parse(stat: &str) -> Option<Exposed> {
        // fields 48 to 51 (counted from 1), after the command's parenthesis
        let fields: Vec<usize> = stat
            .rsplit_once(") ")?
            .1
            .split_whitespace()
            .skip(45)
            .take(4)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        let [a, b, c, d] = fields[..] else { return None };
        (a <= b && c <= d).then_some(Exposed { args: (a, b), env: (c, d) })
    }

    /// In the child: overwrites both with zeros (its own copy of them).
    fn blank(self) {
        for (start, end) in [self.args, self.env] {
            if start < end {
                // SAFETY: the ranges lie in the stack the kernel set up for
                // this process (a copy of the gate's), mapped and writable
                // for its whole life; nothing here reads them again.
                unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
            }
        }
    }
}

/// In the child, after `unshare(CLONE_NEWPID)`: returns in haproxy's
/// process (pid 2 of the new namespace); in the init and the reaper, never.
pub fn split(exposed: Exposed) -> io::Result<()> {
    exposed.blank();
    let init = match fork()? {
        0 => init(),
        pid => pid,
    };
    match fork() {
        Ok(0) => Ok(()),
        Ok(haproxy) => reap(haproxy, init),
        Err(e) => {
            // SAFETY: our own child.
            unsafe { libc::kill(init, libc::SIGKILL) };
            Err(e)
        }
    }
}

/// A plain fork: 0 in the child (its death signal armed against this
/// process), the child's pid in this one.
fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: no stack given: the child runs on its copy of this one, as
    // after `fork`, but without the C library's at-fork handlers, which are
    // not async-signal-safe.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(tagged(Layer::Namespaces, landlock::errno()));
    }
    if pid == 0 {
        // SAFETY: integer arguments only. This process cannot have died
        // yet but by SIGKILL to the whole group, which the child gets too.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
            return Err(tagged(Layer::DeathSignal, landlock::errno()));
        }
    }
    Ok(pid as libc::pid_t)
}

/// Pid 1: holds nothing and waits; the namespace ends when it is killed.
fn init() -> ! {
    // SAFETY: raw system calls on integers.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0 as libc::c_uint, libc::c_uint::MAX, 0);
        libc::prctl(libc::PR_SET_NAME, c"rendergate-init".as_ptr(), 0, 0, 0);
        // a copy of the gate's memory: no process of the check may read it
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        loop {
            libc::pause();
        }
    }
}

/// The reaper: holds nothing, waits for `haproxy`, kills `init` (the
/// namespace ends with it), leaves as haproxy left.
fn reap(haproxy: libc::pid_t, init: libc::pid_t) -> ! {
    // SAFETY: raw system calls on integers and a status on the stack; the
    // process ends here without running anything of the gate's.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0 as libc::c_uint, libc::c_uint::MAX, 0);
        let mut status = 0;
        loop {
            let r = libc::waitpid(haproxy, &mut status, 0);
            if r == haproxy {
                break;
            }
            if r < 0 && landlock::errno() != libc::EINTR {
                libc::kill(init, libc::SIGKILL);
                libc::_exit(127);
            }
        }
        libc::kill(init, libc::SIGKILL);
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            // its own death by the same signal: the status the gate reads
            libc::signal(signal, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_processs_command_line_and_environment_are_found() {
        let exposed = Exposed::of_this_process();
        let (args, env) = (exposed.args, exposed.env);
        assert!(args.0 < args.1 && env.0 < env.1 && args.1 <= env.0, "{exposed:?}");
        // the command line is what the kernel shows
        let cmdline = std::fs::read("/proc/self/cmdline").unwrap();
        // SAFETY: the range the kernel names, mapped for the process's life.
        let shown = unsafe { std::slice::from_raw_parts(args.0 as *const u8, args.1 - args.0) };
        assert_eq!(shown, &cmdline[..]);
    }

    #[test]
    fn a_stat_line_without_the_fields_gives_none() {
        assert_eq!(Exposed::parse("1 (x) R 0 0"), None);
        let mut fields = vec!["0"; 45];
        fields.extend(["10", "20", "20", "30"]);
        let line = format!("1 (a) b) {}", fields.join(" "));
        assert_eq!(Exposed::parse(&line), Some(Exposed { args: (10, 20), env: (20, 30) }));
    }
}
