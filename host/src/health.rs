//! Liveness of a running gate, for `/healthz`: two timestamps the driver
//! stamps and any reader compares with the clock. The driver is *stuck* when one turn of its
//! loop (feeding the core, publishing outputs) has lasted longer than the
//! limit; the check worker is stuck when one check has been in flight longer
//! than the limit. The limit is the check timeout plus a margin, so a check
//! that merely runs into its timeout is never called stuck. The reader of
//! the input is stuck when it has waited that long to queue an `error`
//! line for a writer nobody reads: it reads no render meanwhile.
//!
//! The gate is also unhealthy while its checks cannot set up their sandbox
//! (a world that worked at start-up and no longer does: a changed seccomp
//! profile, a full `TMPDIR`): every render would be held, so the probe says
//! so, naming the reason, until a check runs again (the checker tries the
//! worlds again meanwhile: docs/checking.md, "Which world checks get").
//!
//! The timestamps are atomics: the driver never waits on a reader for them;
//! the sandbox's reason is one short string behind a lock taken to copy it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// "Not now": the driver is waiting for input, or no check is in flight.
const IDLE: u64 = u64::MAX;

/// What the driver last said about itself; see the module documentation.
#[derive(Debug)]
pub struct Health {
    /// Instants are kept as nanoseconds since this one.
    base: Instant,
    check_timeout: Duration,
    margin: Duration,
    /// When the driver's current turn started, or [`IDLE`] while it waits.
    turn_since: AtomicU64,
    /// When the check in flight started, or [`IDLE`].
    check_since: AtomicU64,
    /// Since when the reader waits to queue an error line, or [`IDLE`].
    error_since: AtomicU64,
    /// Why the last check could not set up its sandbox, until one runs.
    sandbox: Mutex<Option<String>>,
}

impl Health {
    /// `now`: the clock the driver will stamp with (the tokio clock).
    pub fn new(check_timeout: Duration, margin: Duration, now: Instant) -> Self {
        Health {
            base: now,
            check_timeout,
            margin,
            turn_since: AtomicU64::new(IDLE),
            check_since: AtomicU64::new(IDLE),
            error_since: AtomicU64::new(IDLE),
            sandbox: Mutex::new(None),
        }
    }

    /// How long a turn or a check may last before the gate is unhealthy.
    pub fn limit(&self) -> Duration {
        self.check_timeout.saturating_add(self.margin)
    }

    /// The driver starts a turn of its loop.
    pub fn turn_started(&self, now: Instant) {
        self.turn_since.store(self.stamp(now), Relaxed);
    }

    /// The driver is back to waiting for input, a result or a timer.
    pub fn turn_ended(&self) {
        self.turn_since.store(IDLE, Relaxed);
    }

    /// The reader waits to queue an error line: the writer is behind.
    pub fn error_waiting(&self, now: Instant) {
        self.error_since.store(self.stamp(now), Relaxed);
    }

    /// The error line is queued.
    pub fn error_queued(&self) {
        self.error_since.store(IDLE, Relaxed);
    }

    /// A check was handed to the worker.
    pub fn check_started(&self, now: Instant) {
        self.check_since.store(self.stamp(now), Relaxed);
    }

    /// The check's result arrived, or it was cancelled.
    pub fn check_ended(&self) {
        self.check_since.store(IDLE, Relaxed);
    }

    /// A check's sandbox could not be set up (`Some(why)`), or a check ran
    /// (`None`): HAProxy judged, or could not for a reason of its own.
    pub fn sandbox_checked(&self, failure: Option<&str>) {
        let mut slot = self.sandbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = failure.map(str::to_owned);
    }

    /// `Ok` while the gate makes progress; otherwise one line saying what is
    /// stuck and for how long, or why checks cannot run.
    pub fn status(&self, now: Instant) -> Result<(), String> {
        let sandbox =
            self.sandbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(why) = sandbox {
            return Err(format!("checks cannot set up their sandbox: {why}"));
        }
        let limit = self.limit();
        let margin = crate::duration::format(self.margin);
        let timeout = crate::duration::format(self.check_timeout);
        if let Some(took) = self.since(&self.check_since, now).filter(|t| *t > limit) {
            return Err(format!(
                "check worker stuck: one check has been in flight for {:.1}s, past the {timeout} check timeout plus a {margin} margin",
                took.as_secs_f64()
            ));
        }
        if let Some(took) = self.since(&self.error_since, now).filter(|t| *t > limit) {
            return Err(format!(
                "input reader stuck: it has waited {:.1}s to queue an error line, past the {timeout} check timeout plus a {margin} margin \
                 (nobody reads the gate's outputs, and no input is read meanwhile)",
                took.as_secs_f64()
            ));
        }
        if let Some(took) = self.since(&self.turn_since, now).filter(|t| *t > limit) {
            return Err(format!(
                "event loop stuck: one turn has lasted {:.1}s, past the {timeout} check timeout plus a {margin} margin \
                 (it waits there while nobody reads the gate's outputs)",
                took.as_secs_f64()
            ));
        }
        Ok(())
    }

