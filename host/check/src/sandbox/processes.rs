//! Processes of the check's own: a PID namespace, its first process, and
//! the reaper that stands for haproxy outside it.
//!
//! The process that unshares a PID namespace stays outside it; its
//! children are inside, the first of them pid 1. HAProxy must not be pid
//! 1: the kernel ignores the signals a namespace's first process has no
//! handler for, among them its own SIGXFSZ at the file-size bound, and a
//! write past the bound would fail (a refusal) where it must stop the check
//! (could not run; docs/checking.md). So the check's child, right after
//! `unshare`, makes two processes ([`split`]): an **init** (pid 1), which
//! shares its memory, closes every descriptor but the word's pipe and
//! waits for its end (its own exit ends the namespace); then
//! **haproxy's process** (pid 2), which goes on to build the world — its
//! `/proc` must be mounted from inside — and `execve`s. The child itself
//! becomes the **reaper** ([`reap`]), which is what the gate spawned and
//! waits for: it closes every descriptor at once (haproxy's output ends
//! with haproxy, and `spawn` returns when haproxy's process `execve`s or
//! reaches its hold), waits for haproxy, ends the namespace, reaps every
//! child it has (the init, the keeper), and leaves as haproxy left: its
//! exit status, or killed by its signal.
//!
//! The gate stops a check (its timeout, its memory bound, a check given up)
//! by closing its end of the word's pipe ([`super::hold`]), which the init
//! watches: the init leaves, the kernel kills every process of the
//! namespace, and the reaper reaps them and leaves as haproxy left. Only
//! then is the check's process group killed. Killed first, the reaper would
//! leave its children (haproxy's process, the keeper, the init) to whoever
//! adopts orphans, and a parent that never reaps (a controller as its
//! container's pid 1) would keep them for ever, the init waiting for the
//! others' pids. The word's end is also the init's end however else the
//! check ends: the gate lets go of the pipe once the check is over, and a
//! gate that dies lets go of everything.
//!
//! The init is a copy of the gate, and its `/proc/1/cmdline` would show the
//! gate's command line to the render: it and the environment are blanked
//! in the child before the forks ([`Exposed`]); the init holds every
//! capability of the check's user namespace (or root's), which HAProxy has
//! dropped, so HAProxy may not trace it: not read its memory, nor see it in
//! the world's `/proc` (`hidepid=4`), where its `mountinfo`, listed from
//! outside the world's root, would show the host's mounts. It is named
//! `rendergate-init`. (Made not dumpable instead, it would also close to
//! the gate the reaper's `/proc` entries, which share its memory.)
//!
//! Raw system calls only, after the gate's fork and before `execve`.

use super::hold::close_all_but;
use super::{Layer, tagged};
use std::io;
use std::os::fd::{BorrowedFd, RawFd};

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
        let mut fields = stat.rsplit_once(") ")?.1.split_whitespace().skip(45);
        let mut next = || fields.next()?.parse().ok();
        let [a, b, c, d] = [next()?, next()?, next()?, next()?];
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
/// `word`: the read end of the hold's word pipe (-1: none), whose write end
/// the gate closes to stop the check.
pub fn split(exposed: Exposed, word: RawFd) -> io::Result<()> {
    exposed.blank();
    // pid 1 shares this process's memory (`CLONE_VM`), so it copies none of
    // it and its end tears none down.
    // SAFETY: the init makes raw system calls only, on its argument.
    let flags = libc::CLONE_VM | libc::SIGCHLD;
    let init = unsafe { clone(init_main, flags, word, Layer::Namespaces)? };
    match fork() {
        Ok(0) => Ok(()),
        Ok(haproxy) => reap(haproxy, init),
        Err(e) => {
            if let Some(init) = rustix::process::Pid::from_raw(init) {
                let _ = rustix::process::kill_process(init, rustix::process::Signal::KILL);
                let _ = rustix::process::waitpid(Some(init), rustix::process::WaitOptions::empty());
            }
            Err(e)
        }
    }
}

/// A plain fork: 0 in the child (its death signal armed against this
/// process), the child's pid in this one.
fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: no stack given: the child runs on its copy of this one, as
    // after `fork`, but without the C library's at-fork handlers, which are
    // not async-signal-safe. (The C library's cached thread id is then
    // stale in the child: nothing here raises or aborts by it.)
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(tagged(Layer::Namespaces, super::errno()));
    }
    if pid == 0 {
        // This process cannot have died yet but by SIGKILL to the whole
        // group, which the child gets too.
        let signal = Some(rustix::process::Signal::KILL);
        rustix::process::set_parent_process_death_signal(signal)
            .map_err(|e| tagged(Layer::DeathSignal, e.raw_os_error()))?;
    }
    Ok(pid as libc::pid_t)
}

/// The stack the clones of a forked child run on: mapped once in the gate
/// ([`map_clone_stack`], before any fork), so that nothing is allocated
/// after one, with a guard page below it, so that an overflow faults rather
/// than writes over the memory beside it. Each forked child has its own
/// copy (a private mapping), used by one clone at most: the init in the
/// reaper's copy, the keeper ([`super::hold`]) in the held child's (forked
/// from the reaper after the init started, or from the gate without a PID
/// namespace). Its top; 0 where it could not be mapped.
static CLONE_STACK: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// `close_range`, `prctl`, `sigprocmask`, `poll`, `read`: a few frames.
const CLONE_STACK_LEN: usize = 16 * 1024;

