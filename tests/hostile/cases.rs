//! Config-level cases: valid renders that must still pass, host paths the
//! config names, /proc and /dev tricks, the environment, DNS, output floods.

use crate::support::*;
use std::net::UdpSocket;

/// A valid config: `global` gets `global_extra`, the frontend `frontend_extra`,
/// and `tail` comes last (whole sections). Each extra is whole lines.
pub fn config(global_extra: &str, frontend_extra: &str, tail: &str) -> String {
    format!(
        "global\n{global_extra}\
defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n\
frontend www\n  bind 127.0.0.1:18080\n{frontend_extra}{tail}"
    )
}

/// A frontend line reading `path` as an ACL pattern file: HAProxy quotes the
/// first line of a file it cannot parse as addresses.
pub fn acl_file(path: &str) -> String {
    config("", &format!("  acl bad src -f {path}\n  http-request deny if bad\n"), "")
}

const NO_OPENSSL: &str = "no openssl to make a certificate";

// -- valid renders: pass, and nothing created -------------------------------

pub fn valid_minimal(_: &mut Scene) -> Spec {
    Spec::check(config("", "", ""), PASS)
}

pub fn tls_in_directory(_: &mut Scene) -> Spec {
    let Some((cert, key)) = self_signed() else { return Spec::missing(NO_OPENSSL) };
    let frontend =
        "  bind 127.0.0.1:18443 ssl crt ssl/site.pem ca-file ssl/ca.pem verify optional\n";
    Spec::check(config("", frontend, ""), PASS)
        .files(vec![file("ssl/site.pem", format!("{cert}{key}")), file("ssl/ca.pem", cert.clone())])
}

/// The system CA store is part of every check's world (as on a pod), so
/// `@system-ca` loads.
pub fn tls_system_ca(_: &mut Scene) -> Spec {
    let tail = "backend tls\n  server s1 127.0.0.1:8443 ssl verify required ca-file @system-ca sni str(hostile.test)\n";
    Spec::check(config("", "  default_backend tls\n", tail), PASS)
}

pub fn resolvers_section(_: &mut Scene) -> Spec {
    let tail = "resolvers dns\n  nameserver ns1 127.0.0.1:53\n  accepted_payload_size 8192\n  hold valid 10s\n\
backend app\n  server s1 127.0.0.1:8080 resolvers dns init-addr none\n";
    Spec::check(config("", "  default_backend app\n", tail), PASS)
}

/// Settings that act at start-up, not during `-c`: nothing may be created.
pub fn daemon_user_chroot_stats(s: &mut Scene) -> Spec {
    let jail = s.plant_dir("jail");
    let sock = s.outside.join(format!("stats-{}.sock", s.tag));
    let pid = s.outside.join(format!("haproxy-{}.pid", s.tag));
    let group = nogroup();
    let global = format!(
        "  user nobody\n  group {group}\n  chroot {}\n  stats socket {} mode 600 level admin\n  daemon\n  pidfile {}\n",
        jail.display(),
        sock.display(),
        pid.display()
    );
    Spec::check(config(&global, "", ""), PASS).watch(sock).watch(pid)
}

/// Names for users and groups in the other places HAProxy resolves them
/// while parsing, and spelled the other ways HAProxy accepts: valid here
/// (unsandboxed HAProxy passes each), so they must pass sandboxed too. A
/// false refusal closes the latch and reverts pods.
pub fn user_group_spellings(_: &mut Scene) -> Spec {
    let global = format!("  user nobody # the unprivileged user\n  group \"{}\"\n", nogroup());
    Spec::check(config(&global, "", ""), PASS)
}

pub fn stats_socket_user_group(s: &mut Scene) -> Spec {
    let sock = s.outside.join(format!("stats-{}.sock", s.tag));
    let global = format!(
        "  stats socket {} mode 660 level admin user nobody group {}\n",
        sock.display(),
        nogroup()
    );
    Spec::check(config(&global, "", ""), PASS).watch(sock)
}

pub fn unix_bind_user_group(s: &mut Scene) -> Spec {
    let global = format!(
        "  unix-bind prefix {} mode 770 user nobody group {}\n",
        s.outside.display(),
        nogroup()
    );
    Spec::check(config(&global, "", ""), PASS)
}

/// Kubernetes-style service discovery: the resolvers take the name servers
/// of /etc/resolv.conf, the world's stand-in (`nameserver 127.0.0.1`), so
/// the render passes on every host.
pub fn parse_resolv_conf(_: &mut Scene) -> Spec {
    let tail = "resolvers dns\n  parse-resolv-conf\nbackend app\n  server s1 127.0.0.1:8080 resolvers dns init-addr none\n";
    Spec::check(config("", "  default_backend app\n", tail), PASS)
}

