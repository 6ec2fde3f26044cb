//! Preparing one check directory (docs/checking.md, "The check directory"): the
//! render's limits, its layout, and every file written byte for byte into
//! the directory made ahead for it, on a blocking thread, so that no runtime
//! worker (and never the task that reads events) waits on the disk, and
//! under the check's deadline; a small render where no disk is waited on
//! (a tmpfs), on the caller's thread.
//!
//! The thread looks at the deadline and at a cancel flag before every file
//! (and every megabyte of one). The check stops waiting for it at the
//! deadline; the flag is raised on every way out of [`prepare`], the future
//! being dropped included, and the thread then stops at its next look and
//! removes what it wrote itself. A directory that was ready when nobody
//! wanted it any more is removed on a blocking thread too.
//!
//! Every such thread holds a token of its checker's [`InFlight`], which the
//! checker waits on when it is dropped: no directory outlives its checker,
//! not even when the process ends on a signal without waiting for the
//! runtime's blocking threads.

use super::base::CheckDir;
use super::layout;
use super::limits::RenderLimits;
use super::sandbox::world::StockFile;
use super::verdict;
use rendergate_core::render::{Render, TreeEntry};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// What a check directory is prepared from.
pub struct Job {
    pub render: Render,
    /// The check directory, made ahead with an empty `haproxy.cfg` and the
    /// stock files ([`crate::standby`]).
    pub dir: CheckDir,
    pub limits: RenderLimits,
    /// The binary's path, taken out of messages as the check directory is.
    pub binary: PathBuf,
    /// Where the render lies in the check's world (`--config-dir`).
    pub config_dir: PathBuf,
    /// The stock files written ahead, which make room for the render's.
    pub stock: Arc<[StockFile]>,
    /// The checker's blocking work still running.
    pub in_flight: Arc<InFlight>,
}

/// How many of a checker's threads (preparing or removing a check
/// directory, making and holding a check's child) are still running.
#[derive(Debug, Default)]
pub struct InFlight {
    running: Mutex<usize>,
    idle: Condvar,
}

/// Held by one blocking thread while it runs.
pub(crate) struct Token(Arc<InFlight>);

impl InFlight {
    pub(crate) fn enter(self: &Arc<Self>) -> Token {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Token(self.clone())
    }

    /// Waits until no thread runs (each stops at its next look once its
    /// check is gone), for at most `bound`; whether they all ended.
    pub fn wait_idle(&self, bound: Duration) -> bool {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let (running, _) = self
            .idle
            .wait_timeout_while(running, bound, |n| *n > 0)
            .unwrap_or_else(PoisonError::into_inner);
        *running == 0
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        *self.0.running.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.idle.notify_all();
    }
}

/// Prepares the check directory for `job` by `deadline`: the directory with
/// the render in it, ready for `haproxy -c`, or why it could not be: a
/// limit, a path, the disk, or the deadline.
pub async fn prepare(job: Job, deadline: Instant) -> Result<CheckDir, String> {
    let budget = deadline.saturating_duration_since(Instant::now());
    let until = deadline.into_std();
    let progress = Arc::<Progress>::default();
    if job.is_small() {
        // A copy into memory (0.1 ms for 430 KB), cheaper than the trip to
        // a blocking thread and back (0.15 ms, and a thread made for it
        // where the runtime has none yet: a one-shot check).
        return job.run(&progress, until, budget);
    }
    let files = job.render.files().len();
    let (tx, rx) = oneshot::channel();
    // Raises the flag on every way out, and removes an unwanted directory.
    let mut pending =
        Pending { progress: progress.clone(), answer: rx, in_flight: job.in_flight.clone() };
    let token = job.in_flight.enter();
    tokio::task::spawn_blocking(move || {
        // when nobody waits for it any more, dropped (removed) here, off the loop
        drop(tx.send(job.run(&progress, until, budget)));
        drop(token);
    });
    tokio::select! {
        answer = &mut pending.answer => answer.unwrap_or_else(|_| Err("preparing the check directory failed: its thread ended without an answer".into())),
        () = tokio::time::sleep_until(deadline) => Err(timed_out(budget, pending.progress.written.load(Ordering::Relaxed), files)),
    }
}

fn timed_out(budget: Duration, written: usize, files: usize) -> String {
    format!(
        "the check timed out after {budget:.1?} while preparing the check directory ({written} of {files} files written)"
    )
}

/// What the thread and the check share.
#[derive(Default)]
struct Progress {
    /// Nobody waits for the directory any more: stop at the next look.
    cancel: AtomicBool,
    /// Files written so far, for the timeout's reason.
    written: AtomicUsize,
}

/// The waiting side of one preparation.
struct Pending {
    progress: Arc<Progress>,
    answer: oneshot::Receiver<Result<CheckDir, String>>,
    in_flight: Arc<InFlight>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.progress.cancel.store(true, Ordering::Relaxed);
        self.answer.close();
        // Ready just as the check gave up on it: not removed on this thread.
        if let Ok(Ok(dir)) = self.answer.try_recv() {
            let token = self.in_flight.enter();
            let removal = move || drop((dir, token));
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(removal)),
                Err(_) => removal(),
            }
        }
    }
}

