//! A check's child made before its render arrives: what does not depend on
//! the render is taken off the path from a render to its verdict.
//!
//! Of what a check's child does before `execve`, only reading the render's
//! files depends on the render. The empty check directory, the Landlock
//! ruleset, the fork, the namespaces, the world's mounts, the capability
//! drop, Landlock and seccomp do not. A [`Standby`] does all of that on a
//! thread of its own. Its child then waits at a [`Hold`], its sandbox
//! complete, just before `execve`. The check writes the render into the
//! directory, which the child sees where a pod keeps it, and gives the word
//! to go ([`Go`]) with its own CPU time and address-space bounds. The child
//! lowers its limits to them and becomes haproxy.
//!
//! A standby serves one check and is gone with it: its directory, its
//! scratch `/tmp` and its processes belong to that check alone. The next
//! standby is made after a check's verdict is out, with what the check
//! left ([`crate::aftercare`]): made while HAProxy runs, or while the
//! verdict is read, it slowed both (they share the host's cores). A check
//! that comes sooner makes its own at once (docs/checking.md, "Checks made
//! ahead"). A standby let go unused (the binary changed, the checker
//! dropped) reads end-of-file at its hold and ends without running
//! anything.
//!
//! The thread that forked the child stays until the check is over and the
//! child has exited: a child's parent-death signal fires when the *thread*
//! that forked it ends, and the world's mounts live in the child's
//! namespaces until it exits. The checker waits for the thread when it goes.

use crate::base::{BaseDir, CheckDir};
use crate::config_dir::ConfigDir;
use crate::prepare::InFlight;
use crate::process::{self, Running};
use crate::sandbox::rlimits::{FILE_SIZE_MAX, Limits};
use crate::sandbox::{Go, Hold, Keeper, Sandbox, network};
use crate::verdict;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The oldest standby a check takes. Its world's mounts are as of when it
/// was made: a file bound on its own (`ld.so.cache`, `openssl.cnf`)
/// replaced on the host since is seen by a check no later than this, or the
/// next one (directories, the CA store's among them, are seen as they are).
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// The CPU limit a standby is made with, before the word lowers it to its
/// check's time left.
pub const ARMED_CPU: Duration = Duration::from_secs(24 * 3600);

/// Where a standby makes its check directory.
pub enum Place {
    /// A fresh directory in the checker's private subdirectory.
    Fresh(Arc<BaseDir>),
    /// The config directory itself (no namespaces), already free for this check.
    ConfigDir(Arc<ConfigDir>, tokio::sync::OwnedSemaphorePermit),
}

impl Place {
    /// The check directory, made now.
    pub fn check_dir(self) -> Result<CheckDir, String> {
        match self {
            Place::Fresh(base) => base.check_dir().map_err(|e| {
                format!("cannot create a check directory in {}: {e}", base.own_path().display())
            }),
            Place::ConfigDir(config_dir, permit) => config_dir
                .enter(permit)
                .map(|in_dir| CheckDir::in_config_dir(config_dir.path(), in_dir))
                .map_err(|e| {
                    format!("cannot use the config directory {}: {e}", config_dir.path().display())
                }),
        }
    }
}

const THREAD_ENDED: &str = "making the check's sandbox failed: its thread ended";

/// What a standby is made of, wherever its directory is made.
pub struct Order {
    pub sandbox: Arc<Sandbox>,
    pub binary: PathBuf,
    pub dns_skip: bool,
    /// The highest address space its check may be given (the word lowers it).
    pub memory: u64,
    /// The checker's blocking work, which the thread is part of for its
    /// whole life.
    pub in_flight: Arc<InFlight>,
    /// Made ahead of its check (not for a check already waiting) by a gate
    /// that copies its pages ahead ([`crate::HaproxyOptions::copy_ahead`]):
    /// it is then given its own copies of the memory the fork shares
    /// ([`own`]), which a check waiting for its child would wait for.
    pub copy_ahead: bool,
}

/// A check's child being made, or made and waiting, for the binary the
/// checker named `judge`.
pub struct Standby {
    judge: Arc<str>,
    /// The sandbox its child was made in: a sandbox made anew since (its
    /// stand-ins' sources changed) makes it stale.
    sandbox: Arc<Sandbox>,
    /// When it was asked for: its world is as of then.
    armed_at: std::time::Instant,
    state: State,
}

enum State {
    Making(oneshot::Receiver<Result<Armed, String>>),
    Made(Result<Armed, String>),
}

