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
//! bound its process group is killed and the render is not judged. The
//! gate's own copies (the reaper, the init, a keeper: each still runs the
//! gate's program) are not counted, since their pages are the gate's; a
//! process whose program cannot be read is counted.

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

/// More processes than a check makes: a walk stops there (a pid reused
/// mid-walk cannot make it endless).
const MOST_PROCESSES: usize = 4096;

/// The resident bytes of `root` and every process below it, less those
/// that run this process's own program.
pub fn resident(root: u32) -> u64 {
    let gate = gate_program();
    let mut seen = HashSet::new();
    let mut pending = vec![root];
    let mut total = 0u64;
    while let Some(pid) = pending.pop() {
        if seen.len() >= MOST_PROCESSES || !seen.insert(pid) {
            continue;
        }
        if gate.is_none() || program(pid) != gate {
            total = total.saturating_add(resident_of(pid));
        }
        pending.extend(children(pid));
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

/// The resident bytes of `pid` (0 once it is gone): `statm`'s second
/// field, in pages (the kernel makes it cheaper than `status`).
fn resident_of(pid: u32) -> u64 {
    let statm = fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    let pages = statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok());
    pages.map_or(0, |pages| pages.saturating_mul(rustix::param::page_size() as u64))
}

/// The children of every thread of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for task in tasks.flatten() {
        let path = task.path().join("children");
        let list = fs::read_to_string(path).unwrap_or_default();
        found.extend(list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gates_own_pages_are_not_counted_and_its_childrens_are() {
        // this process runs the gate's program (the test binary): not counted
        assert_eq!(resident(std::process::id()), 0);
        // a child running another program is counted, through this process
        let mut child = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while program(child.id()) == gate_program() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // started, and sleeping
        std::thread::sleep(Duration::from_millis(100));
        let seen = resident(std::process::id());
        let own = resident(child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(seen > 0 && seen < 64 << 20, "sleep's resident memory: {seen}");
        assert_eq!(own, seen, "the child is all that is counted");
        // gone, nothing
        assert_eq!(resident(child.id()), 0);
    }
}
