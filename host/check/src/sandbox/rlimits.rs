//! Resource limits: a check cannot take more memory, CPU time, files or
//! disk than a config check needs, whatever the config makes HAProxy do.

use rustix::process::{Resource, Rlimit};
use std::time::Duration;

/// Open files for the check: HAProxy's `-c` needs a handful; a small limit
/// keeps a hostile Lua script from exhausting the host's.
pub const OPEN_FILES: u64 = 256;

/// The largest file a check may write (`RLIMIT_FSIZE`), 16 MiB. HAProxy
/// writes files during `-c`, and a limit below what it writes turns a
/// valid config into a killed check: 3.0 built with `USE_SHM_OPEN` sizes a
/// 64 KiB startup-log file in `/dev/shm` on every run (`ftruncate`; with a
/// limit of 0, SIGXFSZ kills it when Landlock does not stop the
/// `shm_open` first), and 3.2 writes an `acme` section's missing account
/// key (a few KiB of PEM). 16 MiB is 256 times the largest of these, yet
/// small next to any disk. Beyond it the writer is killed by SIGXFSZ, and
/// the check runs again under [`FILE_SIZE_MAX`], as it does under
/// `--check-memory-max`: the bound never decides a verdict.
pub const FILE_SIZE: u64 = 16 << 20;

/// The largest file a check's second run may write, 256 MiB: four times
/// what a pod's `/dev/shm` holds (64 MiB, where a `ring`'s `backing-file`
/// lies), and half the deployment kit's `TMPDIR` (an `emptyDir` of 512 MiB,
/// which a file past it would make the kubelet evict the gate's pod for).
/// Beyond it the check could not run.
pub const FILE_SIZE_MAX: u64 = 256 << 20;

/// The memory a check's run at the top of its bounds may touch
/// (`--check-memory-max`), 16 GiB: read as it runs, since that run has no
/// address-space limit ([`crate::resident`]). A check whose first run, under
/// a lower `--check-memory`, did not pass runs again at the top, so that the
/// gate's limit never decides a verdict (docs/checking.md, "Verdicts").
/// HAProxy 2.6 reserves a 1.5 GB `ring` with 14 MB resident, while
/// `tune.ssl.cachesize 4000000` touches the ~1 GB it maps. 16 GiB bounds
/// what a render that is refused anyway can make the run touch (a Lua loop
/// that allocates), where "unlimited" would leave that to the host's OOM
/// killer; a gate host with less memory to spare should lower it.
pub const DEFAULT_MEMORY_MAX: u64 = 16 << 30;

/// The hard address-space limit this process runs under (`ulimit -v`, a
/// container's), which no check can raise: each bound is held to it, so a
/// gate capped below `--check-memory-max` makes no second run it cannot make
/// (`u64::MAX`: none, or unknown).
pub fn address_space_ceiling() -> u64 {
    rustix::process::getrlimit(Resource::As).maximum.unwrap_or(u64::MAX)
}

/// The hard file-size limit this process runs under (`ulimit -f`,
/// systemd's `LimitFSIZE=`), which no check can raise: both file-size
/// bounds are held to it (`u64::MAX`: none, or unknown).
pub fn file_size_ceiling() -> u64 {
    rustix::process::getrlimit(Resource::Fsize).maximum.unwrap_or(u64::MAX)
}

/// The CPU limit for a check with `time_left`: that, rounded up, plus one
/// second, so the wall deadline usually speaks first with the clearer message.
pub fn cpu_seconds(time_left: Duration) -> u64 {
    time_left.as_secs() + u64::from(time_left.subsec_nanos() > 0) + 1
}

/// The hard open-files limit this process runs under (`ulimit -n`), which
/// no check can raise (`u64::MAX`: none, or unknown).
fn open_files_ceiling() -> u64 {
    rustix::process::getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX)
}

/// The limits for one check, computed in the parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    entries: [(Resource, u64); 4],
    /// [`OPEN_FILES`], held to this process's hard limit.
    open_files: u64,
}

impl Limits {
    /// `memory`: address space and `file_size`: the largest file, in bytes;
    /// `timeout`: the check's time left ([`cpu_seconds`]).
    pub fn new(memory: u64, file_size: u64, timeout: Duration) -> Limits {
        Limits {
            entries: [
                (Resource::As, memory.min(address_space_ceiling())),
                (Resource::Cpu, cpu_seconds(timeout)),
                // what HAProxy writes during -c fits; more kills the writer (SIGXFSZ)
                (Resource::Fsize, file_size.min(file_size_ceiling())),
                // a crash must not write a core holding the render's secrets
                (Resource::Core, 0),
            ],
            open_files: OPEN_FILES.min(open_files_ceiling()),
        }
    }

    /// In the child: sets every limit but open files (soft = hard, so they
    /// cannot be raised back). Returns 0 or an errno; raw system calls only.
    pub fn apply(&self) -> i32 {
        super::errno_of(self.entries.into_iter().try_for_each(set))
    }

    /// In the child, once its world and Landlock's grants are made: the
    /// open-files limit. Not before: the child holds every descriptor of the
    /// gate's until `execve` (each close-on-exec), and a gate with hundreds
    /// open (its connections) would leave the world no number below it.
    pub fn apply_open_files(&self) -> i32 {
        super::errno_of(set((Resource::Nofile, self.open_files)))
    }
}

fn set((resource, value): (Resource, u64)) -> rustix::io::Result<()> {
    rustix::process::setrlimit(resource, Rlimit { current: Some(value), maximum: Some(value) })
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Limits {
        fn get(&self, resource: Resource) -> Option<u64> {
            self.entries.iter().find(|(r, _)| *r == resource).map(|(_, v)| *v)
        }
    }

    #[test]
    fn cpu_seconds_round_up_and_files_are_bounded() {
        let l = Limits::new(1 << 30, FILE_SIZE, Duration::from_millis(2500));
        assert_eq!(l.get(Resource::Cpu), Some(4));
        assert_eq!(Limits::new(1, FILE_SIZE, Duration::from_secs(30)).get(Resource::Cpu), Some(31));
        assert_eq!(l.get(Resource::As), Some(1 << 30));
        assert_eq!(l.get(Resource::Fsize), Some(16 << 20));
        assert_eq!(l.get(Resource::Core), Some(0));
        assert_eq!(l.open_files, OPEN_FILES.min(open_files_ceiling()));
    }
}
