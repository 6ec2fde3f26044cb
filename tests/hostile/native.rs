//! Native code via `package.loadlib` / `require`: a module built by the test
//! with `cc`, probing what the check could do to the host. Render files are
//! text, so the module cannot travel in the render: it sits on the host,
//! where the sandbox should not even let HAProxy load it. When it does load
//! (no sandbox; or Landlock switched off, see layers.rs), every probe below
//! reports `name:ALLOWED` or `name:DENIED(errno)`, in an `[ALERT]`.

use crate::support::*;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The probes that must fail under the full sandbox. `connect` and `udp`
/// aim at this test's listeners on the host's loopback: in the check's
/// world they reach the world's own network namespace at most, where
/// seccomp may let a datagram go (a `resolvers` section connects its
/// sockets as on a pod), so what must hold is that the host's listeners
/// hear nothing ([`Listeners::reached`], checked in every run).
pub const ALL_PROBES: &[&str] =
    &["open", "truncate", "unix", "fork", "kill", "ptrace", "shm", "mq", "memfd", "exec"];
/// The probes seccomp (with the namespaces) stops on its own, without Landlock.
pub const SECCOMP_PROBES: &[&str] = &["unix", "fork", "ptrace", "shm", "mq", "memfd"];

const SOURCE: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ipc.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct lua_State lua_State;
extern const char *lua_pushstring(lua_State *L, const char *s);

static char report[2048];

static void note(const char *name, int ok, int err) {
    size_t n = strlen(report);
    if (ok) snprintf(report + n, sizeof report - n, " %s:ALLOWED", name);
    else snprintf(report + n, sizeof report - n, " %s:DENIED(%d)", name, err);
}

static int run(lua_State *L, int with_exec) {
    strcpy(report, "PROBES");
    int fd = open(SECRET_PATH, O_RDONLY);
    note("open", fd >= 0, errno);
    if (fd >= 0) close(fd);

    int tr = truncate(VICTIM_PATH, 0);
    note("truncate", tr == 0, errno);

    struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(TCP_PORT), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int s = socket(AF_INET, SOCK_STREAM, 0);
    note("socket", s >= 0, errno);
    if (s >= 0) { int r = connect(s, (struct sockaddr *)&in, sizeof in); note("connect", r == 0, errno); close(s); }
    else note("connect", 0, errno);

    in.sin_port = htons(UDP_PORT);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    if (u >= 0) { ssize_t r = sendto(u, "x", 1, 0, (struct sockaddr *)&in, sizeof in); note("udp", r == 1, errno); close(u); }
    else note("udp", 0, errno);

    struct sockaddr_un un = { .sun_family = AF_UNIX };
    size_t len = strlen(ABSTRACT_NAME);
    memcpy(un.sun_path + 1, ABSTRACT_NAME, len);
    int x = socket(AF_UNIX, SOCK_STREAM, 0);
    if (x >= 0) { int r = connect(x, (struct sockaddr *)&un, offsetof(struct sockaddr_un, sun_path) + 1 + len); note("unix", r == 0, errno); close(x); }
    else note("unix", 0, errno);

    pid_t p = fork();
    if (p == 0) _exit(0);
    int fork_errno = errno;
    if (p > 0) waitpid(p, NULL, 0);
    note("fork", p > 0, fork_errno);

    pid_t parent = getppid();
    int k = kill(parent, 0);
    note("kill", k == 0, errno);

    long t = ptrace(PTRACE_ATTACH, parent, 0, 0);
    int ptrace_errno = errno;
    if (t == 0) {
        int st;
        waitpid(parent, &st, __WALL);
        ptrace(PTRACE_DETACH, parent, 0, 0);
        kill(parent, SIGCONT);
    }
    note("ptrace", t == 0, ptrace_errno);

    /* memory no resident page counts, and a channel past the check */
    int shm = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    note("shm", shm >= 0, errno);
    if (shm >= 0) shmctl(shm, IPC_RMID, NULL);
    long mq = syscall(SYS_mq_open, "rendergate-probe", O_CREAT | O_RDWR, 0600, NULL);
    note("mq", mq >= 0, errno);
    if (mq >= 0) { close((int)mq); syscall(SYS_mq_unlink, "rendergate-probe"); }
    long mfd = syscall(SYS_memfd_create, "rendergate-probe", 0);
    note("memfd", mfd >= 0, errno);
    if (mfd >= 0) close((int)mfd);

    if (with_exec) {
        fprintf(stderr, "%s exec:TRYING\n", report);
        fflush(stderr);
        char *argv[] = { "sh", "-c", "echo \"[ALERT] EXEC-RAN-$((6*7))\"; exit 3", NULL };
        char *envp[] = { NULL };
        execve("/bin/sh", argv, envp);
        note("exec", 0, errno);
    }
    lua_pushstring(L, report);
    return 1;
}