    fn stamp(&self, now: Instant) -> u64 {
        // Never IDLE: 584 years of uptime would be needed to reach it.
        (now.saturating_duration_since(self.base).as_nanos() as u64).min(IDLE - 1)
    }

    fn since(&self, stamp: &AtomicU64, now: Instant) -> Option<Duration> {
        match stamp.load(Relaxed) {
            IDLE => None,
            nanos => Some(now.saturating_duration_since(self.base + Duration::from_nanos(nanos))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn health() -> (Health, Instant) {
        let t0 = Instant::now();
        (Health::new(30 * S, 5 * S, t0), t0)
    }

    #[test]
    fn a_reader_waiting_to_queue_an_error_line_past_the_limit_is_stuck() {
        let (h, t0) = health();
        h.error_waiting(t0);
        assert_eq!(h.status(t0 + 35 * S), Ok(()));
        let err = h.status(t0 + 36 * S).unwrap_err();
        assert!(err.starts_with("input reader stuck: it has waited 36.0s"), "{err}");
        h.error_queued();
        assert_eq!(h.status(t0 + 99 * S), Ok(()));
    }

    #[test]
    fn a_check_whose_sandbox_failed_makes_the_gate_unhealthy_until_a_check_runs() {
        let (h, t0) = health();
        h.sandbox_checked(Some("sandbox setup failed in layer 'world' at chroot: EPERM"));
        let err = h.status(t0).unwrap_err();
        assert_eq!(
            err,
            "checks cannot set up their sandbox: sandbox setup failed in layer 'world' at chroot: EPERM"
        );
        h.sandbox_checked(None);
        assert_eq!(h.status(t0), Ok(()));
    }

    #[test]
    fn idle_is_healthy_however_long() {
        let (h, t0) = health();
        assert_eq!(h.limit(), 35 * S);
        assert_eq!(h.status(t0 + 3600 * S), Ok(()));
    }

    #[test]
    fn a_check_is_stuck_only_past_the_timeout_plus_the_margin() {
        let (h, t0) = health();
        h.check_started(t0 + S);
        assert_eq!(h.status(t0 + 31 * S), Ok(()), "a check at its timeout is not stuck");
        assert_eq!(h.status(t0 + 36 * S), Ok(()), "exactly at the limit");
        let err = h.status(t0 + 37 * S).unwrap_err();
        assert!(
            err.starts_with("check worker stuck: one check has been in flight for 36.0s"),
            "{err}"
        );
        assert!(err.contains("30s check timeout plus a 5s margin"), "{err}");
        h.check_ended();
        assert_eq!(h.status(t0 + 37 * S), Ok(()), "back once the result arrives");
    }

    #[test]
    fn a_turn_of_the_event_loop_that_does_not_end_is_stuck() {
        let (h, t0) = health();
        h.turn_started(t0);
        h.turn_ended();
        h.turn_started(t0 + 10 * S);
        assert_eq!(h.status(t0 + 40 * S), Ok(()));
        let err = h.status(t0 + 50 * S).unwrap_err();
        assert!(err.starts_with("event loop stuck: one turn has lasted 40.0s"), "{err}");
        h.turn_started(t0 + 50 * S);
        assert_eq!(h.status(t0 + 50 * S), Ok(()), "a new turn is progress");
    }

    #[test]
    fn the_worker_is_named_first_when_both_are_stuck() {
        let (h, t0) = health();
        h.turn_started(t0);
        h.check_started(t0);
        assert!(h.status(t0 + 60 * S).unwrap_err().starts_with("check worker stuck"));
    }

    #[test]
    fn stamps_before_the_base_count_from_the_base() {
        let t0 = Instant::now();
        let h = Health::new(S, Duration::ZERO, t0 + 5 * S);
        h.check_started(t0);
        assert_eq!(h.status(t0 + 6 * S), Ok(()));
        assert!(h.status(t0 + 7 * S).is_err());
    }
}