/// A standby made: its check directory, empty, and its child on its way to
/// the hold (or already there).
pub struct Armed {
    pub dir: CheckDir,
    pub launch: Launch,
}

/// A standby's child at its hold: the word's pipe, and what to watch the
/// child by once it runs.
pub struct Launch {
    /// The write end of the pipe the child reads its word from; its end
    /// stops the check where `word_stops` (a PID namespace of its own).
    word_pipe: std::fs::File,
    word_stops: bool,
    output: OwnedFd,
    report: OwnedFd,
    started: oneshot::Receiver<std::io::Result<tokio::process::Child>>,
    starter: mpsc::Sender<()>,
    program: process::Program,
}

impl std::fmt::Debug for Standby {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Standby").field("judge", &self.judge).finish_non_exhaustive()
    }
}

impl Standby {
    /// Starts making a standby for `order` with its directory in `place`, on
    /// a thread of its own; called inside the runtime the child is then
    /// watched from.
    pub fn arm(judge: Arc<str>, place: Place, order: Order) -> Result<Standby, String> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "a check's child is made only inside the runtime".to_owned())?;
        let (armed_tx, armed) = oneshot::channel();
        let sandbox = order.sandbox.clone();
        // the checker waits for this thread when it goes, from now on
        let token = order.in_flight.enter();
        std::thread::Builder::new()
            .name("rendergate-standby".into())
            .spawn(move || {
                order.make(place, armed_tx, runtime);
                // the sandbox (its world removed if this was its last holder)
                // is gone before the checker is told this thread is done
                drop((order, token));
            })
            .map_err(|e| format!("cannot start a thread for the check's child: {e}"))?;
        let armed_at = std::time::Instant::now();
        Ok(Standby { judge, sandbox, armed_at, state: State::Making(armed) })
    }

    /// Whether it may still serve a check: made for `judge` in `sandbox`,
    /// and not older than [`MAX_AGE`].
    pub fn fresh_for(&self, judge: &str, sandbox: &Arc<Sandbox>) -> bool {
        *self.judge == *judge
            && Arc::ptr_eq(&self.sandbox, sandbox)
            && self.armed_at.elapsed() < MAX_AGE
    }

    /// The standby made, by `deadline`.
    pub async fn ready(self, deadline: Instant) -> Result<Armed, String> {
        let budget = deadline.saturating_duration_since(Instant::now());
        let armed = match self.state {
            State::Made(armed) => return armed,
            State::Making(armed) => armed,
        };
        match tokio::time::timeout_at(deadline, armed).await {
            Ok(Ok(armed)) => armed,
            Ok(Err(_)) => Err(THREAD_ENDED.into()),
            Err(_) => Err(format!(
                "the check timed out after {budget:.1?} while its check directory and sandbox were made"
            )),
        }
    }

    /// Waits until it is made; its directory, when it was.
    pub async fn settle(&mut self) -> Option<&std::path::Path> {
        if let State::Making(armed) = &mut self.state {
            self.state = State::Made(armed.await.unwrap_or_else(|_| Err(THREAD_ENDED.into())));
        }
        match &self.state {
            State::Made(Ok(armed)) => Some(armed.dir.path()),
            _ => None,
        }
    }
}

impl Launch {
    /// Gives the child its word (its check's bounds, and to go); the child
    /// started as haproxy, by `deadline`, or why it could not.
    pub async fn go(self, word: Go, deadline: Instant) -> Result<Running, String> {
        let Launch { mut word_pipe, word_stops, output, report, started, starter, program } = self;
        // A few bytes into an empty pipe: never blocks. If the child is
        // gone, its spawn's error or its report says why.
        let _ = word_pipe.write_all(&word.to_bytes());
        tracing::trace!(target: "rendergate::timing", "word given");
        let budget = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout_at(deadline, started).await {
            Ok(Ok(Ok(child))) => {
                Running::new(child, program, (output, report), (word_pipe, word_stops), starter)
            }
            Ok(Ok(Err(e))) => Err(process::spawn_failure(&program, &e)),
            Ok(Err(_)) => Err("starting haproxy failed: its thread ended without an answer".into()),
            Err(_) => {
                Err(format!("the check timed out after {budget:.1?} while haproxy was started"))
            }
        }
    }
}

