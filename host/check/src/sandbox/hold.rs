//! Where a child made ahead ([`crate::standby`]) waits, its sandbox
//! complete, before it becomes haproxy: the hold.
//!
//! At the hold the child first closes every descriptor it inherited but
//! its two pipes (the word's read end, the report's write end). A child
//! forked ahead waits for as long as no render comes, and what it still
//! held would keep other pipes open: another check's output would never
//! end. Closing them also closes std's own exec-error pipe, which makes
//! `spawn` return now: the child is armed. From here the child reports for
//! itself. It reads the word ([`Go`]), lowers its CPU and address-space
//! limits to the check's (a lowered limit needs no privilege and cannot be
//! raised back), and `execve`s haproxy itself. If a step fails, it writes
//! the error code (layer and errno, as `spawn` would have returned it) to
//! the report pipe and exits. End-of-file instead of the word means its
//! check is gone: it exits without running anything.
//!
//! Raw system calls only, on memory prepared before the fork. `close_range`,
//! `read`, `write`, `setrlimit` and `execve` all pass the seccomp filter.

use super::{Layer, landlock, tagged};
use std::ffi::{CString, c_char};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

/// The word to go: the check's own bounds, to which the child lowers the
/// limits it was made with (0: leave it). Sixteen bytes, one atomic pipe write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Go {
    /// `RLIMIT_CPU` in seconds ([`super::rlimits::cpu_seconds`] of the time left).
    pub cpu_seconds: u64,
    /// `RLIMIT_AS` in bytes, the run's bound.
    pub memory: u64,
}

impl Go {
    pub const LEN: usize = 16;

    pub fn to_bytes(self) -> [u8; Go::LEN] {
        let mut word = [0u8; Go::LEN];
        word[..8].copy_from_slice(&self.cpu_seconds.to_ne_bytes());
        word[8..].copy_from_slice(&self.memory.to_ne_bytes());
        word
    }

    fn from_bytes(word: &[u8; Go::LEN]) -> Go {
        let half = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&word[at..at + 8]);
            u64::from_ne_bytes(bytes)
        };
        Go { cpu_seconds: half(0), memory: half(8) }
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
        let mut strings = Vec::new();
        for arg in args {
            strings.push(c(arg.as_bytes())?);
        }
        for (key, value) in env {
            strings.push(c(format!("{key}={value}").as_bytes())?);
        }
        let pointers = |range: std::ops::Range<usize>| {
            strings[range].iter().map(|s| s.as_ptr()).chain([std::ptr::null()]).collect()
        };
        let argv = pointers(0..args.len());
        let envp = pointers(args.len()..strings.len());
        Ok(Image { path, _strings: strings, argv, envp })
    }
}

/// A held child's two pipes and the program it becomes.
#[derive(Clone, Debug)]
pub struct Hold {
    /// The word's read end ([`Go`]).
    pub word: RawFd,
    /// The report's write end: an error code, or end-of-file at `execve`.
    pub report: RawFd,
    pub image: Arc<Image>,
}

impl Hold {
    /// In the child, last: closes what it inherited, waits for the word,
    /// lowers its limits (`limits`: the sandbox set them), becomes haproxy.
    /// Returns only an error before anything was closed (which `spawn`
    /// then reports); afterwards it reports for itself and never returns.
    pub fn run(&self, limits: bool) -> io::Result<()> {
        let e = self.close_inherited();
        if e != 0 {
            return Err(tagged(Layer::Hold, e));
        }
        let code = match self.wait() {
            Ok(go) => self.become_haproxy(go, limits),
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

    /// Every descriptor from 3 up but the two pipes; 0 or an errno.
    fn close_inherited(&self) -> i32 {
        let (low, high) = (self.word.min(self.report), self.word.max(self.report));
        let ranges = [(3, low - 1), (low + 1, high - 1), (high + 1, RawFd::MAX)];
        for (first, last) in ranges {
            if first > last {
                continue;
            }
            // SAFETY: integer arguments only.
            let r = unsafe {
                libc::syscall(libc::SYS_close_range, first as libc::c_uint, last as libc::c_uint, 0)
            };
            if r != 0 {
                return landlock::errno();
            }
        }
        0
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
            if n < 0 && landlock::errno() == libc::EINTR {
                continue;
            }
            return Err(());
        }
    }

    /// Lowers the limits and execs; the error code when it could not.
    fn become_haproxy(&self, go: Go, limits: bool) -> i32 {
        if limits {
            for (resource, value) in
                [(libc::RLIMIT_CPU, go.cpu_seconds), (libc::RLIMIT_AS, go.memory)]
            {
                if value == 0 {
                    continue;
                }
                let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
                // SAFETY: a valid rlimit struct on the stack.
                if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                    return code(tagged(Layer::Rlimits, landlock::errno()));
                }
            }
        }
        let image = &self.image;
        // SAFETY: null-terminated arrays of pointers to C strings the image owns.
        unsafe {
            libc::execve(image.path.as_ptr(), image.argv.as_ptr(), image.envp.as_ptr());
        }
        // as `spawn` reports a failed exec: the plain errno
        landlock::errno()
    }
}

fn code(e: io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EINVAL)
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

    #[test]
    fn the_word_is_read_as_written() {
        let go = Go { cpu_seconds: 31, memory: 16 << 30 };
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