/* Host pids by signal 0: one exists when it answers 0 or EPERM, not ESRCH
   (pid 1 and the kernel's threads are always there on a host). */
int pids(lua_State *L) {
    int n = 0;
    for (pid_t p = 1; p < 4096; p++) {
        if (kill(p, 0) == 0 || errno == EPERM) n++;
    }
    snprintf(report, sizeof report, "PIDS-SEEN %d", n);
    lua_pushstring(L, report);
    return 1;
}

/* Touches 64 MiB at a time, up to 2 GiB, then waits. */
static void *hog(void *unused) {
    (void)unused;
    for (int i = 0; i < 32; i++) {
        char *chunk = malloc(64 << 20);
        if (chunk) memset(chunk, i + 1, 64 << 20);
    }
    for (;;) pause();
    return NULL;
}

/* The main thread ends alone (its /proc/<pid>/statm then reads 0) while a
   thread of its own goes on touching memory. */
int lonely(lua_State *L) {
    pthread_t t;
    if (pthread_create(&t, NULL, hog, NULL) != 0) {
        lua_pushstring(L, "THREAD-FAILED");
        return 1;
    }
    syscall(SYS_exit, 0);
    return 0;
}

/* A reservation of 1 TiB that is never touched: what an address space of
   the check's own has no room for. */
