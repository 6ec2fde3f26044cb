//! Where a child made ahead ([`crate::standby`]) waits, its sandbox
//! complete, before it becomes haproxy: the hold.
//!
//! At the hold the child first closes every descriptor it inherited but
//! its pipes (the word's read end, the report's write end, its keeper's).
//! A child forked ahead waits for as long as no render comes, and what it
//! still held would keep other pipes open: another check's output would
//! never end. Closing them also closes std's own exec-error pipe, which
//! makes `spawn` return now: the child is armed. From here the child
//! reports for itself. It reads the word ([`Go`]), lowers its CPU and
//! address-space limits to the check's (a lowered limit needs no privilege
//! and cannot be raised back), and `execve`s haproxy itself. If a step
//! fails, it writes the error code (layer and errno, as `spawn` would have
//! returned it) to the report pipe and exits. End-of-file instead of the
//! word means its check is gone: it exits without running anything.
//!
//! Before the hold (and before seccomp, which refuses it) the child makes
//! a **keeper** ([`Keeper::spawn`]): a process sharing its memory
//! (`CLONE_VM`), which only waits for the child's `execve` (or exit) and
//! then exits. `execve` first lets go of the memory the child copied from
//! the gate at the fork; were the child its only user, `execve` would tear
//! it down there and then, about 0.2 ms of page tables on the way from a
//! render to its verdict. Shared, it is torn down by the keeper as it
//! exits, while haproxy starts. The keeper is its maker's sibling
//! (`CLONE_PARENT`), never haproxy's child: the gate's, or in a PID
//! namespace the reaper's ([`super::processes`]), which reaps it; in the
//! check's process group. It keeps no descriptor but its pipe's read end,
//! whose write end closes on the child's `execve`.
//!
//! Raw system calls only, on memory prepared before the fork (the keeper
//! runs on its own copy of a stack the gate mapped, with a guard page,
//! [`super::processes::map_clone_stack`]). `close_range`, `read`, `write`,
//! `setrlimit` and `execve` all pass the seccomp filter.

use super::{Layer, tagged};
use std::ffi::{CString, c_char};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

/// The word to go: the check's own bounds, to which the child lowers the
/// limits it was made with (0: leave it). 24 bytes, one atomic pipe write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Go {
    /// `RLIMIT_CPU` in seconds ([`super::rlimits::cpu_seconds`] of the time left).
    pub cpu_seconds: u64,
    /// `RLIMIT_AS` in bytes, the run's bound.
    pub memory: u64,
    /// `RLIMIT_FSIZE` in bytes, the run's bound.
    pub file_size: u64,
}

impl Go {
    pub const LEN: usize = 24;

    pub fn to_bytes(self) -> [u8; Go::LEN] {
        let mut word = [0u8; Go::LEN];
        word[..8].copy_from_slice(&self.cpu_seconds.to_ne_bytes());
        word[8..16].copy_from_slice(&self.memory.to_ne_bytes());
        word[16..].copy_from_slice(&self.file_size.to_ne_bytes());
        word
    }

    fn from_bytes(word: &[u8; Go::LEN]) -> Go {
        let field = |at: usize| u64::from_ne_bytes(std::array::from_fn(|i| word[at + i]));
        Go { cpu_seconds: field(0), memory: field(8), file_size: field(16) }
    }
}