impl Order {
    /// On the standby's thread: the directory, the sandbox, the fork; then
    /// waits while the child does, and stays until the check is over and
    /// the child has exited.
    fn make(
        &self,
        place: Place,
        armed_tx: oneshot::Sender<Result<Armed, String>>,
        runtime: tokio::runtime::Handle,
    ) {
        let (started_tx, started) = oneshot::channel();
        let (starter, check_over) = mpsc::channel();
        let made = place.check_dir().and_then(|dir| self.fork_ready(dir, started, starter));
        let (armed, mut cmd, mut held) = match made {
            Ok(made) => made,
            Err(e) => {
                let _ = armed_tx.send(Err(e));
                return;
            }
        };
        // A render bound from the check directory is written there while
        // the child is made; one in a tmpfs of the child's own, once the
        // child has handed it over.
        let in_world = if held.hands_render {
            if armed_tx.is_closed() {
                // the check gave up on it already: no child is made
                return;
            }
            Some((armed, armed_tx))
        } else {
            if let Err(Ok(_unwanted)) = armed_tx.send(self.stocked(armed)) {
                // nobody waits for it any more: removed here, with the token held
                return;
            }
            None
        };
        let (held_resolves, own_processes, channel) =
            (held.resolves, held.own_processes, held.channel.take());
        let spawned = {
            let _runtime = runtime.enter();
            cmd.spawn()
        };
        // our copies of the output's write end go with `cmd`, and what the
        // child's setup names by number with `held`
        drop((cmd, held));
        let handed = match (&spawned, channel) {
            (Ok(_), Some(channel)) => {
                let (handed, failed) = network::receive(channel.as_fd());
                if let Some(e) = failed {
                    tracing::warn!("cannot receive what the check's child handed over: {e}");
                }
                handed
            }
            _ => network::Handed::default(),
        };
        // the check's names, answered from now until the check is over
        let answering = match (&spawned, handed.resolver) {
            (Ok(_), Some(socket)) => answer_on(socket, &runtime),
            (Ok(_), None) if held_resolves => {
                tracing::warn!("the check's child handed over no resolver socket");
                None
            }
            _ => None,
        };
        if let Some((armed, armed_tx)) = in_world {
            let armed = match (&spawned, handed.render) {
                (Ok(_), Some(render)) => {
                    self.stocked(Armed { dir: armed.dir.with_render(render), ..armed })
                }
                (Ok(_), None) => Err("the check's child handed over no render directory".into()),
                // why the child could not be made, as its start would say it,
                // before any of the render is written
                (Err(e), _) => {
                    let why = process::spawn_failure(&armed.launch.program, e);
                    Err(verdict::sanitise(&why, armed.dir.hidden(), &self.binary))
                }
            };
            // unwanted, or failed: the child goes below, as after a check
            let _ = armed_tx.send(armed);
        }
        let pid = spawned.as_ref().ok().and_then(|child| child.id());
        if pid.is_some() && self.copy_ahead {
            hot_ranges().into_iter().for_each(own);
        }
        // The child's namespaces, held here: HAProxy is then not the last in
        // them, and its exit does not wait for their teardown (the mount
        // namespace's ends in an RCU grace period, about 1 ms here), which
        // happens on this thread once the check is over.
        let namespaces = pid.map(held_namespaces).unwrap_or_default();
        // The reaper, watched to its end by a pidfd, taken while it surely
        // has not been reaped (none where the host refuses one).
        let reaper = pid.filter(|_| own_processes).and_then(|pid| {
            let pid = rustix::process::Pid::from_raw(pid as libc::pid_t)?;
            let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty());
            Some((pid, pidfd.ok()))
        });
        if started_tx.send(spawned).is_ok() {
            // The child's parent-death signal is this thread's: stay until
            // the check is over (its `Running` dropped) or was given up.
            let _ = check_over.recv();
        }
        // The group goes, once a reaper has left (at once without one). The
        // world's mounts are the child's until it has exited and its
        // namespaces are let go: only then may the sandbox, and its world on
        // disk, go.
        if let Some(answering) = answering {
            answering.abort();
        }
        if let Some((reaper, pidfd)) = reaper {
            // a stopped check's reaper reaps its namespace and leaves
            // ([`Running`]): killed before, it would orphan its children
            wait_for_exit(reaper, pidfd.as_ref(), process::STOP_GRACE);
        }
        if let Some(pid) = pid {
            end_group(pid as libc::pid_t);
        }
        drop(namespaces);
    }

    /// `armed`'s directory with an empty `haproxy.cfg` and the world's
    /// stock files in it (the render, when it comes, fills the one and makes
    /// room among the others for its own).
    fn stocked(&self, armed: Armed) -> Result<Armed, String> {
        let dir = &armed.dir;
        let made = crate::layout::make_config(dir.dir())
            .and_then(|()| crate::prepare::write_stock(dir.dir(), self.sandbox.stock()));
        made.map_err(|e| {
            let e = format!("cannot write the check directory: {e}");
            verdict::sanitise(&e, dir.hidden(), &self.binary)
        })?;
        Ok(armed)
    }

    /// Everything for the fork, made in `dir`: the pipes, the sandbox held
    /// at the word. The directory and the pipes' ends of the check, with
    /// `started` and `starter`, go to the check as its [`Armed`]; the
    /// command and what it borrows stay for `spawn`.
    fn fork_ready(
        &self,
        dir: CheckDir,
        started: oneshot::Receiver<std::io::Result<tokio::process::Child>>,
        starter: mpsc::Sender<()>,
    ) -> Result<(Armed, tokio::process::Command, Held), String> {
        let sanitised = |e: String| verdict::sanitise(&e, dir.hidden(), &self.binary);
        let unprepared =
            |e: std::io::Error| sanitised(format!("cannot prepare the check's child: {e}"));
        let pipes = || -> std::io::Result<_> {
            use rustix::pipe::{PipeFlags, pipe_with};
            let dir = dir.fd().try_clone_to_owned()?;
            // the report is read once the child has exited: never waited on
            let report = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
            Ok((dir, process::pipe()?, process::pipe()?, report, process::pipe()?))
        };
        let (child_dir, (output, output_end), (word_end, word), (report, report_end), keeper) =
            pipes().map_err(unprepared)?;
        let image =
            process::image(&self.binary, self.dns_skip, self.sandbox.options().env.as_slice())
                .map_err(unprepared)?;
        let hold = Hold {
            word: word_end.as_raw_fd(),
            report: report_end.as_raw_fd(),
            keeper: Keeper { read: keeper.0.as_raw_fd(), write: keeper.1.as_raw_fd() },
            image: Arc::new(image),
        };
        let mut cmd = process::command(&self.binary, output_end)
            .map_err(|e| format!("cannot create a pipe for haproxy's output: {e}"))?;
        let (channel, channel_end) = network::hand_over_channel().map_err(unprepared)?;
        let prepared = self
            .sandbox
            .prepare(child_dir.as_fd(), Limits::new(self.memory, FILE_SIZE_MAX, ARMED_CPU))
            .map_err(sanitised)?
            .with_channel(channel_end.as_raw_fd())
            .held(hold);
        prepared.apply(&mut cmd);
        let (resolves, hands_render) = (prepared.resolves(), prepared.hands_render());
        let own_processes = prepared.own_processes();
        let channel = (resolves || hands_render).then_some(channel);
        // `apply` copied the raw descriptors into the child's setup: what
        // they name must stay open until `spawn` returns.
        let held = Held {
            channel,
            resolves,
            hands_render,
            own_processes,
            _channel_end: channel_end,
            _ruleset: prepared.into_ruleset(),
            _dir: child_dir,
            _word_end: word_end,
            _report_end: report_end,
            _keeper: keeper,
        };
        let program =
            process::Program { binary: self.binary.clone(), world: self.sandbox.world().cloned() };
        let launch = Launch {
            word_pipe: word.into(),
            word_stops: own_processes,
            output,
            report,
            started,
            starter,
            program,
        };
        Ok((Armed { dir, launch }, cmd, held))
    }
}

