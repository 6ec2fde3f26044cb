//! What a check leaves for after its verdict: its directory to remove, the
//! thread that made its child to let go, and the next check's child to make.
//!
//! All three wait a moment ([`DELAY`]) after HAProxy has exited, so that
//! nothing but the verdict runs between HAProxy's exit and the verdict
//! line: removing a directory, a thread letting the child's namespaces go
//! (an RCU grace period) and making the next child (a fork, mounts) all
//! take CPU time, which on a small host the verdict's way out, and the
//! controller reading it, would share. The next check's child is made
//! first, while the rest waits ([`Aftercare::due`]); in the config
//! directory, which one check holds at a time, after it is emptied.
//!
//! A check that comes sooner takes over what is left at once
//! ([`Aftercare::hurry`]): its directory removed and its thread let go
//! before the new check starts HAProxy ([`Aftercare::gone`]), so nothing of
//! one check is there when the next runs. It then makes its own child, and
//! the one the earlier check would have made is never made.
//!
//! Everything left holds a token of the checker's [`InFlight`]; a dropped
//! checker hurries what is left and waits for it, so no directory outlives
//! its checker.

use crate::base::CheckDir;
use crate::prepare::{InFlight, Token};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

/// How long after a check's HAProxy has exited what it left is taken care
/// of: by then its verdict is written.
pub const DELAY: Duration = Duration::from_millis(2);

/// What one check left: its directory, and the thread that made its child
/// (it holds the child's namespaces until it is let go).
pub struct Leftover {
    pub dir: CheckDir,
    pub starter: Option<mpsc::Sender<()>>,
}

/// The next check's child, made when called.
pub type Next = Box<dyn FnOnce() + Send>;

/// The checker's leftovers, waiting out their delay or being removed.
#[derive(Default)]
pub struct Aftercare {
    queue: Mutex<Queue>,
    /// Directories left and not yet removed.
    pending: AtomicUsize,
    done: tokio::sync::Notify,
}

#[derive(Default)]
struct Queue {
    serial: u64,
    waiting: Vec<Waiting>,
    /// The checker is gone: nothing more is made.
    closed: bool,
}

struct Waiting {
    id: u64,
    leftover: Leftover,
    token: Token,
    next: Option<Next>,
}

impl std::fmt::Debug for Aftercare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aftercare")
            .field("pending", &self.pending.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl Aftercare {
    /// Leaves `leftover` to be taken care of [`DELAY`] from now, and then
    /// `next` to be made, unless a check comes sooner. Without a runtime to
    /// wait in, at once (and `next` is not made).
    pub fn leave(
        self: &Arc<Self>,
        leftover: Leftover,
        in_flight: &Arc<InFlight>,
        next: Option<Next>,
    ) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        let token = in_flight.enter();
        let in_config_dir = leftover.dir.is_config_dir();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.release(leftover, token);
            return;
        };
        let id = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.serial += 1;
            let id = queue.serial;
            queue.waiting.push(Waiting { id, leftover, token, next });
            id
        };
        let this = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(DELAY).await;
            if in_config_dir {
                // the config directory is emptied before its next child is
                // made in it: blocking work, off the runtime's thread
                let blocking = this.clone();
                if tokio::task::spawn_blocking(move || blocking.due(id)).await.is_ok() {
                    return;
                }
            }
            this.due(id);
        });
    }

    /// The delay of `id` is over: unless a check took it over already,
    /// its next child is made, then its leftovers go; in the config
    /// directory, which one check holds at a time, its leftovers go first.
    fn due(self: &Arc<Self>, id: u64) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(at) = queue.waiting.iter().position(|w| w.id == id) else { return };
        let Waiting { leftover, token, next, .. } = queue.waiting.remove(at);
        let left = if leftover.dir.is_config_dir() {
            // emptied here and now, under the lock: a check that comes
            // meanwhile waits for it, as it would for the removal
            drop(self.removal(leftover, token));
            None
        } else {
            Some((leftover, token))
        };
        // under the lock: a checker going away finds it made, and lets it go
        if !queue.closed
            && let Some(next) = next
        {
            next();
        }
        drop(queue);
        if let Some((leftover, token)) = left {
            self.release(leftover, token);
        }
    }

    /// Takes care of everything left at once, and makes none of the next
    /// children: a check has come and makes its own.
    pub fn hurry(self: &Arc<Self>) {
        let waiting = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            std::mem::take(&mut queue.waiting)
        };
        for w in waiting {
            self.release(w.leftover, w.token);
        }
    }

    /// As [`Aftercare::hurry`], for a checker going away: nothing is made
    /// from now on.
    pub fn close(self: &Arc<Self>) {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
        self.hurry();
    }

    /// Once every directory left so far is gone.
    pub async fn gone(&self) {
        loop {
            // made before the count is read: a removal ending in between wakes it
            let done = self.done.notified();
            if self.pending.load(Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
    }

    /// Lets the thread go, and removes the directory on a blocking thread
    /// (here, should there be no runtime or should its pool refuse).
    fn release(self: &Arc<Self>, leftover: Leftover, token: Token) {
        let removal = self.removal(leftover, token);
        match tokio::runtime::Handle::try_current() {
            // a refused closure is dropped, and the removal with it
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(removal))),
            Err(_) => drop(removal),
        }
    }

    /// Lets a leftover's thread go, and gives its directory's removal, done
    /// when dropped.
    fn removal(self: &Arc<Self>, Leftover { dir, starter }: Leftover, token: Token) -> Removal {
        drop(starter);
        Removal { dir: Some(dir), _token: token, aftercare: self.clone() }
    }
}

