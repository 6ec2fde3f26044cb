//! Standard output for the commands that print (`check`, `replay`,
//! `policy`): a reader that goes away (`rendergate check --explain | head
//! -1`) ends the printing quietly, never with a panic, and the command then
//! exits as a Unix tool does on a closed pipe: killed by `SIGPIPE` (status
//! 141 in a shell), after its own clean-up (a check's directory and
//! process group are gone by then).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout, unless its reader is gone.
pub fn print(text: std::fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(text).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CLOSED.store(true, Ordering::Relaxed);
        } else {
            print_error!("stdout: {e}");
        }
    }
}

/// Records that stdout's reader is gone (a write answered `EPIPE` elsewhere).
pub fn mark_closed() {
    CLOSED.store(true, Ordering::Relaxed);
}

/// Whether stdout's reader went away while the command ran.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Ends the process as `SIGPIPE` ends a Unix tool. Rust starts programs
/// with `SIGPIPE` ignored, so it is set back to its default first.
pub fn die_of_sigpipe() -> ! {
    // SAFETY: resetting a signal to its default disposition and raising it
    // touch no memory; no crate wraps `signal` (rustix leaves signal
    // dispositions out).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // raise returns only if the signal is blocked
    std::process::exit(128 + libc::SIGPIPE)
}