/// The program a held child becomes, prepared in the parent: `execve`'s
/// three arguments as C strings and their null-terminated pointer arrays.
#[derive(Debug)]
pub struct Image {
    path: CString,
    _strings: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

// SAFETY: the pointers point into `_strings`, owned alongside and never
// changed after `new`; the image is only read.
unsafe impl Send for Image {}
// SAFETY: as above.
unsafe impl Sync for Image {}

impl Image {
    /// `path` run with `args` (the first is `argv[0]`) and exactly `env`.
    pub fn new(
        path: &std::path::Path,
        args: &[&str],
        env: &[(String, String)],
    ) -> io::Result<Image> {
        use std::os::unix::ffi::OsStrExt;
        let c = |bytes: &[u8]| CString::new(bytes).map_err(io::Error::other);
        let path = c(path.as_os_str().as_bytes())?;
        let strings = (args.iter().map(|arg| c(arg.as_bytes())))
            .chain(env.iter().map(|(key, value)| c(format!("{key}={value}").as_bytes())))
            .collect::<io::Result<Vec<_>>>()?;
        let pointers = |range: std::ops::Range<usize>| {
            strings[range].iter().map(|s| s.as_ptr()).chain([std::ptr::null()]).collect()
        };
        let argv = pointers(0..args.len());
        let envp = pointers(args.len()..strings.len());
        Ok(Image { path, _strings: strings, argv, envp })
    }
}

/// What a held child's keeper needs: its pipe.
#[derive(Clone, Debug)]
pub struct Keeper {
    /// The read end: end-of-file once the child has `execve`d or exited.
    pub read: RawFd,
    /// The write end, close-on-exec, kept open by the child alone.
    pub write: RawFd,
}

impl Keeper {
    /// In the forked child, before seccomp (which refuses it): starts the
    /// keeper.
    pub fn spawn(&self) -> io::Result<()> {
        // SAFETY: the keeper makes only raw system calls and reads nothing
        // of this process's memory but its argument.
        unsafe { super::processes::clone(keeper_main, KEEPER_FLAGS, self.read, Layer::Hold) }
            .map(drop)
    }
}

/// A held child's pipes, its keeper and the program it becomes.
#[derive(Clone, Debug)]
pub struct Hold {
    /// The word's read end ([`Go`]).
    pub word: RawFd,
    /// The report's write end: an error code, or end-of-file at `execve`.
    pub report: RawFd,
    pub keeper: Keeper,
    pub image: Arc<Image>,
}

/// The keeper's flags: the child's memory, shared; its maker's sibling (the
/// gate's child, or in a PID namespace the reaper's), never haproxy's
/// (haproxy never has a child it did not make).
const KEEPER_FLAGS: libc::c_int = libc::CLONE_VM | libc::CLONE_PARENT | libc::SIGCHLD;

impl Hold {
    /// In the child, last: closes what it inherited, waits for the word,
    /// lowers its limits (`limits`: the sandbox set them), becomes haproxy.
    /// Returns only an error before anything was closed (which `spawn`
    /// then reports); afterwards it reports for itself and never returns.
    pub fn run(&self, limits: bool) -> io::Result<()> {
        // every descriptor from 3 up but the word's, the report's and the
        // keeper's write end
        let e = close_all_but(3, &[self.word, self.report, self.keeper.write]);
        if e != 0 {
            return Err(tagged(Layer::Hold, e));
        }
        let code = match self.wait() {
            Ok(go) => self.become_haproxy(go, limits).raw_os_error().unwrap_or(libc::EINVAL),
            Err(()) => 0,
        };
        if code != 0 {
            let bytes = code.to_ne_bytes();
            // SAFETY: a valid buffer; the report pipe is ours.
            unsafe {
                libc::write(self.report, bytes.as_ptr().cast(), bytes.len());
            }
        }
        // SAFETY: ends this process without running anything of the parent's.
        unsafe { libc::_exit(127) }
    }

    /// The word, or end-of-file (the check is gone).
    fn wait(&self) -> Result<Go, ()> {
        let mut word = [0u8; Go::LEN];
        loop {
            // SAFETY: a valid buffer of `Go::LEN` bytes.
            let n = unsafe { libc::read(self.word, word.as_mut_ptr().cast(), Go::LEN) };
            if n == Go::LEN as isize {
                return Ok(Go::from_bytes(&word));
            }
            if n < 0 && super::errno() == libc::EINTR {
                continue;
            }
            return Err(());
        }
    }