/// One directory's removal: done when dropped, however that comes.
struct Removal {
    dir: Option<CheckDir>,
    _token: Token,
    aftercare: Arc<Aftercare>,
}

impl Drop for Removal {
    fn drop(&mut self) {
        drop(self.dir.take());
        self.aftercare.pending.fetch_sub(1, Ordering::SeqCst);
        self.aftercare.done.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::BaseDir;
    use std::sync::atomic::AtomicBool;

    /// An aftercare, a check's leftover (its directory and the thread the
    /// leftover's starter keeps), and a next child that records being made.
    struct Case {
        _work: tempfile::TempDir,
        /// Alive as long as the case: its directories go with it.
        _base: Arc<BaseDir>,
        aftercare: Arc<Aftercare>,
        in_flight: Arc<InFlight>,
        leftover: Option<Leftover>,
        path: std::path::PathBuf,
        thread: mpsc::Receiver<()>,
        made: Arc<AtomicBool>,
    }

    impl Case {
        fn new() -> Case {
            let work = tempfile::tempdir().unwrap();
            let base = Arc::new(BaseDir::open(work.path()).unwrap());
            let dir = base.check_dir().unwrap();
            let path = dir.path().to_path_buf();
            let (starter, thread) = mpsc::channel();
            Case {
                _work: work,
                _base: base,
                aftercare: Arc::default(),
                in_flight: Arc::default(),
                leftover: Some(Leftover { dir, starter: Some(starter) }),
                path,
                thread,
                made: Arc::default(),
            }
        }

        /// Leaves the leftover, with a next child to make or not.
        fn leave(&mut self, with_next: bool) {
            let made = self.made.clone();
            let next: Next = Box::new(move || made.store(true, Ordering::SeqCst));
            let leftover = self.leftover.take().unwrap();
            self.aftercare.leave(leftover, &self.in_flight, with_next.then_some(next));
        }

        fn thread_let_go(&self) -> bool {
            self.thread.try_recv() == Err(mpsc::TryRecvError::Disconnected)
        }

        fn made(&self) -> bool {
            self.made.load(Ordering::SeqCst)
        }
    }

    #[tokio::test]
    async fn what_a_check_left_waits_out_the_delay_then_goes_and_the_next_child_is_made() {
        let mut c = Case::new();
        c.leave(true);
        // nothing yet: the verdict's moment
        assert!(c.path.exists());
        assert!(!c.thread_let_go());
        assert!(!c.made());
        c.aftercare.gone().await;
        assert!(!c.path.exists());
        assert!(c.thread_let_go());
        assert!(c.made());
        assert!(c.in_flight.wait_idle(Duration::from_secs(5)));
    }

    #[tokio::test]
    async fn a_check_that_comes_sooner_takes_over_and_no_next_child_is_made() {
        let mut c = Case::new();
        c.leave(true);
        c.aftercare.hurry();
        assert!(c.thread_let_go());
        c.aftercare.gone().await;
        assert!(!c.path.exists());
        tokio::time::sleep(DELAY * 5).await;
        assert!(!c.made(), "a child made for a check that made its own");
    }

    #[tokio::test]
    async fn a_closed_aftercare_removes_at_once_and_makes_nothing_more() {
        let mut c = Case::new();
        c.leave(true);
        c.aftercare.close();
        // the checker's drop waits for its blocking work, on this thread
        assert!(c.in_flight.wait_idle(Duration::from_secs(5)));
        assert!(!c.path.exists());
        tokio::time::sleep(DELAY * 5).await;
        assert!(!c.made());
    }

    #[test]
    fn without_a_runtime_it_goes_at_once() {
        let mut c = Case::new();
        c.leave(false);
        assert!(!c.path.exists());
        assert!(c.thread_let_go());
        assert!(c.in_flight.wait_idle(Duration::ZERO));
    }
}