int reserve(lua_State *L) {
    void *far = mmap(NULL, 1UL << 40, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    snprintf(report, sizeof report, "RESERVED-1TiB:%s(%d)", far == MAP_FAILED ? "DENIED" : "ALLOWED", far == MAP_FAILED ? errno : 0);
    lua_pushstring(L, report);
    return 1;
}

int probe(lua_State *L) { return run(L, 1); }
int probe_noexec(lua_State *L) { return run(L, 0); }
int luaopen_probe(lua_State *L) { return run(L, 1); }
"#;

/// What the probes talk to: a TCP, a UDP and an abstract Unix listener of the test.
pub struct Listeners {
    tcp: TcpListener,
    udp: UdpSocket,
    unix: UnixListener,
    pub abstract_name: String,
}

impl Listeners {
    fn new(tag: &str) -> Listeners {
        use std::os::linux::net::SocketAddrExt;
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let abstract_name = format!("rendergate-{tag}");
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        let unix = UnixListener::bind_addr(&addr).unwrap();
        unix.set_nonblocking(true).unwrap();
        Listeners { tcp, udp, unix, abstract_name }
    }

    /// What reached the listeners; empty when nothing did.
    pub fn reached(&self) -> Vec<String> {
        let mut got = Vec::new();
        if self.tcp.accept().is_ok() {
            got.push("a TCP connection reached the test's listener".to_owned());
        }
        if self.udp.recv_from(&mut [0u8; 64]).is_ok() {
            got.push("a datagram reached the test's UDP socket".to_owned());
        }
        if self.unix.accept().is_ok() {
            got.push("a connection reached the test's abstract Unix socket".to_owned());
        }
        got
    }
}

/// The file the `truncate` probe aims at, planted next to the module: a
/// case may show it in the check's world, read-only (`--check-read`).
const VICTIM: &str = "truncate-victim";
const VICTIM_CONTENT: &str = "must keep its bytes\n";

/// Builds the probe module into `outside/probe.so`, or says why not.
/// The native module built for this scene, with the listeners its probes
/// aim at; or the skip that says why there is none (no Lua, no `cc`).
fn module(s: &mut Scene) -> Result<(PathBuf, Listeners), Box<Spec>> {
    if !has_lua() {
        return Err(Box::new(no_lua()));
    }
    let listeners = Listeners::new(&s.tag);
    let so = build_module(s, &listeners).map_err(|why| Box::new(Spec::missing(why)))?;
    Ok((so, listeners))
}

fn build_module(s: &mut Scene, l: &Listeners) -> Result<PathBuf, String> {
    let cc = which("cc").ok_or("no cc to build the native module")?;
    let victim = s.plant(VICTIM, VICTIM_CONTENT);
    let source = format!(
        "#define SECRET_PATH \"{}\"\n#define VICTIM_PATH \"{}\"\n#define TCP_PORT {}\n#define UDP_PORT {}\n#define ABSTRACT_NAME \"{}\"\n{SOURCE}",
        s.secret(),
        victim.display(),
        l.tcp.local_addr().unwrap().port(),
        l.udp.local_addr().unwrap().port(),
        l.abstract_name,
    );
    let src = s.plant("probe.c", source);
    let so = s.outside.join("probe.so");
    let out = Command::new(cc)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg(&src)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("cc failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(s.adopt("probe.so"))
}

/// The probe results in `text` (the last `PROBES …` report), by name.
pub fn probe_results(text: &str) -> Option<Vec<(String, bool)>> {
    let at = text.rfind("PROBES ")?;
    let line = text[at..].lines().next().unwrap_or_default();
    Some(
        line.split_whitespace()
            .skip(1)
            .filter_map(|item| item.split_once(':'))
            .map(|(name, what)| (name.to_owned(), what.starts_with("ALLOWED")))
            .collect(),
    )
}

/// Failures unless each of `required` is reported denied.
pub fn all_denied(text: &str, required: &[&str]) -> Vec<String> {
    let Some(results) = probe_results(text) else {
        return vec!["no probe report in the output".into()];
    };
    let mut fails = Vec::new();
    for name in required {
        match results.iter().find(|(n, _)| n == name) {
            Some((_, false)) => {}
            Some((_, true)) => fails.push(format!("native probe {name} succeeded")),
            None => fails.push(format!("native probe {name} did not report")),
        }
    }
    fails
}

/// The probes that must fail when the module loads under the full sandbox:
/// all of them but `kill` (only Landlock's signal scope, ABI 6, stops it, and only
/// where the kernel has it) and the network ones (see [`ALL_PROBES`]).
pub const LOADED_PROBES: &[&str] =
    &["open", "truncate", "unix", "fork", "ptrace", "shm", "mq", "memfd", "exec"];

/// Loads the module with `load` (Lua) and raises its report.
/// With `must_load`, the module has to load (a run without Landlock);
/// otherwise "it could not even load" is fine too.
fn native_case(
    s: &mut Scene,
    load: impl FnOnce(&Path) -> String,
    required: &'static [&'static str],
    must_load: bool,
) -> Spec {
    let (so, listeners) = match module(s) {
        Ok(built) => built,
        Err(skip) => return *skip,
    };
    let victim = s.outside.join(VICTIM);
    crate::lua::lua_render("lua-load", load(&so))
        .forbid("EXEC-RAN-42")
        .extra(move |o| {
            let all = o.all();
            let mut fails = listeners.reached();
            match std::fs::read_to_string(&victim) {
                Ok(content) if content == VICTIM_CONTENT => {}
                other => fails.push(format!("the file the probe truncates changed: {other:?}")),
            }
            // Either the module never loaded, or it ran and every probe failed.
            if !all.contains("LOADLIB-FAILED") {
                fails.extend(all_denied(&all, required));
            } else if must_load {
                fails.push("the native module did not load, so its probes never ran".into());
            }
            fails
        })
        .leaks(vec![
            Leak::Text("open:ALLOWED".into()),
            Leak::Text("truncate:ALLOWED".into()),
            Leak::Text("connect:ALLOWED".into()),
            Leak::Text("udp:ALLOWED".into()),
            Leak::Text("unix:ALLOWED".into()),
            Leak::Text("fork:ALLOWED".into()),
            Leak::Text("kill:ALLOWED".into()),
            Leak::Text("ptrace:ALLOWED".into()),
            Leak::Text("shm:ALLOWED".into()),
            Leak::Text("mq:ALLOWED".into()),
            Leak::Text("memfd:ALLOWED".into()),
            Leak::Text("EXEC-RAN-42".into()),
        ])
}

pub fn native_loadlib(s: &mut Scene) -> Spec {
    native_case(
        s,
        |so| {
            format!(
                "local f, err = package.loadlib([[{}]], \"probe\")\n\
if not f then error(\"LOADLIB-FAILED: \" .. tostring(err)) end\n\
error(f())\n",
                so.display()
            )
        },
        ALL_PROBES,
        false,
    )
}

pub fn native_require(s: &mut Scene) -> Spec {
    native_case(
        s,
        |so| {
            format!(
                "package.cpath = [[{}/?.so]]\n\
local ok, report = pcall(require, \"probe\")\n\
if not ok then error(\"LOADLIB-FAILED: \" .. tostring(report)) end\n\
error(report)\n",
                so.parent().unwrap().display()
            )
        },
        ALL_PROBES,
        false,
    )
}

/// The module without the exec probe, and only seccomp's probes required:
/// for runs where Landlock is off and seccomp must hold alone. The module
/// is shown in the check's world with `--check-read` (every other host
/// path is absent there, Landlock or not).
pub fn native_seccomp_only(s: &mut Scene) -> Spec {
    let so = s.outside.join("probe.so");
    native_case(
        s,
        |so| {
            format!(
                "local f, err = package.loadlib([[{}]], \"probe_noexec\")\n\
if not f then error(\"LOADLIB-FAILED: \" .. tostring(err)) end\n\
error(f())\n",
                so.display()
            )
        },
        SECCOMP_PROBES,
        true,
    )
    .arg("--check-read")
    .arg(so.to_str().unwrap())
}

/// The check directory is writable (HAProxy writes there during `-c`), so a
/// script can carry native code in a Lua string, write it next to the
/// config and load it. It loads; every probe must still fail. The
/// `truncate` probe's file is shown in the world, read-only, as the CA
/// store and the libraries are (whose Landlock rules grant `TRUNCATE`):
/// it keeps its bytes.
pub fn native_written_in_check_dir(s: &mut Scene) -> Spec {
    let victim = s.outside.join(VICTIM);
    native_case(s, |so| written_and_loaded(so, "written-probe.so", "probe"), LOADED_PROBES, true)
        .arg("--check-read")
        .arg(victim.to_str().unwrap())
}

/// Native code a render carries (written into its directory, loaded from
/// there) counts the pids that answer signal 0 below 4096: on a host, pid 1
/// and the kernel's threads; in the check's PID namespace only its own
/// (init, HAProxy, the keeper). Fails without the PID namespace.
pub fn native_counts_no_host_pids(s: &mut Scene) -> Spec {
    let so = match module(s) {
        Ok((so, _listeners)) => so,
        Err(skip) => return *skip,
    };
    let script = written_and_loaded(&so, "pids-probe.so", "pids");
    crate::lua::lua_render("lua-load", script).extra(|o| {
        let all = o.all();
        let Some(at) = all.find("PIDS-SEEN ") else {
            return vec![format!(
                "no pid count in the output: {}",
                all.chars().take(400).collect::<String>()
            )];
        };
        let count: usize = all[at + 10..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(usize::MAX);
        match count {
            0..=3 => vec![],
            n => vec![format!("native code saw {n} pids below 4096 answer signal 0: the host's")],
        }
    })
}

/// Native code a render carries starts a thread that touches 2 GiB and
/// ends its main thread alone, whose `/proc/<pid>/statm` then reads 0: the
/// memory is still read (through the thread), and past `--check-memory-max`
/// the check is stopped and could not run, rather than running on to its
/// deadline.
pub fn native_thread_outlives_main_and_allocates(s: &mut Scene) -> Spec {
    let so = match module(s) {
        Ok((so, _listeners)) => so,
        Err(skip) => return *skip,
    };
    let script = written_and_loaded(&so, "lonely-probe.so", "lonely");
    let mut spec = crate::lua::lua_render("lua-load", script)
        .must_say("past the check's limit of 256MiB (--check-memory-max), and was stopped");
    spec.expect = COULD_NOT_RUN;
    spec.args = ["--check-memory-max", "256MiB"].map(String::from).to_vec();
    spec
}

/// Native code a render carries reserves 1 TiB it never touches: at the
/// top of its bounds a check has no address-space limit of `--check-memory`,
/// but a backstop of four times `--check-memory-max` stays (the page tables
/// of such a reservation, read page by page, are memory resident pages do
/// not show), so the reservation fails.
pub fn native_far_reservation_meets_the_backstop(s: &mut Scene) -> Spec {
    let so = match module(s) {
        Ok((so, _listeners)) => so,
        Err(skip) => return *skip,
    };
    let script = written_and_loaded(&so, "reserve-probe.so", "reserve");
    let mut spec = crate::lua::lua_render("lua-load", script).must_say("RESERVED-1TiB:DENIED(12)");
    spec.expect = &[Kind::Refused];
    spec.leaks = vec![Leak::Text("RESERVED-1TiB:ALLOWED".into())];
    spec
}

/// Lua that writes the module `so` into the check directory as `name`
/// (carried in a string) and raises what its function `function` returns.
fn written_and_loaded(so: &Path, name: &str, function: &str) -> String {
    let bytes = std::fs::read(so).unwrap();
    let escaped: String = bytes.iter().map(|b| format!("\\x{b:02x}")).collect();
    format!(
        "local f = assert(io.open(\"{name}\", \"wb\"))\n\
f:write(\"{escaped}\")\n\
f:close()\n\
local fn, err = package.loadlib(\"./{name}\", \"{function}\")\n\
if not fn then error(\"LOADLIB-FAILED: \" .. tostring(err)) end\n\
error(fn())\n"
    )
}
