//! seccomp: the system calls a config check never needs are refused, so
//! code smuggled into the check (Lua, a native module) cannot reach the
//! network, start programs, or inspect other processes.
//!
//! The program is compiled once in the parent with `seccompiler`; the child
//! only installs it, with `seccompiler`'s own `apply_filter` (no
//! allocation), last of all layers. A
//! short hand-written prefix checks the architecture, refuses the x32 ABI
//! (same `AUDIT_ARCH`, syscall numbers with bit 30 set, which would dodge
//! every number below) and answers `clone3` with ENOSYS so libc falls back
//! to `clone`, whose flags can be inspected. Everything else listed is
//! EPERM. `execve` stays allowed (our own exec of haproxy happens after
//! this filter is installed); Landlock grants execute on nothing but the
//! haproxy binary and its loader, which is what stops other programs.

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};
use std::collections::BTreeMap;
use std::mem::offset_of;
use std::sync::{Arc, OnceLock};

/// The network, refused outright with EPERM but inside the check's world,
/// whose network namespace holds only its own loopback: there `connect`,
/// the sends, `bind` and `listen` reach nothing but the namespace itself. A
/// `resolvers` section connects its sockets as it does on a pod (under
/// `zero-warning`, "can't connect socket" is fatal), and HAProxy's
/// `SO_REUSEPORT` probe binds as there.
const NETWORK: &[(&str, libc::c_long)] = &[
    // `socket` itself is filtered below (UDP only); `connect` refused
    // costs a `resolvers` section only a warning (measured with haproxy
    // 2.6: "can't connect socket for nameserver", still valid), where a
    // refused `socket` would be a fatal alert.
    ("connect", libc::SYS_connect),
    ("bind", libc::SYS_bind),
    ("listen", libc::SYS_listen),
    ("accept", libc::SYS_accept),
    ("accept4", libc::SYS_accept4),
    // sends carrying an address cannot be told apart cheaply: all refused
    ("sendto", libc::SYS_sendto),
    ("sendmsg", libc::SYS_sendmsg),
    ("sendmmsg", libc::SYS_sendmmsg),
];

/// Refused outright with EPERM, in the world's own network too.
const DENIED: &[(&str, libc::c_long)] = &[
    // other processes
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    // process creation (threads are allowed below, through `clone`)
    ("fork", libc::SYS_fork),
    ("vfork", libc::SYS_vfork),
    // io_uring performs connect/open/send without these filters seeing them
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    // leaving or reshaping the sandbox, kernel attack surface
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("mount", libc::SYS_mount),
    ("chroot", libc::SYS_chroot),
    ("pivot_root", libc::SYS_pivot_root),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    // System V IPC and POSIX message queues: memory no process's resident
    // pages count (--check-memory-max bounds none of it) and, in the world
    // without an IPC namespace of its own, a channel between checks that
    // outlives them. A config check uses none of these, nor memfds below
    // (HAProxy shares memory by mmap).
    ("shmget", libc::SYS_shmget),
    ("shmat", libc::SYS_shmat),
    ("shmctl", libc::SYS_shmctl),
    ("msgget", libc::SYS_msgget),
    ("msgsnd", libc::SYS_msgsnd),
    ("msgrcv", libc::SYS_msgrcv),
    ("msgctl", libc::SYS_msgctl),
    ("semget", libc::SYS_semget),
    ("semop", libc::SYS_semop),
    ("semtimedop", libc::SYS_semtimedop),
    ("semctl", libc::SYS_semctl),
    ("mq_open", libc::SYS_mq_open),
    ("mq_unlink", libc::SYS_mq_unlink),
    ("mq_timedsend", libc::SYS_mq_timedsend),
    ("mq_timedreceive", libc::SYS_mq_timedreceive),
    ("mq_notify", libc::SYS_mq_notify),
    ("mq_getsetattr", libc::SYS_mq_getsetattr),
    // files of memory with no file-system bound: written, not mapped, they
    // are no process's resident pages either (the world's tmpfs mounts are
    // bounded; 256 of these at the file-size bound would be 64 GiB)
    ("memfd_create", libc::SYS_memfd_create),
    ("memfd_secret", libc::SYS_memfd_secret),
];