/// Variables the config sets for itself still expand (the gate's own are gone).
pub fn setenv_in_global(_: &mut Scene) -> Spec {
    let tail = "backend app\n  server s1 127.0.0.1:\"${BACKEND_PORT}\"\n";
    Spec::check(config("  setenv BACKEND_PORT 8080\n", "  default_backend app\n", tail), PASS)
}

/// A directory of certificates in the render (`crt DIR` lists it).
pub fn tls_crt_directory(_: &mut Scene) -> Spec {
    let Some((cert, key)) = self_signed() else { return Spec::missing(NO_OPENSSL) };
    let frontend = "  bind 127.0.0.1:18443 ssl crt ssl/certs/\n";
    Spec::check(config("", frontend, ""), PASS).files(vec![
        file("ssl/certs/a.pem", format!("{cert}{key}")),
        file("ssl/certs/b.pem", format!("{cert}{key}")),
    ])
}

/// A group every Debian-like host has (`nogroup`), else `nobody`: the
/// world's /etc/group holds the host's names, so it resolves as on the host.
fn nogroup() -> &'static str {
    if std::fs::read_to_string("/etc/group").unwrap_or_default().contains("\nnogroup:") {
        "nogroup"
    } else {
        "nobody"
    }
}

// -- host paths named by the config -----------------------------------------

pub fn map_ip_outside(s: &mut Scene) -> Spec {
    let frontend = format!("  http-request set-var(txn.x) src,map_ip({})\n", s.secret());
    Spec::check(config("", &frontend, ""), REFUSED).leaks(vec![Leak::Marker])
}

pub fn acl_file_outside(s: &mut Scene) -> Spec {
    Spec::check(acl_file(s.secret()), REFUSED).leaks(vec![Leak::Marker])
}

/// A well-formed HTTP response outside: unsandboxed HAProxy reads it and passes.
pub fn errorfile_host_path(s: &mut Scene) -> Spec {
    let body = format!(
        "HTTP/1.0 503 Service Unavailable\r\ncontent-type: text/plain\r\n\r\n{}\n",
        s.secret
    );
    let path = s.plant("errorfile.http", body);
    Spec::check(config("", &format!("  errorfile 503 {}\n", path.display()), ""), REFUSED)
        .leaks(vec![Leak::Passes])
}

pub fn crt_host_path(s: &mut Scene) -> Spec {
    let Some((cert, key)) = self_signed() else { return Spec::missing(NO_OPENSSL) };
    let path = s.plant("host-cert.pem", format!("{cert}{key}"));
    let frontend = format!("  bind 127.0.0.1:18443 ssl crt {}\n", path.display());
    Spec::check(config("", &frontend, ""), REFUSED).leaks(vec![Leak::Passes])
}

pub fn ca_file_host_path(s: &mut Scene) -> Spec {
    let Some((cert, key)) = self_signed() else { return Spec::missing(NO_OPENSSL) };
    let ca = s.plant("host-ca.pem", cert.clone());
    let frontend = format!(
        "  bind 127.0.0.1:18443 ssl crt site.pem ca-file {} verify required\n",
        ca.display()
    );
    Spec::check(config("", &frontend, ""), REFUSED)
        .files(vec![file("site.pem", format!("{cert}{key}"))])
        .leaks(vec![Leak::Passes])
}

/// The secret as a crt-list: HAProxy quotes each line as a certificate name.
pub fn crt_list_host_path(s: &mut Scene) -> Spec {
    let frontend = format!("  bind 127.0.0.1:18443 ssl crt-list {}\n", s.secret());
    Spec::check(config("", &frontend, ""), REFUSED).leaks(vec![Leak::Marker])
}

/// `return … file` reads any file and is happy with any content.
pub fn http_return_file_host_path(s: &mut Scene) -> Spec {
    let frontend = format!(
        "  http-request return status 200 content-type text/plain file {} if {{ path /x }}\n",
        s.secret()
    );
    Spec::check(config("", &frontend, ""), REFUSED).leaks(vec![Leak::Passes])
}

// -- /proc and path tricks --------------------------------------------------

/// HAProxy's own environment, which unsandboxed is the gate's. In the root
/// world `/proc` is the check's own and this is HAProxy's environment
/// (`--check-env` only, as a pod's is its own); in the config-directory
/// world `/proc` cannot be opened. Either way the gate's token never shows.
pub fn proc_self_environ(s: &mut Scene) -> Spec {
    Spec::check(acl_file("/proc/self/environ"), REFUSED)
        .canary_env("SECRET_TOKEN", &s.token)
        .arg("--check-env")
        .arg("ZZ_HOSTILE_OWN=given-by-check-env")
        .leaks(vec![Leak::Marker])
}