/// The most bytes of a render written on the runtime's own thread.
const SMALL_RENDER: usize = 1 << 20;
/// The most files and directories such a render creates.
const SMALL_ENTRIES: usize = 64;

impl Job {
    /// Small, and written where no disk is waited on: a config alone into
    /// the haproxy.cfg made ahead (no file created), or a render of a few
    /// files into the tmpfs its child handed over (memory only).
    fn is_small(&self) -> bool {
        let (files, tree) = (self.render.files(), self.render.tree());
        let entries = files.len() + tree.len();
        let tree_bytes = tree.iter().map(|entry| match entry {
            TreeEntry::File { content, .. } => content.len(),
            TreeEntry::Directory(_) => 0,
        });
        let bytes = self.render.config().len()
            + files.iter().map(|f| f.content.len()).sum::<usize>()
            + tree_bytes.sum::<usize>();
        (entries == 0 || self.dir.in_memory()) && entries <= SMALL_ENTRIES && bytes <= SMALL_RENDER
    }

    /// Runs on the blocking thread (or, [`Job::is_small`], the caller's).
    /// Every way out but the hand-over drops the directory here, which
    /// removes it.
    fn run(
        self,
        progress: &Progress,
        until: std::time::Instant,
        budget: Duration,
    ) -> Result<CheckDir, String> {
        let files = self.render.files().len();
        let go_on =
            || !progress.cancel.load(Ordering::Relaxed) && std::time::Instant::now() < until;
        let stopped = || timed_out(budget, progress.written.load(Ordering::Relaxed), files);
        // Every limit and every path is validated before anything is written.
        self.limits.admit(&self.render)?;
        let arrangement =
            layout::arrange(&self.render, &self.config_dir).map_err(|e| e.to_string())?;
        if !go_on() {
            return Err(stopped());
        }
        let dir = self.dir;
        // Taken out of messages; nothing is opened by this path: files are
        // written through the handle.
        let sanitised = |e: std::io::Error| {
            verdict::sanitise(
                &format!("cannot write the check directory: {e}"),
                dir.hidden(),
                &self.binary,
            )
        };
        if !self.stock.is_empty() {
            // the stock files were written ahead, with the directory: the render's win
            let mut render: Vec<&Path> = vec![Path::new(layout::CONFIG_NAME)];
            render.extend(arrangement.files().iter().map(|f| f.relative.as_path()));
            render.extend(self.render.tree().iter().filter_map(|entry| match entry {
                TreeEntry::File { path, .. } => Some(Path::new(OsStr::from_bytes(path))),
                TreeEntry::Directory(_) => None,
            }));
            // an empty directory of the render where a stock file lies, or
            // under one: the file goes (stock files inside it stay, as an
            // image's stay under a render's empty directory)
            for entry in self.render.tree() {
                if let TreeEntry::Directory(path) = entry {
                    let at = Path::new(OsStr::from_bytes(path));
                    let blocking = self.stock.iter().map(|f| f.relative.as_path());
                    render.extend(blocking.filter(|stock| at.starts_with(stock)));
                }
            }
            clear_stock(dir.dir(), &self.stock, &render).map_err(sanitised)?;
        }
        let mut go_on_writing = |written| {
            progress.written.store(written, Ordering::Relaxed);
            go_on()
        };
        if let Err(e) = arrangement.write(dir.dir(), &mut go_on_writing) {
            return Err(if go_on() { sanitised(e) } else { stopped() });
        }
        Ok(dir)
    }
}

/// Makes room for the render among the stock files written ahead into its
/// directory ([`write_stock`]), as if the render's files had been written
/// first: a stock file at a render file's path, under it, or where the
/// render needs a directory is removed, and so is a stock directory where
/// the render has a file (empty by then).
fn clear_stock(
    dir: &cap_std::fs::Dir,
    stock: &[StockFile],
    render: &[&Path],
) -> std::io::Result<()> {
    let gone = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    for file in stock {
        let at = file.relative.as_path();
        let Some(clash) = render.iter().find(|r| at.starts_with(r) || r.starts_with(at)) else {
            continue;
        };
        gone(dir.remove_file(at))?;
        // the directories between the stock file and a render file above
        // it, once the last stock file in them is gone
        let mut parent = at.parent();
        while let Some(up) = parent.filter(|p| p.starts_with(clash)) {
            match dir.remove_dir(up) {
                Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => break,
                other => gone(other)?,
            }
            parent = up.parent();
        }
    }
    Ok(())
}

/// The stock files of the world under the config directory, as new
/// owner-only files in a check directory made ahead, before its render;
/// [`clear_stock`] makes room for the render's own.
pub(crate) fn write_stock(dir: &cap_std::fs::Dir, stock: &[StockFile]) -> std::io::Result<()> {
    use cap_std::fs::DirBuilderExt;
    use std::io::Write;
    // owner-only, as the render's own directories and files
    let mut dirs = cap_std::fs::DirBuilder::new();
    dirs.recursive(true).mode(0o700);
    let options = layout::new_file();
    for file in stock {
        if let Some(parent) = file.relative.parent().filter(|p| !p.as_os_str().is_empty()) {
            dir.create_dir_with(parent, &dirs)?;
        }
        dir.open_with(&file.relative, &options)?.write_all(&file.content)?;
    }
    Ok(())
}
