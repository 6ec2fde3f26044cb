//! `serve`'s stdin and stdout. When they are pipes, as a controller
//! starts the gate, they are read and written through the runtime's reactor
//! (`tokio::net::unix::pipe`); otherwise (a terminal, a file) through
//! tokio's own stdin and stdout, which hand every read and write to a
//! blocking thread. That hop costs a line about 0.1 ms each way, on the
//! path from a render to its verdict (BENCHMARKS.md).
//!
//! An input pipe is made to hold [`INPUT_PIPE`] bytes where the host allows
//! it: a render's line of some hundreds of kilobytes then goes in with one
//! write, where a pipe's default 64 KiB would have the controller and the
//! gate take turns, one wake-up each way per 64 KiB.

use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use tokio::io::{AsyncRead, AsyncWrite};

/// What an input pipe is asked to hold: Linux's default ceiling for an
/// unprivileged process (`/proc/sys/fs/pipe-max-size`).
pub const INPUT_PIPE: usize = 1024 * 1024;

/// How much of the input is read at once.
pub const INPUT_BUFFER: usize = 256 * 1024;

/// stdin, for reading lines.
pub fn stdin() -> Box<dyn AsyncRead + Unpin + Send> {
    match pipe(libc::STDIN_FILENO)
        .inspect(|fd| enlarge(fd, INPUT_PIPE))
        .and_then(|fd| tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok())
    {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdin()),
    }
}

/// stdout, for writing lines.
pub fn stdout() -> Box<dyn AsyncWrite + Unpin + Send> {
    match pipe(libc::STDOUT_FILENO)
        .and_then(|fd| tokio::net::unix::pipe::Sender::from_owned_fd(fd).ok())
    {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdout()),
    }
}

/// Asks the pipe `fd` to hold `size` bytes; where the host refuses (a lower
/// `pipe-max-size`, a full quota), it keeps what it holds.
fn enlarge(fd: &OwnedFd, size: usize) {
    use std::os::fd::AsRawFd;
    // SAFETY: an integer argument on a descriptor we own.
    let held = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, size as libc::c_int) };
    if held < 0 {
        tracing::debug!("stdin: the pipe keeps its size: {}", std::io::Error::last_os_error());
    }
}

/// A descriptor of its own for `fd`, when `fd` is a pipe (or FIFO).
fn pipe(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: 0 and 1 stay open for the life of the process.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    use std::os::unix::fs::FileTypeExt;
    file.metadata().ok()?.file_type().is_fifo().then(|| file.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pipe_is_taken_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("f")).unwrap();
        use std::os::fd::AsRawFd;
        assert!(pipe(file.as_raw_fd()).is_none());
        let mut fds = [0; 2];
        // SAFETY: a valid array of two ints for pipe to fill.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        assert!(pipe(fds[0]).is_some());
        assert!(pipe(fds[1]).is_some());
        // SAFETY: both ends are ours.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }

    #[test]
    fn an_input_pipe_is_made_to_hold_a_large_line() {
        use std::os::fd::{AsRawFd, FromRawFd};
        let mut fds = [0; 2];
        // SAFETY: a valid array of two ints for pipe to fill.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both ends are ours, owned from here.
        let (read, _write) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: a query on a descriptor we own.
        let before = unsafe { libc::fcntl(read.as_raw_fd(), libc::F_GETPIPE_SZ) };
        assert!((before as usize) < INPUT_PIPE, "{before}");
        enlarge(&read, INPUT_PIPE);
        // SAFETY: as above.
        let held = unsafe { libc::fcntl(read.as_raw_fd(), libc::F_GETPIPE_SZ) };
        assert_eq!(held as usize, INPUT_PIPE);
    }
}