/// Answers the DNS queries of the child that handed its resolver `socket`
/// over ([`network::hand_over_resolver`]), on `runtime`, from this host's
/// resolver ([`crate::dns`]). A check without its resolver still runs (its
/// names then fail to resolve, as a pod's would without DNS), and the log
/// says why.
fn answer_on(
    socket: OwnedFd,
    runtime: &tokio::runtime::Handle,
) -> Option<tokio::task::JoinHandle<()>> {
    let socket = std::net::UdpSocket::from(socket);
    let _runtime = runtime.enter();
    let socket =
        socket.set_nonblocking(true).and_then(|()| tokio::net::UdpSocket::from_std(socket));
    match socket {
        Ok(socket) => {
            Some(runtime.spawn(crate::dns::serve(socket, Arc::new(crate::dns::HostResolver))))
        }
        Err(e) => {
            tracing::warn!("cannot answer on the check's resolver socket: {e}");
            None
        }
    }
}

/// The main thread's heap and stack, as `/proc/self/maps` shows them.
fn hot_ranges() -> Vec<std::ops::Range<usize>> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return vec![] };
    let parse = |line: &str| {
        let mut fields = line.split_whitespace();
        let (range, perms) = (fields.next()?, fields.next()?);
        let (start, end) = range.split_once('-')?;
        let range = usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?;
        perms.starts_with("rw").then_some(range)
    };
    maps.lines()
        .filter(|l| l.ends_with("[heap]") || l.ends_with("[stack]"))
        .filter_map(parse)
        .collect()
}