    /// Lowers the limits and execs; why it could not.
    fn become_haproxy(&self, go: Go, limits: bool) -> io::Error {
        if limits {
            use rustix::process::{Resource, Rlimit};
            for (resource, value) in [
                (Resource::Cpu, go.cpu_seconds),
                (Resource::As, go.memory),
                (Resource::Fsize, go.file_size),
            ] {
                if value == 0 {
                    continue;
                }
                let limit = Rlimit { current: Some(value), maximum: Some(value) };
                if let Err(e) = rustix::process::setrlimit(resource, limit) {
                    return tagged(Layer::Rlimits, e.raw_os_error());
                }
            }
        }
        let image = &self.image;
        // SAFETY: null-terminated arrays of pointers to C strings the image owns.
        unsafe {
            libc::execve(image.path.as_ptr(), image.argv.as_ptr(), image.envp.as_ptr());
        }
        // as `spawn` reports a failed exec: the plain errno
        io::Error::from_raw_os_error(super::errno())
    }
}

/// The keeper: keeps nothing open but its pipe's read end, waits for its
/// end-of-file (the child's `execve` or exit), and exits, letting go of the
/// memory it shares with the child. `errno` is the child's (thread-local
/// storage is shared too): nothing here sets it but a failed call, which
/// these are not (no handler can interrupt the read: only SIGKILL comes).
extern "C" fn keeper_main(arg: *mut libc::c_void) -> libc::c_int {
    let read = arg as isize as RawFd;
    close_all_but(0, &[read]);
    // SAFETY: a constant C string; names this thread only.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"rendergate-keep".as_ptr(), 0, 0, 0) };
    let mut byte = 0u8;
    // SAFETY: a valid one-byte buffer; returns at end-of-file.
    unsafe {
        libc::read(read, (&mut byte as *mut u8).cast(), 1);
        libc::_exit(0)
    }
}

/// Closes every descriptor from `first` up but `keep`; 0 or an errno.
/// Raw system calls only.
pub(super) fn close_all_but(first: RawFd, keep: &[RawFd]) -> i32 {
    let mut from = first as libc::c_uint;
    // at most three kept, in any order: each step closes up to the lowest
    // left, the last up to the highest descriptor there can be
    let mut kept = [libc::c_uint::MAX; 3];
    for (slot, fd) in kept.iter_mut().zip(keep) {
        *slot = *fd as libc::c_uint;
    }
    kept.sort_unstable();
    for fd in kept.into_iter().chain([libc::c_uint::MAX]) {
        if from < fd {
            // SAFETY: integer arguments only.
            let r = unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0) };
            if r != 0 {
                return super::errno();
            }
        }
        from = from.max(fd.saturating_add(1));
    }
    0
}

