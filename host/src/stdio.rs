//! `serve`'s stdin and stdout. When they are pipes, as a controller
//! starts the gate, they are read and written through the runtime's reactor
//! (`tokio::net::unix::pipe`); otherwise (a terminal, a file) through
//! tokio's own stdin and stdout, which hand every read and write to a
//! blocking thread. That hop costs a line about 0.1 ms each way, on the
//! path from a render to its verdict (BENCHMARKS.md).

use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use tokio::io::{AsyncRead, AsyncWrite};

/// stdin, for reading lines.
pub fn stdin() -> Box<dyn AsyncRead + Unpin + Send> {
    match pipe(libc::STDIN_FILENO)
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
}