/// `socket` is refused unless it makes an IPv4/IPv6 socket of its type's
/// own protocol, TCP or UDP: without a network of the check's own, only a
/// datagram one, which `resolvers` sections need at check time (and which
/// can send nothing: connect and the address-carrying sends are refused);
/// in its own network, a stream one too, for HAProxy's own probes (3.x binds two stream sockets to learn whether
/// `SO_REUSEPORT` works, and disables `shards` with a warning when it
/// cannot). A rule matches (refuses) when any of its conditions'
/// conjunction holds: another family, or another type.
fn socket_rules(own_network: bool) -> seccompiler::Result<Vec<SeccompRule>> {
    let dword = |arg, op, value| SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value);
    let ne = |arg, value: i32| dword(arg, SeccompCmpOp::Ne, value as u64);
    let mut rules = vec![
        SeccompRule::new(vec![ne(0, libc::AF_INET)?, ne(0, libc::AF_INET6)?])?,
        // protocol 0 (the type's own), TCP or UDP: no other module loaded
        // on demand (SCTP, DCCP, L2TP), no kernel surface a check needs not
        SeccompRule::new(vec![ne(2, 0)?, ne(2, libc::IPPROTO_TCP)?, ne(2, libc::IPPROTO_UDP)?])?,
    ];
    let allowed: &[u64] = match own_network {
        true => &[libc::SOCK_DGRAM as u64, libc::SOCK_STREAM as u64],
        false => &[libc::SOCK_DGRAM as u64],
    };
    // the type's low 4 bits (SOCK_NONBLOCK/SOCK_CLOEXEC live above them)
    for kind in (0..16).filter(|k| !allowed.contains(k)) {
        rules.push(SeccompRule::new(vec![dword(1, SeccompCmpOp::MaskedEq(0xf), kind)?])?);
    }
    Ok(rules)
}

/// The system calls refused outright, in the world's own network
/// (`own_network`) or not.
fn denied(own_network: bool) -> impl Iterator<Item = &'static (&'static str, libc::c_long)> {
    let network = if own_network { &[][..] } else { NETWORK };
    network.iter().chain(DENIED)
}

/// The names of what is refused, for the docs and `--explain`; in the
/// world's own network (`own_network`) or not.
pub fn denied_names(own_network: bool) -> Vec<&'static str> {
    let mut names: Vec<&str> = denied(own_network).map(|(n, _)| *n).collect();
    names.extend([
        match own_network {
            true => "socket (but IPv4/IPv6 stream or datagram, TCP or UDP)",
            false => "socket (but IPv4/IPv6 datagram, UDP)",
        },
        "clone (without CLONE_THREAD)",
        "clone3 (ENOSYS)",
        "x32 syscalls",
    ]);
    names
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

// classic BPF opcodes
const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

fn stmt(code: u16, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

/// The whole program, ready to install, built once per process (the probe
/// and every checker share it); `own_network`: for checks inside the
/// check's world (its own network namespace, loopback only), where
/// [`NETWORK`] is allowed. Errors only if this architecture is not
/// supported by `seccompiler`.
pub fn program(own_network: bool) -> Result<Arc<Vec<seccompiler::sock_filter>>, String> {
    type Program = Result<Arc<Vec<seccompiler::sock_filter>>, String>;
    static PROGRAMS: [OnceLock<Program>; 2] = [OnceLock::new(), OnceLock::new()];
    let compile = || build(own_network).map(Arc::new).map_err(|e| format!("seccomp: {e}"));
    PROGRAMS[usize::from(own_network)].get_or_init(compile).clone()
}

fn build(own_network: bool) -> Result<Vec<seccompiler::sock_filter>, Box<dyn std::error::Error>> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied(own_network).map(|(_, nr)| (*nr, vec![])).collect();
    // clone: only threads (CLONE_THREAD set) may be made
    let thread = SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64);
    let no_thread = SeccompCondition::new(0, SeccompCmpArgLen::Qword, thread, 0)?;
    rules.insert(libc::SYS_clone, vec![SeccompRule::new(vec![no_thread])?]);
    rules.insert(libc::SYS_socket, socket_rules(own_network)?);
    let refused = SeccompAction::Errno(libc::EPERM as u32);
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, refused, arch)?;
    let body: seccompiler::BpfProgram = filter.try_into()?;

    let mut prog = vec![
        stmt(LD_W_ABS, offset_of!(libc::seccomp_data, arch) as u32),
        jump(JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, offset_of!(libc::seccomp_data, nr) as u32),
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        jump(JEQ_K, libc::SYS_clone3 as u32, 0, 1),
        stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ];
    if cfg!(not(target_arch = "x86_64")) {
        // x32 exists only on x86_64; drop its two instructions elsewhere
        prog.drain(4..6);
    }
    prog.extend(body);
    Ok(prog)
}

