//! One `haproxy -c` as a process group of its own: started in the check
//! directory (the child `fchdir`s to its descriptor, under the sandbox
//! prepared for it) with stdout and stderr on one pipe, so HAProxy's lines
//! keep their order; its output read until it has exited and the output has
//! ended, or the deadline passed; and the whole group stopped on every way
//! out: exit, deadline, or the check being dropped.

use super::layout;
use super::sandbox;
use super::verdict::{Exit, Transcript};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

/// The command of one check's child: stdout and stderr on `output`, the
/// write end of one pipe, in a process group of its own (stopped by
/// [`Running`], never killed alone: a reaper killed before it has reaped
/// would orphan its children).
/// The sandbox and the hold go on it next ([`sandbox::Prepared::apply`]);
/// the child `execve`s HAProxy itself, with its arguments ([`image`]).
pub fn command(binary: &Path, output: OwnedFd) -> io::Result<tokio::process::Command> {
    let stderr = output.try_clone()?;
    let mut cmd = tokio::process::Command::new(binary);
    // No current_dir: the child fchdirs to the directory's descriptor.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(output))
        .stderr(Stdio::from(stderr))
        .process_group(0);
    // `cmd` holds the only copies of the write end: once it is dropped
    // (after `spawn`), the reader sees end-of-file when HAProxy's group is gone.
    Ok(cmd)
}

/// What a held child `execve`s: `binary` with HAProxy's arguments and
/// exactly `env`. `-V` outranks `quiet` (and anything else that would make
/// HAProxy keep its alerts to itself): nothing in a render silences them.
/// No `-L`: HAProxy takes its local peer name from the host name, as bare
/// `haproxy -c` does.
pub fn image(
    binary: &Path,
    dns_skip: bool,
    env: &[(String, String)],
) -> io::Result<sandbox::hold::Image> {
    let argv0 = binary.to_string_lossy();
    let mut args = vec![&*argv0];
    if dns_skip {
        args.push("-dr");
    }
    args.extend(["-V", "-c", "-f", layout::CONFIG_NAME]);
    sandbox::hold::Image::new(binary, &args, env)
}

/// What a check's child becomes: the binary, and the world it enters
/// (whose failed operation a failed start names).
#[derive(Clone, Debug)]
pub struct Program {
    pub binary: std::path::PathBuf,
    pub world: Option<std::sync::Arc<sandbox::world::World>>,
}

/// The message for a failed `spawn` of `binary`: the sandbox layer that
/// failed, when one did.
pub fn spawn_failure(program: &Program, e: &io::Error) -> String {
    sandbox::spawn_failure(e, program.world.as_deref())
        .unwrap_or_else(|| format!("cannot start {}: {e}", program.binary.display()))
}

/// A started `haproxy -c`: its process group, the child, and the read end
/// of its output. Fields drop in order: the check is stopped before
/// anything else is cleaned up, and the thread that started it (whose end
/// would kill it, its parent-death signal) is let go last.
pub struct Running {
    group: GroupGuard,
    child: tokio::process::Child,
    output: tokio::net::unix::pipe::Receiver,
    /// A held child's report: an error code written when it could not become haproxy.
    report: OwnedFd,
    program: Program,
    starter: std::sync::mpsc::Sender<()>,
}

impl Running {
    /// `child` of `program`, started by [`command`] with the write end of
    /// `output`'s pipe, held ([`sandbox::Hold`]) with `report`'s and given
    /// its word on `word`, whose end stops it where `word_stops` (a PID
    /// namespace of its own); `starter` keeps the thread that forked it
    /// until the group is dead.
    pub fn new(
        child: tokio::process::Child,
        program: Program,
        (output, report): (OwnedFd, OwnedFd),
        (word, word_stops): (std::fs::File, bool),
        starter: std::sync::mpsc::Sender<()>,
    ) -> Result<Running, String> {
        let pid = child.id().ok_or("haproxy exited before it could be watched")?;
        let group = GroupGuard { pgid: Some(pid as libc::pid_t), word: Some(word), word_stops };
        let output = tokio::net::unix::pipe::Receiver::from_owned_fd(output)
            .map_err(|e| format!("cannot read haproxy's output: {e}"))?;
        Ok(Running { group, child, output, report, program, starter })
    }

