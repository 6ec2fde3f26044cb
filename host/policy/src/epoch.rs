//! The epoch ticker: a thread that advances an engine's epoch, so a guest
//! that spins is stopped at its deadline, running only while a component of
//! that engine is loaded. A gate with the built-in default keeps no thread
//! waking a thousand times a second; a reload hands the ticker from the old
//! component to the new one (same engine), so it keeps running then.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::Engine;

/// The thread's name: 15 bytes, all of it visible to `ps` and /proc (the
/// kernel keeps no more).
pub const THREAD_NAME: &str = "rg-policy-epoch";

/// How often the epoch advances: the deadline's resolution.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Held by each loaded component; the thread stops when the last holder of
/// an engine's ticker is dropped.
#[derive(Debug)]
pub struct EpochTicker {
    engine: Engine,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// The ticker of `engine`, started if none runs.
    pub fn hold(engine: &Engine) -> std::io::Result<Arc<EpochTicker>> {
        static RUNNING: Mutex<Vec<Weak<EpochTicker>>> = Mutex::new(Vec::new());
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        running.retain(|t| t.strong_count() > 0);
        if let Some(ticker) =
            running.iter().filter_map(Weak::upgrade).find(|t| Engine::same(&t.engine, engine))
        {
            return Ok(ticker);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (engine, stop) = (engine.clone(), stop.clone());
            std::thread::Builder::new().name(THREAD_NAME.into()).spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    engine.increment_epoch();
                    std::thread::sleep(EPOCH_TICK);
                }
            })?
        };
        let ticker = Arc::new(EpochTicker { engine: engine.clone(), stop, thread: Some(thread) });
        running.push(Arc::downgrade(&ticker));
        Ok(ticker)
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // At most one tick: the thread sees the flag after its sleep.
            let _ = thread.join();
        }
    }
}