/// Gives the gate its own copies, now, of the memory in `range` the fork
/// left shared with the child (a standby's: the main thread's heap and
/// stack, [`hot_ranges`], where `serve` works): every page faulted in
/// writable, a page shared copy-on-write copied.
///
/// After a fork every private page is shared copy-on-write until the child
/// `execve`s, which a standby's child does only when its check comes. The
/// gate's first write to each page would then fault and copy it, on the way
/// from the next render to its verdict: some 80 faults a check, 0.2 ms here.
/// `MADV_POPULATE_WRITE` (Linux 5.14) breaks the sharing of a whole range
/// at once, as writes would, without touching the data, while the gate is
/// idle. Best effort: an older kernel, or a range gone meanwhile, leaves
/// the pages shared. The price is that memory again while the standby is
/// held, so only a gate whose heap is its own and small asks for it
/// (`rendergate serve`); a controller embedding the library shares its
/// pages with the child and copies only those it writes meanwhile.
fn own(range: std::ops::Range<usize>) {
    if range.is_empty() {
        return;
    }
    // SAFETY: populating a mapped range neither moves nor changes its data;
    // a range unmapped meanwhile is an error, nothing worse.
    unsafe {
        libc::madvise(range.start as *mut libc::c_void, range.len(), libc::MADV_POPULATE_WRITE);
    }
}

/// The mount and network namespaces of the child `pid`, as descriptors that
/// keep them alive (those it could not open are left out: its exit then
/// waits for their teardown, nothing worse).
fn held_namespaces(pid: u32) -> Vec<OwnedFd> {
    ["mnt", "net"]
        .iter()
        .filter_map(|kind| std::fs::File::open(format!("/proc/{pid}/ns/{kind}")).ok())
        .map(OwnedFd::from)
        .collect()
}

/// Waits until the child `pid` has exited (or is gone), for at most
/// `grace`, leaving it to be reaped: woken by its `pidfd`, or without one
/// (a seccomp profile may refuse `pidfd_open`) looking every millisecond.
fn wait_for_exit(pid: rustix::process::Pid, pidfd: Option<&OwnedFd>, grace: Duration) {
    use rustix::event::{PollFd, PollFlags, Timespec};
    use rustix::process::{WaitId, WaitIdOptions};
    if let Some(pidfd) = pidfd {
        let grace =
            Timespec { tv_sec: grace.as_secs() as i64, tv_nsec: grace.subsec_nanos() as i64 };
        let mut exited = [PollFd::new(pidfd, PollFlags::IN)];
        while let Err(rustix::io::Errno::INTR) = rustix::event::poll(&mut exited, Some(&grace)) {}
        return;
    }
    let until = std::time::Instant::now() + grace;
    let look = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    while std::time::Instant::now() < until {
        match rustix::process::waitid(WaitId::Pid(pid), look) {
            Ok(None) | Err(rustix::io::Errno::INTR) => std::thread::sleep(Duration::from_millis(1)),
            _ => return, // exited, or gone (ECHILD)
        }
    }
}

/// Kills the check's process group (led by the child `pgid`), and waits
/// until the gate's children in it are gone: the child, whom the runtime
/// reaps (a child it still watches may be reaped here first: it then finds
/// it gone), and without a PID namespace its keeper
/// ([`crate::sandbox::hold`]), reaped here. In a PID namespace the child is
/// the reaper ([`crate::sandbox::processes`]), gone by now with its
/// children reaped, unless it outlived [`process::STOP_GRACE`].
fn end_group(pgid: libc::pid_t) {
    use rustix::process::{Pid, Signal, WaitOptions};
    let Some(pgid) = Pid::from_raw(pgid) else { return };
    let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
    // until ECHILD: none left
    while let Ok(_) | Err(rustix::io::Errno::INTR) =
        rustix::process::waitpgid(pgid, WaitOptions::empty())
    {}
}