    /// Stops the check and waits until its child is gone: in a PID
    /// namespace, the reaper is given [`STOP_GRACE`] to reap and leave
    /// before the group is killed.
    async fn stop(&mut self) {
        if self.group.end() {
            let _ = tokio::time::timeout(STOP_GRACE, self.child.wait()).await;
        }
        self.group.kill();
        let _ = self.child.wait().await;
    }
}

/// How long a reaper is given to reap a stopped check's processes and
/// leave, before its group is killed: it takes well under a millisecond.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads HAProxy's output into `transcript` until it has exited and its
/// output has ended, or the deadline passes (then the check is stopped and
/// waited for, [`Running::stop`]). Anything HAProxy left running in the
/// background dies as soon as it exits. With the exit comes the thread that started it, to be
/// let go once the verdict is out ([`crate::aftercare`]). Given a
/// `resident` bound, the run is stopped once its processes touch more
/// ([`crate::resident`]).
pub async fn collect_output(
    mut running: Running,
    transcript: &mut Transcript<'_>,
    deadline: Instant,
    started: Instant,
    resident: Option<u64>,
) -> Result<(Exit, std::sync::mpsc::Sender<()>), String> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut status = None;
    let mut ended = false;
    let root = running.group.pgid.map_or(0, |pid| pid as u32);
    let (first, period) = (crate::resident::FIRST, crate::resident::PERIOD);
    let mut watch = tokio::time::interval_at(Instant::now() + first, period);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while status.is_none() || !ended {
        tokio::select! {
            _ = watch.tick(), if status.is_none() && resident.is_some() => {
                let touched = crate::resident::resident(root);
                if let Some(bound) = resident.filter(|bound| touched > *bound) {
                    running.stop().await;
                    return Err(format!(
                        "haproxy -c touched {} MiB of memory, past the check's limit of {} (--check-memory-max), and was stopped",
                        touched >> 20,
                        super::verdict::bytes(bound)
                    ));
                }
            },
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
                running.stop().await;
                return Err(format!("haproxy -c timed out after {:.1?}", deadline.saturating_duration_since(started)));
            }
        }
    }
    // a held child that never became haproxy said why before it exited
    if let Some(e) = sandbox::hold::reported(running.report.as_raw_fd()) {
        return Err(spawn_failure(&running.program, &e));
    }
    let exit = Exit::from(status.expect("the loop ends once haproxy has exited"));
    // the group is dead: only the thread is kept
    Ok((exit, running.starter))
}

/// A check's processes, stopped when dropped, so that a cancelled check
/// leaves nothing running. In a PID namespace of its own the check stops
/// when its word's pipe ends (`sandbox::processes`): dropped, the group is
/// killed once the reaper has left, on the thread that started it
/// ([`crate::standby`]). Without one, the group is killed at once.
struct GroupGuard {
    pgid: Option<libc::pid_t>,
    /// The write end of the word's pipe.
    word: Option<std::fs::File>,
    /// Whether the word's end stops the check.
    word_stops: bool,
}

impl GroupGuard {
    /// Closes the word's pipe; whether that stops the check (then the
    /// group is killed once the reaper has left, never before).
    fn end(&mut self) -> bool {
        self.word = None;
        self.word_stops
    }

    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take().and_then(rustix::process::Pid::from_raw) {
            // ESRCH (the group is already gone) is the usual, fine answer.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // a stop begun here may have been dropped half way (a caller's own
        // timeout): the thread that started the check finishes it
        if !self.end() {
            self.kill();
        }
    }
}

/// Waits for the child `pid` and gives its exit code (tests: a child that
/// was killed fails the test).
#[cfg(test)]
pub fn exit_code_of(pid: libc::pid_t) -> i32 {
    let pid = rustix::process::Pid::from_raw(pid).expect("a child's pid");
    let waited = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    let (_, status) = waited.expect("waitpid").expect("a status");
    status.exit_status().unwrap_or_else(|| panic!("killed, not exited: {status:?}"))
}

/// One pipe, both ends close-on-exec (a child gets its copies through its
/// stdout and stderr, or its hold). `std::io::pipe` needs Rust 1.87; the
/// workspace promises 1.85.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}
