//! The memory a check's run at the top of its bounds touches: what bounds
//! that run where an address-space limit would decide the verdict
//! (docs/checking.md, "Verdicts").
//!
//! HAProxy reserves what it may never touch: a 17 GB `ring` is 17 GB of
//! address space and a few MB resident, and bare `haproxy -c` passes it. So
//! the run at the top (`--check-memory-max`) has no address-space limit of
//! the gate's making, and what it touches is read instead: the resident
//! pages of the check's processes, from `/proc`, every [`PERIOD`] from
//! [`FIRST`] on; past the
//! bound the check is stopped and the render is not judged. The
//! gate's own copies (the reaper, the init, a keeper: each still runs the
//! gate's program) are not counted, since their pages are the gate's; a
//! process whose program cannot be read is counted, and so is each memory
//! through whichever of its threads still has it (a main thread that ended
//! alone shows none). What resident pages do not show (page tables of a
//! reservation read page by page, memory a process holds but has not
//! mapped) is bounded by an address-space limit that stays at the top,
//! four times the bound ([`BACKSTOP_FACTOR`]), as is a process the walk
//! cannot reach (a kernel without `/proc/*/task/*/children`, or an orphan
//! of a check run without seccomp).

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;
use std::time::Duration;

/// How often a run's resident memory is read: a run that allocates as fast
/// as memory is written (some GB/s) passes the bound by a few tens of MB.
pub const PERIOD: Duration = Duration::from_millis(10);

/// When the first read is made: most checks are over sooner (100 backends
/// take some 25 ms, 1,000 some 40 ms) and pay for no read at all, while in
/// that time a run can touch only some hundreds of MB, a fraction of the
/// default bound (16 GiB).
pub const FIRST: Duration = Duration::from_millis(100);

/// More processes than a check makes: a walk that meets more reads as past
/// any bound (and a pid reused mid-walk cannot make it endless).
const MOST_PROCESSES: usize = 4096;

/// The address space at the top, as a multiple of the memory bound: far
/// above what HAProxy reserves and never touches in a config bare passes
/// (a 17 GB `ring` under the default 16 GiB bound), and it keeps page
/// tables and unmapped memory within a few times the bound.
pub const BACKSTOP_FACTOR: u64 = 4;

/// The resident bytes of `root` and every process below it, less those
/// that run this process's own program.
pub fn resident(root: u32) -> u64 {
    let gate = gate_program();
    let mut seen = HashSet::new();
    let mut pending = vec![root];
    let mut total = 0u64;
    while let Some(pid) = pending.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if seen.len() > MOST_PROCESSES {
            return u64::MAX;
        }
        let (resident, children) = tasks(pid);
        if gate.is_none() || program(pid) != gate {
            total = total.saturating_add(resident);
        }
        pending.extend(children);
    }
    total
}

/// The (device, inode) of the program `pid` runs, when it can be read.
fn program(pid: u32) -> Option<(u64, u64)> {
    let meta = fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((meta.dev(), meta.ino()))
}

fn gate_program() -> Option<(u64, u64)> {
    static GATE: OnceLock<Option<(u64, u64)>> = OnceLock::new();
    *GATE.get_or_init(|| program(std::process::id()))
}

/// The resident bytes of `pid`'s memory, read through each of its threads
/// (the largest: they share it, and a thread that ended shows none), and
/// the children of every thread. Nothing once it is gone.
fn tasks(pid: u32) -> (u64, Vec<u32>) {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, Vec::new());
    };
    let (mut pages, mut children) = (0, Vec::new());
    for task in tasks.flatten() {
        // `statm`'s second field (the kernel makes it cheaper than `status`'s `VmRSS`)
        let statm = fs::read_to_string(task.path().join("statm")).unwrap_or_default();
        let resident = statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok());
        pages = pages.max(resident.unwrap_or(0));
        let list = fs::read_to_string(task.path().join("children")).unwrap_or_default();
        children.extend(list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    (pages.saturating_mul(rustix::param::page_size() as u64), children)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// Waits while the test binary runs it as a child of its own: a process
    /// running the gate's program.
    #[test]
    #[ignore = "a stand-in the next test starts"]
    fn stands_in_for_the_gates_copy() {
        std::thread::sleep(Duration::from_secs(10));
    }

    #[test]
    fn the_gates_own_program_is_not_counted_and_another_is() {
        let other = Command::new("sleep").arg("10").spawn().unwrap();
        let copy = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "resident::tests::stands_in_for_the_gates_copy"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // both started, past their loader
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while program(other.id()) == gate_program() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(200));
        let (counted, not_counted) = (resident(other.id()), resident(copy.id()));
        let (copys_own, _) = tasks(copy.id());
        for mut child in [other, copy] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        assert!(counted > 0 && counted < 64 << 20, "sleep's resident memory: {counted}");
        assert!(copys_own > 0, "the copy has memory of its own");
        assert_eq!(not_counted, 0, "but it runs the gate's program");
    }
}