/// What the child's setup names by number, open until `spawn` has returned.
struct Held {
    /// The gate's end of the child's channel, where it hands over its
    /// resolver socket ([`Held::resolves`]) and its render's tmpfs
    /// ([`Held::hands_render`]).
    channel: Option<OwnedFd>,
    resolves: bool,
    hands_render: bool,
    /// A PID namespace of its own: the child is the reaper.
    own_processes: bool,
    _channel_end: OwnedFd,
    _dir: OwnedFd,
    _word_end: OwnedFd,
    _report_end: OwnedFd,
    /// The keeper's pipe: the child's and its keeper's alone once forked.
    _keeper: (OwnedFd, OwnedFd),
    _ruleset: Option<OwnedFd>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_waited_for_until_it_exits_or_the_grace_ends_and_left_unreaped() {
        use rustix::process::{Pid, PidfdFlags, pidfd_open};
        for by_pidfd in [true, false] {
            let mut quick = std::process::Command::new("sleep").arg("0.2").spawn().unwrap();
            let mut slow = std::process::Command::new("sleep").arg("30").spawn().unwrap();
            for (child, grace, least) in [(&mut quick, 10_000, 150), (&mut slow, 200, 200)] {
                let pid = Pid::from_raw(child.id() as i32).unwrap();
                let pidfd = by_pidfd.then(|| pidfd_open(pid, PidfdFlags::empty()).unwrap());
                let started = std::time::Instant::now();
                wait_for_exit(pid, pidfd.as_ref(), Duration::from_millis(grace));
                let waited = started.elapsed();
                let case = format!("pidfd {by_pidfd}, grace {grace} ms: waited {waited:?}");
                assert!(waited >= Duration::from_millis(least), "{case}");
                assert!(waited < Duration::from_secs(5), "{case}");
            }
            // the one that exited is still its parent's to reap
            assert!(quick.try_wait().unwrap().is_some(), "pidfd {by_pidfd}");
            assert!(slow.try_wait().unwrap().is_none(), "pidfd {by_pidfd}");
            slow.kill().unwrap();
            slow.wait().unwrap();
        }
    }

    #[test]
    fn the_main_threads_heap_and_stack_are_found() {
        let ranges = hot_ranges();
        // the test binary's main thread has a stack; its heap exists once it
        // has allocated, which the harness has
        assert!(!ranges.is_empty(), "{ranges:?}");
        assert!(ranges.iter().all(|r| r.start < r.end));
    }

    /// Minor faults of this thread so far.
    fn faults() -> i64 {
        // SAFETY: rusage is plain integers, so zeroed is a valid value, and
        // it is a valid out-pointer (rustix has no RUSAGE_THREAD).
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut usage), 0);
            usage
        };
        usage.ru_minflt
    }

    /// Writes one byte of each of `pages` pages at `base` after a fork
    /// (the child waits, holding its copy), with the range owned first or
    /// not; the faults the writes took.
    fn faults_writing_after_a_fork(owned: bool) -> i64 {
        const PAGES: usize = 64;
        // written whole; the pages measured are the whole ones in it (madvise
        // takes a page-aligned start)
        let mut memory = vec![1u8; (PAGES + 1) * 4096];
        let skip = (memory.as_ptr() as usize).next_multiple_of(4096) - memory.as_ptr() as usize;
        let memory = &mut memory[skip..skip + PAGES * 4096];
        let base = memory.as_ptr() as usize;
        let (hold, release) = crate::process::pipe().unwrap();
        // SAFETY: the child only reads and leaves with _exit.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let mut byte = 0u8;
            // SAFETY: closes its copy of the write end, then reads until
            // the parent's goes (end-of-file); a valid buffer.
            unsafe {
                libc::close(release.as_raw_fd());
                libc::read(hold.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        if owned {
            own(base..base + memory.len());
        }
        let before = faults();
        for page in 0..PAGES {
            memory[page * 4096] = 2;
        }
        let taken = faults() - before;
        drop(release);
        assert_eq!(crate::process::exit_code_of(child), 0);
        taken
    }

    #[test]
    fn owned_pages_take_no_fault_when_written_after_a_fork() {
        // shared copy-on-write, each page faults once
        assert!(faults_writing_after_a_fork(false) >= 64);
        assert!(faults_writing_after_a_fork(true) < 8);
    }
}