/// The gate's environment by its pid (serve: the pid is known once it runs).
pub fn proc_gate_environ(_: &mut Scene) -> Spec {
    Spec::serve(acl_file("/proc/{GATE_PID}/environ"), REFUSED).leaks(vec![Leak::Marker])
}

/// /etc/passwd by a path the caller names: the world's stand-in (names and
/// ids: `root:x:0:0:::`) shows, never the host's line with its home and shell.
fn passwd_by(path: &str) -> Spec {
    let mut spec = Spec::check(acl_file(path), REFUSED);
    if let Some(stand_in) = passwd_first_stand_in() {
        spec = spec.must_say(format!("'{stand_in}'"));
    }
    spec.leaks(passwd_first_line().map(|l| Leak::Text(l.to_owned())).into_iter().collect())
}

/// `/proc/self/root` leads to the check's own root (the root world's
/// stand-in `passwd`) or nowhere (the config-directory world): never the
/// host's root.
pub fn proc_self_root_passwd(_: &mut Scene) -> Spec {
    Spec::check(acl_file("/proc/self/root/etc/passwd"), REFUSED)
        .leaks(passwd_first_line().map(|l| Leak::Text(l.to_owned())).into_iter().collect())
}

pub fn proc_self_root_secret(s: &mut Scene) -> Spec {
    Spec::check(acl_file(&format!("/proc/self/root{}", s.secret())), REFUSED)
        .leaks(vec![Leak::Marker])
}

/// Enough `../` to reach `/` from any check directory, then the secret.
pub fn dotdot_in_config(s: &mut Scene) -> Spec {
    let path = format!("{}{}", "../".repeat(24).trim_end_matches('/'), s.secret());
    Spec::check(acl_file(&path), REFUSED).leaks(vec![Leak::Marker])
}

/// A render file whose path climbs out of the check directory.
pub fn dotdot_in_render_path(s: &mut Scene) -> Spec {
    let name = format!("{}-escaped", s.tag);
    let escaped = [
        s.root.join(&name),
        s.tmp.join(&name),
        s.outside.join(&name),
        s.host_path(std::env::temp_dir().join(&name)),
        s.host_path(std::path::Path::new("/").join(&name)),
    ];
    let mut spec = Spec::serve(config("", "", ""), COULD_NOT_RUN)
        .files(vec![RFile {
            kind: "general",
            path: format!("../../{name}"),
            content: "escaped\n".into(),
        }])
        .must_say(&name);
    for p in escaped {
        spec = spec.watch(p);
    }
    spec
}

/// A render file that would replace the config: the check must judge the
/// render's own config, or not run at all.
pub fn render_file_over_the_config(_: &mut Scene) -> Spec {
    let broken = config("", "  http-request bogus-action\n", "");
    Spec::serve(broken, &[Kind::Refused, Kind::CouldNotRun])
        .files(vec![file("./haproxy.cfg", config("", "", ""))])
}

/// A NUL byte in a render path: refused before anything is written.
pub fn nul_in_render_path(s: &mut Scene) -> Spec {
    let name = format!("{}-nul", s.tag);
    Spec::serve(config("", "", ""), COULD_NOT_RUN)
        .files(vec![file(&format!("maps/{name}\u{0}/../../../x.map"), "a b\n")])
        .watch(s.root.join("x.map"))
}

pub fn double_slash_etc(_: &mut Scene) -> Spec {
    passwd_by("//etc/passwd")
}

pub fn double_slash_secret(s: &mut Scene) -> Spec {
    Spec::check(acl_file(&format!("/{}", s.secret())), REFUSED).leaks(vec![Leak::Marker])
}

/// `check DIR` refuses a symlink inside DIR before anything runs.
pub fn symlink_in_directory(s: &mut Scene) -> Spec {
    let mut spec = Spec::check(
        config("", "  acl bad src -f maps/evil.map\n  http-request deny if bad\n", ""),
        NO_VERDICT,
    )
    .must_say("symlink")
    .must_say("evil.map");
    spec.symlinks.push(("maps/evil.map".into(), s.secret_path.clone()));
    spec
}

// -- devices and FIFOs: nothing may block -----------------------------------

/// /dev/zero is part of the world, as on a pod: HAProxy takes its size
/// (0) and passes, as bare `haproxy -c` does; it must not block.
pub fn dev_zero_errorfile(_: &mut Scene) -> Spec {
    Spec::check(config("", "  errorfile 503 /dev/zero\n", ""), PASS)
}

/// An endless file as a pattern list: unsandboxed, HAProxy reads until the deadline.
pub fn dev_zero_acl(_: &mut Scene) -> Spec {
    Spec::check(acl_file("/dev/zero"), NOT_PASS).leaks(vec![Leak::Blocks])
}