/// The code a held child reported, if it reported one: read once it has
/// exited, from the report's read end (non-blocking).
pub fn reported(report: RawFd) -> Option<io::Error> {
    let mut bytes = [0u8; 4];
    // SAFETY: a valid buffer of 4 bytes.
    let n = unsafe { libc::read(report, bytes.as_mut_ptr().cast(), bytes.len()) };
    (n == 4).then(|| io::Error::from_raw_os_error(i32::from_ne_bytes(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// The parent and the process group of `pid`, while it lives.
    fn parent_and_group(pid: i32) -> Option<(i32, i32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // after the command's closing parenthesis: state, ppid, pgrp
        let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
        Some((fields[1].parse().ok()?, fields[2].parse().ok()?))
    }

    /// The pids in process group `pgid` but `but`.
    fn group_members(pgid: i32, but: i32) -> Vec<i32> {
        let entries = std::fs::read_dir("/proc").unwrap().flatten();
        let pids = entries.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok());
        pids.filter(|&pid| pid != but && parent_and_group(pid).is_some_and(|(_, g)| g == pgid))
            .collect()
    }

    /// A child makes its keeper, waits, then `execve`s: the keeper is this
    /// process's child, in the child's group, holding nothing but its
    /// pipe's read end, and it exits once the child has `execve`d.
    #[test]
    fn the_keeper_holds_only_its_pipe_and_leaves_at_the_childs_execve() {
        let keeper_pipe = crate::process::pipe().unwrap();
        let (go_read, go_write) = crate::process::pipe().unwrap();
        let keeper = Keeper { read: keeper_pipe.0.as_raw_fd(), write: keeper_pipe.1.as_raw_fd() };
        let truth = CString::new("/bin/true").unwrap();
        let argv = [truth.as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<c_char>()];
        super::super::processes::map_clone_stack();
        // SAFETY: the child makes raw system calls only and leaves by
        // execve or _exit.
        let child = unsafe { libc::fork() };
        if child == 0 {
            unsafe {
                libc::setpgid(0, 0);
                if keeper.spawn().is_err() {
                    libc::_exit(3);
                }
                let mut byte = 0u8;
                libc::read(go_read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
                libc::execve(truth.as_ptr(), argv.as_ptr(), envp.as_ptr());
                libc::_exit(4);
            }
        }
        drop(keeper_pipe);
        // the keeper, once it has closed what it inherited
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let (kept, fds) = loop {
            let members = group_members(child, child);
            if let [kept] = members[..] {
                let fds = std::fs::read_dir(format!("/proc/{kept}/fd")).unwrap().count();
                if fds == 1 {
                    break (kept, fds);
                }
            }
            assert!(std::time::Instant::now() < deadline, "no keeper: {members:?}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(fds, 1);
        let (ppid, _) = parent_and_group(kept).unwrap();
        let own = rustix::process::getpid().as_raw_nonzero().get();
        assert_eq!(ppid, own, "the keeper is ours, not the child's");
        // go: the child execs, the keeper leaves
        assert_eq!(rustix::io::write(&go_write, b"g"), Ok(1));
        assert_eq!(crate::process::exit_code_of(kept), 0, "the keeper");
        assert_eq!(crate::process::exit_code_of(child), 0, "the child");
    }

    #[test]
    fn closing_all_but_some_keeps_exactly_those() {
        let pipes: Vec<_> = (0..4).map(|_| crate::process::pipe().unwrap()).collect();
        let keep = [pipes[2].1.as_raw_fd(), pipes[0].0.as_raw_fd(), pipes[3].0.as_raw_fd()];
        let (report_read, report_write) = crate::process::pipe().unwrap();
        // SAFETY: the child makes raw system calls only and leaves with _exit.
        let child = unsafe { libc::fork() };
        if child == 0 {
            unsafe {
                let report = libc::dup(report_write.as_raw_fd());
                let e = close_all_but(3, &[keep[0], keep[1], report]);
                // what is open now, of the pipes' and the report's
                let mut open = 0u8;
                for fd in 3..64 {
                    if libc::fcntl(fd, libc::F_GETFD) >= 0 {
                        open += 1;
                    }
                }
                let kept_open = [keep[0], keep[1], report]
                    .iter()
                    .all(|fd| libc::fcntl(*fd, libc::F_GETFD) >= 0);
                let answer = [e as u8, open, kept_open as u8];
                libc::write(report, answer.as_ptr().cast(), 3);
                libc::_exit(0);
            }
        }
        drop(report_write);
        let mut answer = [0u8; 3];
        assert_eq!(rustix::io::read(&report_read, &mut answer), Ok(3));
        assert_eq!(crate::process::exit_code_of(child), 0);
        assert_eq!(answer, [0, 3, 1], "errno, descriptors open from 3 up, the kept ones open");
    }

    #[test]
    fn the_word_is_read_as_written() {
        let go = Go { cpu_seconds: 31, memory: 16 << 30, file_size: 256 << 20 };
        assert_eq!(Go::from_bytes(&go.to_bytes()), go);
    }

    #[test]
    fn an_image_holds_null_terminated_arrays() {
        let env = [("A".to_owned(), "b".to_owned())];
        let image =
            Image::new(std::path::Path::new("/bin/haproxy"), &["haproxy", "-c"], &env).unwrap();
        assert_eq!(image.argv.len(), 3);
        assert!(image.argv[2].is_null());
        assert_eq!(image.envp.len(), 2);
        // SAFETY: pointers into the image's own strings.
        let env0 = unsafe { std::ffi::CStr::from_ptr(image.envp[0]) };
        assert_eq!(env0.to_str().unwrap(), "A=b");
        assert!(Image::new(std::path::Path::new("/bin/x"), &["a\0b"], &[]).is_err());
    }
}
