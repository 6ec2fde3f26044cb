//! Nothing of the host reaches haproxy (docs/checking.md, "What HAProxy sees
//! of the host"): each case makes HAProxy print what it can of the host's
//! name, resolver and hosts files, OS release, accounts and Lua paths, and
//! fails when the host's own value shows.

use crate::cases::config;
use crate::lua::lua_render;
use crate::support::*;

/// The name a check sees instead of the host's.
const FIXED_NAME: &str = "rendergate-check";

/// `text` as it shows in the gate's JSON output (quotes and tabs escaped).
fn in_json(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap();
    quoted[1..quoted.len() - 1].to_owned()
}

/// The non-empty lines of a host file, trimmed (none when it is missing).
fn host_lines(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `HAPROXY_LOCALPEER` (HAProxy sets it from the host name) printed by the
/// config itself: it is the fixed name, never the host's (unsandboxed too:
/// `-L` names it on every check, so this fixture does not leak there).
pub fn host_name_as_local_peer(_: &mut Scene) -> Spec {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_owned();
    let global = "  .warning \"peer=[${HAPROXY_LOCALPEER}]\"\n";
    let mut spec =
        Spec::check(config(global, "", ""), PASS).must_say(format!("peer=[{FIXED_NAME}]"));
    if host != FIXED_NAME {
        spec = spec.forbid(format!("peer=[{host}]"));
    }
    spec
}

/// `parse-resolv-conf` lets HAProxy read /etc/resolv.conf, and an ACL file
/// quotes its first line: the stand-in's, never the host's. /etc/hosts the
/// same way.
pub fn resolv_conf_and_hosts_are_stand_ins(_: &mut Scene) -> Spec {
    let resolv = host_lines("/etc/resolv.conf");
    if resolv.is_empty() {
        return Spec::nothing_here("no /etc/resolv.conf with a line on this host: nothing to hide");
    }
    let frontend = "  acl resolv src -f /etc/resolv.conf\n  acl hosts src -f /etc/hosts\n  \
                    http-request deny if resolv || hosts\n  default_backend app\n";
    let tail = "resolvers dns\n  parse-resolv-conf\nbackend app\n  server s1 127.0.0.1:8080 resolvers dns init-addr none\n";
    let stand_in = ["nameserver 127.0.0.1", "127.0.0.1 localhost", "::1 localhost"];
    let mut spec =
        Spec::check(config("", frontend, tail), REFUSED).must_say("nameserver 127.0.0.1");
    let mut leaks = vec![];
    for lines in [resolv, host_lines("/etc/hosts")] {
        let own = |l: &String| !stand_in.contains(&l.as_str());
        // HAProxy quotes the file's first line: that one leaks unsandboxed,
        // unless the stand-in has it too
        leaks.extend(
            lines.first().filter(|l| own(l)).map(|l| Leak::Text(in_json(&format!("'{l}'")))),
        );
        for line in lines.into_iter().filter(own) {
            spec = spec.forbid(in_json(&format!("'{line}'")));
        }
    }
    spec.leaks(leaks)
}

/// /etc/os-release (a link into /usr/lib on most systems) quoted by an ACL
/// file: it reads empty, so the render passes.
pub fn os_release_is_empty(_: &mut Scene) -> Spec {
    let release = host_lines("/etc/os-release");
    let Some(first) = release.first().cloned() else {
        return Spec::nothing_here("no /etc/os-release on this host: nothing to hide");
    };
    let frontend = "  acl etc src -f /etc/os-release\n  acl lib src -f /usr/lib/os-release\n  \
                    http-request deny if etc || lib\n";
    let mut spec = Spec::check(config("", frontend, ""), PASS);
    for line in release.iter().filter(|l| l.starts_with("ID=") || l.starts_with("PRETTY_NAME=")) {
        spec = spec.forbid(in_json(line));
    }
    spec.forbid(in_json(&first)).leaks(vec![Leak::Text(in_json(&first))])
}

/// Whether this haproxy is 2.x (no `expose-deprecated-directives`).
fn haproxy_2() -> bool {
    let out = std::process::Command::new(haproxy()).arg("-v").output().expect("run haproxy -v");
    String::from_utf8_lossy(&out.stdout).contains("version 2.")
}

/// Names no host has and names every host has get the same answer, in
/// `global` and in a `program` section: the render passes, as it would
/// where the names exist.
pub fn accounts_are_not_the_hosts(s: &mut Scene) -> Spec {
    let (user, group) = (format!("u{}", &s.tag[..20]), format!("g{}", &s.tag[..20]));
    let expose = if haproxy_2() { "" } else { "  expose-deprecated-directives\n" };
    let global = format!("  master-worker\n{expose}  user {user}\n  group {group}\n");
    // after `global`: 3.x wants `expose-deprecated-directives` before any program
    let programs = format!(
        "program known\n  command /bin/true\n  user root\n  group root\n\
program unknown\n  command /bin/true\n  user {user}\n  group {group}\n"
    );
    Spec::check(config(&global, "", &programs), PASS)
        .forbid("cannot find user")
        .forbid("cannot find group")
}

/// Lua's module paths, printed and tried by a failing `require`: the check
/// directory's, never a host directory (every default one has `/lua/5.`).
pub fn lua_paths_are_the_check_directorys(s: &mut Scene) -> Spec {
    let script = format!(
        "local ok, err = pcall(require, \"missing_{}\")\n\
error(\"lua-paths: \" .. package.path .. \" | \" .. package.cpath .. \" | \" .. tostring(err))\n",
        s.tag
    );
    lua_render("lua-load", script)
        .must_say("./?.lua")
        .forbid("/lua/5.")
        .leaks(vec![Leak::Text("/lua/5.".into())])
}