pub fn dev_stdin_errorfile(_: &mut Scene) -> Spec {
    Spec::check(config("", "  errorfile 503 /dev/stdin\n", ""), NOT_PASS).leaks(vec![Leak::Passes])
}

/// In serve, the gate's own stdin is the controller's stream.
pub fn dev_stdin_serve(_: &mut Scene) -> Spec {
    Spec::serve(acl_file("/dev/stdin"), NOT_PASS).leaks(vec![Leak::Passes])
}

pub fn fifo_errorfile(s: &mut Scene) -> Spec {
    let fifo = s.plant_fifo("fifo");
    Spec::check(config("", &format!("  errorfile 503 {}\n", fifo.display()), ""), NOT_PASS)
        .leaks(vec![Leak::Blocks])
}

// -- the gate's environment -------------------------------------------------

// The gate clears HAProxy's environment sandbox or not: the canary proves
// each fixture would show a variable there by handing it in `--check-env`.

pub fn env_in_notice(s: &mut Scene) -> Spec {
    let global = "  .notice \"token is ${SECRET_TOKEN}\"\n  .alert \"stop here\"\n";
    Spec::check(config(global, "", ""), REFUSED)
        .canary_env("SECRET_TOKEN", &s.token)
        .leaks(vec![Leak::Marker])
}

pub fn env_in_bind(s: &mut Scene) -> Spec {
    Spec::check(config("", "  bind \"${SECRET_TOKEN}\"\n", ""), REFUSED)
        .canary_env("SECRET_TOKEN", &s.token)
        .leaks(vec![Leak::Marker])
}

/// `.if defined(VAR)` sees the environment too; sandboxed it sees nothing.
pub fn env_if_defined(s: &mut Scene) -> Spec {
    let global = ".if defined(SECRET_TOKEN)\n  .alert \"env-visible-to-the-check\"\n.endif\n";
    Spec::check(config(global, "", ""), PASS)
        .forbid("env-visible-to-the-check")
        .canary_env("SECRET_TOKEN", &s.token)
        .leaks(vec![Leak::Text("env-visible-to-the-check".into())])
}

// -- DNS ----------------------------------------------------------------------

/// A server named by host name with a `resolvers` section whose nameserver
/// is a UDP socket of this test: not one datagram may reach it. (`-dr` makes
/// the unresolvable name a warning, so the render passes.)
pub fn dns_with_dr(s: &mut Scene) -> Spec {
    let listener = UdpSocket::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let tail = format!(
        "resolvers dns\n  nameserver ns1 127.0.0.1:{port}\n  resolve_retries 1\n  timeout resolve 1s\n  timeout retry 1s\n\
backend app\n  server s1 {}.hostile.invalid:80 resolvers dns init-addr last,libc,none\n",
        s.tag
    );
    Spec::check(config("", "  default_backend app\n", &tail), PASS).extra(move |_| {
        let mut buf = [0u8; 1500];
        let mut got = 0;
        while listener.recv_from(&mut buf).is_ok() {
            got += 1;
        }
        if got > 0 {
            vec![format!("{got} datagram(s) reached the test's name server")]
        } else {
            vec![]
        }
    })
}

// -- output floods --------------------------------------------------------

/// Hundreds of long alerts: HAProxy's output is capped, and so must the
/// message be that is built from it.
pub fn alert_flood(_: &mut Scene) -> Spec {
    let long = "a".repeat(2000);
    let mut frontend = String::new();
    for i in 0..300 {
        frontend.push_str(&format!("  use_backend nosuch_{long}_{i} if {{ path /{i} }}\n"));
    }
    Spec::check(config("", &frontend, ""), REFUSED)
        .must_say("cut|cap|truncat")
        .must_say("65536|64 kib|64kib")
}

// -- what a grant brings along ----------------------------------------------

/// A render that uses the system CA store (`ca-file @system-ca`, a valid
/// setting) must still not reach the host's private keys: the CA store is
/// certificates, and /etc/ssl/private sits next to them. The test picks a
/// file there it can see (as root) and has HAProxy read it as a pattern
/// file: its first line (`-----BEGIN … PRIVATE KEY-----`) must not show.
pub fn system_ca_keeps_private_keys(_: &mut Scene) -> Spec {
    let Some(key) = readable_private_key() else {
        return Spec::nothing_here(NO_PRIVATE_KEY);
    };
    let frontend = format!(
        "  acl bad src -f {}\n  http-request deny if bad\n  default_backend tls\n",
        key.display()
    );
    let tail = "backend tls\n  server s1 127.0.0.1:8443 ssl verify required ca-file @system-ca sni str(hostile.test)\n";
    Spec::check(config("", &frontend, tail), REFUSED)
        .forbid("PRIVATE KEY")
        .leaks(vec![Leak::Text("PRIVATE KEY".into())])
}