/// In the gate, before a child that makes clones is forked: maps the clone
/// stack, once.
pub(super) fn map_clone_stack() {
    use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};
    CLONE_STACK.get_or_init(|| {
        let guard = rustix::param::page_size();
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        // SAFETY: a fresh anonymous mapping where the kernel puts it,
        // aliasing nothing; its lowest page becomes the guard. Never unmapped.
        unsafe {
            let Ok(base) = rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                guard + CLONE_STACK_LEN,
                rw,
                MapFlags::PRIVATE,
            ) else {
                return 0;
            };
            match rustix::mm::mprotect(base, guard, MprotectFlags::empty()) {
                Ok(()) => base as usize + guard + CLONE_STACK_LEN,
                Err(_) => 0,
            }
        }
    });
}

/// In a forked child: starts `main(arg)`, a clone with `flags`, on the top
/// of its copy of the clone stack (stacks grow down); its pid, or an error
/// tagged with `layer` (ENOMEM where the gate could map no stack). Unsafe:
/// `main` must make raw system calls only and read no memory but `arg`.
pub(super) unsafe fn clone(
    main: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    flags: libc::c_int,
    arg: RawFd,
    layer: Layer,
) -> io::Result<libc::pid_t> {
    let stack = match CLONE_STACK.get() {
        Some(&top) if top != 0 => top as *mut libc::c_void,
        _ => return Err(tagged(layer, libc::ENOMEM)),
    };
    // SAFETY: the stack is this process's copy of one only a clone of it
    // runs on; `main` keeps to it as the caller promises.
    let pid = unsafe { libc::clone(main, stack, flags, arg as isize as *mut libc::c_void) };
    if pid < 0 {
        return Err(tagged(layer, super::errno()));
    }
    Ok(pid)
}

/// Pid 1: holds nothing but the word's pipe, hears no signal (a
/// namespace's init gets those it has handlers for, and its handlers are
/// the gate's), and waits until the pipe's write end is let go of (the
/// gate stops the check, or the check is over) or the reaper kills it,
/// which ends the namespace. Without a word (a child not held), only the
/// reaper ends it.
extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    use rustix::event::{PollFd, PollFlags};
    let word = arg as isize as RawFd;
    // SAFETY: raw system calls on integers, a signal set on the stack, and
    // the word's descriptor, open in this process until it exits.
    unsafe {
        close_all_but(0, &[word]);
        libc::prctl(libc::PR_SET_NAME, c"rendergate-init".as_ptr(), 0, 0, 0);
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
        let word = (word >= 0).then(|| BorrowedFd::borrow_raw(word));
        // The word is the held child's to read: only the end (or an error)
        // wakes the init; with nothing to watch, nothing does. rustix's
        // poll returns its error without the shared `errno`.
        let mut end = word.as_ref().map(|word| PollFd::new(word, PollFlags::empty()));
        while let Err(rustix::io::Errno::INTR) = rustix::event::poll(end.as_mut_slice(), None) {}
        libc::_exit(0)
    }
}

/// The reaper: holds nothing, waits for `haproxy`, kills `init` (the
/// namespace ends with it) and reaps every child it has (the init, and
/// the keeper haproxy's process made its sibling), then leaves as haproxy
/// left. Its memory, a copy of the gate's, is made not dumpable before it
/// dies by haproxy's signal: no core of it may be written anywhere.
fn reap(haproxy: libc::pid_t, init: libc::pid_t) -> ! {
    // SAFETY: raw system calls on integers and a status on the stack; the
    // process ends here without running anything of the gate's.
    unsafe {
        close_all_but(0, &[]);
        let mut status = 0;
        let found = loop {
            let r = libc::waitpid(haproxy, &mut status, 0);
            if r == haproxy || (r < 0 && super::errno() != libc::EINTR) {
                break r == haproxy;
            }
        };
        libc::kill(init, libc::SIGKILL);
        loop {
            let mut other = 0;
            if libc::waitpid(-1, &mut other, libc::__WALL) < 0 && super::errno() != libc::EINTR {
                break; // ECHILD: none left
            }
        }
        if !found {
            libc::_exit(127);
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
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
    fn the_clone_stack_is_writable_over_a_guard_page() {
        map_clone_stack();
        let top = *CLONE_STACK.get().unwrap();
        assert_ne!(top, 0, "no clone stack was mapped");
        let bottom = top - CLONE_STACK_LEN;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        // the permissions of the mapping holding `address`
        let perms = |address: usize| {
            maps.lines().find_map(|line| {
                let (range, rest) = line.split_once(' ')?;
                let (start, end) = range.split_once('-')?;
                let range =
                    usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?;
                range.contains(&address).then(|| rest[..4].to_owned())
            })
        };
        assert_eq!(perms(bottom).as_deref(), Some("rw-p"), "{maps}");
        assert_eq!(perms(top - 1).as_deref(), Some("rw-p"), "{maps}");
        assert_eq!(perms(bottom - 1).as_deref(), Some("---p"), "{maps}");
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