/// In the child: installs `prog` with seccompiler's own application (which
/// sets `no_new_privs` too, and allocates nothing). Returns 0 or an errno.
pub fn install(prog: &[seccompiler::sock_filter]) -> i32 {
    match seccompiler::apply_filter(prog) {
        Ok(()) => 0,
        Err(seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e)) => {
            e.raw_os_error().unwrap_or(libc::EINVAL)
        }
        Err(_) => libc::EINVAL, // an empty program: never built
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_compiles_with_the_guard_first() {
        let prog = program(false).unwrap();
        assert!(prog.len() > NETWORK.len() + DENIED.len(), "{}", prog.len());
        assert!(prog.len() < 4096, "BPF programs are limited to 4096 instructions");
        assert_eq!(prog[0], stmt(LD_W_ABS, offset_of!(libc::seccomp_data, arch) as u32));
        assert_eq!(prog[1].k, AUDIT_ARCH);
        assert!(prog.iter().any(|f| f.code == JEQ_K && f.k == libc::SYS_clone3 as u32));
        assert!(prog.iter().any(|f| f.k == libc::SYS_connect as u32));
    }

    /// Forks; the child sets `no_new_privs`, installs `prog` and leaves with
    /// what `steps` returns (10: the filter could not be installed).
    /// `steps` must make raw system calls only. The child's exit code.
    fn filtered_child(prog: &[seccompiler::sock_filter], steps: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child makes raw system calls only and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = if install(prog) != 0 { 10 } else { steps() };
            // SAFETY: ends the child without running anything of the parent's.
            unsafe { libc::_exit(code) };
        }
        crate::process::exit_code_of(pid)
    }

    /// Installs the filter in a forked child and checks what it answers.
    #[test]
    fn a_filtered_child_cannot_open_sockets_fork_clone3_or_ptrace() {
        let prog = program(false).unwrap();
        // SAFETY: raw system calls only, in the forked child.
        let code = filtered_child(&prog, || unsafe {
            // a raw call's result `r` is -1, with `errno`
            let refused = |r: libc::c_long, errno| r == -1 && super::super::errno() == errno;
            if !refused(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0).into(), libc::EPERM) {
                return 11;
            }
            if libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) != -1 {
                return 16;
            }
            let udp = libc::socket(libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            if udp < 0 {
                return 17;
            }
            let addr: libc::sockaddr_in6 = std::mem::zeroed();
            let to = (&raw const addr).cast::<libc::sockaddr>();
            let len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            if libc::connect(udp, to, len) != -1
                || libc::sendto(udp, b"x".as_ptr().cast(), 1, 0, to, len) != -1
            {
                return 18;
            }
            if !refused(libc::syscall(libc::SYS_fork), libc::EPERM) {
                return 12;
            }
            if !refused(libc::syscall(libc::SYS_clone3, 0usize, 0usize), libc::ENOSYS) {
                return 13;
            }
            if !refused(libc::syscall(libc::SYS_clone, libc::SIGCHLD as u64, 0usize), libc::EPERM) {
                return 14;
            }
            if libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0) != -1 {
                return 15;
            }
            0
        });
        assert_eq!(code, 0, "step {code} failed");
    }

    /// In the world's own network the program lets HAProxy's probes make
    /// and bind any IPv4/IPv6 socket, never one of another family.
    #[test]
    fn in_its_own_network_a_child_may_bind_stream_sockets_but_not_unix_ones() {
        let prog = program(true).unwrap();
        // SAFETY: raw system calls only, in the forked child.
        let code = filtered_child(&prog, || unsafe {
            let tcp = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if tcp < 0 {
                return 11;
            }
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
            let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            if libc::bind(tcp, &addr as *const _ as *const libc::sockaddr, len) != 0 {
                return 12;
            }
            if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) != -1 {
                return 13;
            }
            if libc::syscall(libc::SYS_fork) != -1 {
                return 14;
            }
            0
        });
        assert_eq!(code, 0, "step {code} failed");
    }
}
