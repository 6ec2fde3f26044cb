//! A controller that embeds the library keeps its memory while the next
//! check's child is held (docs/embedding.md, "Memory").
//!
//! The child is forked ahead of its check and holds until the check comes,
//! sharing the controller's pages copy-on-write. This measures what the
//! held child costs the machine beyond the controller itself: the
//! proportional set size of anonymous memory (a process's own data) of the
//! controller and every process below it, less the controller's resident
//! anonymous memory (pages still shared are counted once either way; a
//! page copied because of the child twice). It runs
//! without the test harness, so that the controller's heap is the main
//! thread's, as in a controller's own `main`.
//!
//! Measured both ways in one run, so the test can fail: with the library's
//! default the cost stays below [`SHARED_MAX`]; with `copy_ahead` (what
//! `rendergate serve` asks for) the heap is copied, and the cost is most of
//! [`HEAP`].
//!
//! `RENDERGATE_TEST_HAPROXY` names the haproxy to use (default: `haproxy`).

#[path = "../needs.rs"]
#[allow(dead_code)] // this test needs no Lua
mod needs;

use rendergate::check::Checker;
use rendergate::{HaproxyChecker, HaproxyOptions, Render};
use std::path::PathBuf;
use std::time::Duration;

/// The controller's own heap, in small allocations (the main arena's).
const HEAP: usize = 128 << 20;
/// The most a held child may cost a controller that does not copy ahead.
const SHARED_MAX: u64 = 16 << 20;

fn main() {
    // the held child is not dumpable: only a process with CAP_SYS_PTRACE
    // (root here) may read its memory's figures
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        needs::missing("root, to read the held child's memory", "test embedding");
        return;
    }
    // the controller's state: small objects, as a controller's caches hold
    let heap: Vec<Box<[u8]>> = (0..HEAP / 2048).map(|i| vec![i as u8; 2048].into()).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let shared = runtime.block_on(held_child_cost(false));
    let copied = runtime.block_on(held_child_cost(true));
    println!(
        "held child's cost with a {} MiB heap: {:.1} MiB shared (library default), {:.1} MiB with copy_ahead",
        HEAP >> 20,
        shared as f64 / 1048576.0,
        copied as f64 / 1048576.0
    );
    assert!(shared < SHARED_MAX, "the held child cost {shared} bytes");
    assert!(copied > HEAP as u64 / 2, "copy_ahead copied only {copied} bytes of the heap");
    std::hint::black_box(&heap);
    println!("test embedding ... ok");
}

/// Checks one render, waits for the next check's child, and measures it.
async fn held_child_cost(copy_ahead: bool) -> u64 {
    let binary = std::env::var_os("RENDERGATE_TEST_HAPROXY").unwrap_or_else(|| "haproxy".into());
    let checker = HaproxyChecker::new(HaproxyOptions {
        binary: PathBuf::from(binary),
        copy_ahead,
        ..HaproxyOptions::default()
    });
    let render = Render::new("plan", "r1", "global\n\ndefaults\n  mode http\n", vec![]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let checked = checker.check(&render, deadline).await;
    assert!(
        matches!(checked.outcome, rendergate::CheckOutcome::Passed { .. }),
        "the check did not pass: {:?}",
        checked.outcome
    );
    // made once the check's leftovers are gone
    checker.removed().await;
    let mut made = false;
    for _ in 0..250 {
        made = checker.standby_dir().await.is_some();
        if made {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(made, "no child was made ahead within 5 s");
    // The child says it is ready on its own; copies, if any, are made by
    // then or soon after: measured until they show, for 5 s at most (half a
    // second without: a copy made later could only fail the test).
    let me = std::process::id();
    let mut cost = 0;
    for _ in 0..if copy_ahead { 50 } else { 5 } {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let below = descendants(me);
        assert!(!below.is_empty(), "no held child below this process");
        let all = own_memories(&below).iter().filter_map(|&pid| pss(pid)).sum::<u64>()
            + pss(me).expect("this process");
        cost = all.saturating_sub(rss(me).expect("this process"));
        if copy_ahead && cost > HEAP as u64 / 2 {
            break;
        }
    }
    drop(checker);
    // the next measure counts only its own checker's children
    for _ in 0..250 {
        if descendants(me).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cost
}

/// Every process below `pid`.
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let ppid = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    found.remove(0);
    found
}

/// One process of each memory among `pids`: the init of a PID namespace
/// and the keeper share their memory with the process that made them, and
/// a memory's pages are counted once.
fn own_memories(pids: &[u32]) -> Vec<u32> {
    let mut own: Vec<u32> = Vec::new();
    for &pid in pids {
        if !own.iter().any(|&o| same_memory(o, pid)) {
            own.push(pid);
        }
    }
    own
}

/// Whether two processes share one memory (`kcmp(2)`, `KCMP_VM`); a
/// process gone meanwhile shares nothing.
fn same_memory(a: u32, b: u32) -> bool {
    const KCMP_VM: libc::c_long = 1;
    // SAFETY: kcmp only compares two processes' kernel objects; no crate
    // wraps it.
    let r = unsafe {
        libc::syscall(libc::SYS_kcmp, a as libc::c_long, b as libc::c_long, KCMP_VM, 0, 0)
    };
    let e = std::io::Error::last_os_error();
    assert!(r >= 0 || e.raw_os_error() == Some(libc::ESRCH), "kcmp({a}, {b}): {e}");
    r == 0
}

/// Anonymous memory, each page divided among the processes that share it.
fn pss(pid: u32) -> Option<u64> {
    rollup(pid, "Pss_Anon:")
}

/// Anonymous memory resident, shared or not.
fn rss(pid: u32) -> Option<u64> {
    rollup(pid, "Anonymous:")
}

/// One field of `/proc/<pid>/smaps_rollup`, in bytes; `None` for a process
/// gone meanwhile.
fn rollup(pid: u32, field: &str) -> Option<u64> {
    let text = match std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return None,
        Err(e) => panic!("cannot read the memory of process {pid}: {e}"),
    };
    let line = text.lines().find(|l| l.starts_with(field)).expect("the field");
    let kib: u64 = line[field.len()..].trim().trim_end_matches(" kB").trim().parse().unwrap();
    Some(kib * 1024)
}
