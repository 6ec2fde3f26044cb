//! One `haproxy -c` as a process group of its own: started in the check
//! directory (the child `fchdir`s to its descriptor, under the sandbox
//! prepared for it) with stdout and stderr on one pipe, so HAProxy's lines
//! keep their order; its output read until it has exited and the output has
//! ended, or the deadline passed; and the whole group killed on every way
//! out: exit, deadline, or the check being dropped.

use super::layout;
use super::sandbox;
use super::verdict::{Exit, Transcript};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

/// Starts `binary -c` in the check directory `sandboxed` was prepared for,
/// in a process group of its own (`-dr` with `dns_skip`).
pub fn spawn(
    binary: &Path,
    dns_skip: bool,
    sandboxed: &sandbox::Prepared,
) -> Result<Running, String> {
    let (reader, writer) =
        pipe().map_err(|e| format!("cannot create a pipe for haproxy's output: {e}"))?;
    let spawned = {
        let stderr = writer
            .try_clone()
            .map_err(|e| format!("cannot create a pipe for haproxy's output: {e}"))?;
        let mut cmd = tokio::process::Command::new(binary);
        if dns_skip {
            cmd.arg("-dr");
        }
        // `-V` outranks `quiet` (and anything else that would make HAProxy
        // keep its alerts to itself): nothing in a render silences them.
        // No `-L`: HAProxy takes its local peer name from the host name, as
        // bare `haproxy -c` does. No current_dir: the child fchdirs to the
        // directory's descriptor.
        cmd.args(["-V", "-c", "-f", layout::CONFIG_NAME])
            .stdin(Stdio::null())
            .stdout(Stdio::from(writer))
            .stderr(Stdio::from(stderr))
            .process_group(0)
            .kill_on_drop(true);
        sandboxed.apply(&mut cmd);
        cmd.spawn()
        // `cmd` drops here with our copies of the write end, so the reader
        // sees end-of-file once HAProxy's group is gone.
    };
    let child = spawned.map_err(|e| {
        sandbox::spawn_failure(&e)
            .unwrap_or_else(|| format!("cannot start {}: {e}", binary.display()))
    })?;
    let Some(pid) = child.id() else {
        return Err("haproxy exited before it could be watched".into());
    };
    let group = GroupGuard { pgid: Some(pid as libc::pid_t) };
    let output = tokio::net::unix::pipe::Receiver::from_owned_fd(reader)
        .map_err(|e| format!("cannot read haproxy's output: {e}"))?;
    Ok(Running { group, child, output })
}

/// A started `haproxy -c`: its process group, the child, and the read end
/// of its output. Fields drop in order: the whole group is killed before
/// anything else is cleaned up.
pub struct Running {
    group: GroupGuard,
    child: tokio::process::Child,
    output: tokio::net::unix::pipe::Receiver,
}

/// Reads HAProxy's output into `transcript` until it has exited and its
/// output has ended, or the deadline passes (then the group is killed and
/// waited for). Anything HAProxy left running in the background dies as
/// soon as it exits.
pub async fn collect_output(
    mut running: Running,
    transcript: &mut Transcript<'_>,
    deadline: Instant,
    started: Instant,
) -> Result<Exit, String> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut status = None;
    let mut ended = false;
    while status.is_none() || !ended {
        tokio::select! {
            waited = running.child.wait(), if status.is_none() => match waited {
                Ok(exit) => {
                    status = Some(exit);
                    running.group.kill();
                }
                Err(e) => return Err(format!("waiting for haproxy failed: {e}")),
            },
            read = running.output.read(&mut buf), if !ended => match read {
                Ok(0) => ended = true,
                Ok(n) => transcript.feed(&buf[..n]),
                Err(e) => return Err(format!("reading haproxy's output failed: {e}")),
            },
            () = tokio::time::sleep_until(deadline) => {
                if status.is_some() {
                    // a process outside the group still holds the pipe open
                    return Err("haproxy exited but its output never ended".into());
                }
                running.group.kill();
                let _ = running.child.wait().await;
                return Err(format!("haproxy -c timed out after {:.1?}", deadline.saturating_duration_since(started)));
            }
        }
    }
    Ok(Exit::from(status.expect("the loop ends once haproxy has exited")))
}

/// Kills a process group when dropped, so a cancelled check leaves nothing running.
struct GroupGuard {
    pgid: Option<libc::pid_t>,
}

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // ESRCH (the group is already gone) is the usual, fine answer.
            // SAFETY: killpg has no memory effects; pgid is our child's own group.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One pipe, both ends close-on-exec (the child gets its copies through
/// stdout/stderr only). `std::io::pipe` needs Rust 1.87; the workspace
/// promises 1.85.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((reader, writer))
}
