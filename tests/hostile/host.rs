//! What HAProxy sees of the host (docs/checking.md, "The check's world"):
//! the host's own name (or `--check-hostname`), stand-ins for the resolver
//! and hosts files, names and ids only of the accounts (the host's, or
//! `--accounts DIR`), Lua's own default paths (nothing of the gate's
//! environment), the render at the config directory, a scratch `/tmp`. Each
//! case makes HAProxy print what it can and fails when more of the host
//! shows than the world holds.

use crate::cases::config;
use crate::lua::lua_render;
use crate::support::*;

/// `text` as it shows in the gate's JSON output (quotes and tabs escaped).
pub fn in_json(text: &str) -> String {
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

/// The host's name, as the gate reads it.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_owned()
}

/// The config prints `HAPROXY_LOCALPEER` (HAProxy sets it from the host
/// name when no `-L` is given).
const PEER: &str = "  .warning \"peer=[${HAPROXY_LOCALPEER}]\"\n";

/// Without `--check-hostname`, HAProxy's local peer name is the host's own
/// name, as bare `haproxy -c` on this host says (no fixed name, no `-L`).
pub fn host_name_as_local_peer(_: &mut Scene) -> Spec {
    Spec::check(config(PEER, "", ""), PASS).must_say(format!("peer=[{}]", host_name()))
}

/// `--check-hostname NAME`: the check's UTS namespace has NAME, so the
/// local peer name is NAME, never the host's.
pub fn check_hostname_names_the_peer(s: &mut Scene) -> Spec {
    let name = format!("pod-{}", &s.tag[7..19]);
    Spec::check(config(PEER, "", ""), PASS)
        .arg("--check-hostname")
        .arg(&name)
        .must_say(format!("peer=[{name}]"))
        .forbid(format!("peer=[{}]", host_name()))
}

/// `parse-resolv-conf` lets HAProxy read /etc/resolv.conf, and an ACL file
/// quotes its first line: the stand-in's, never the host's. /etc/hosts the
/// same way.
pub fn resolv_conf_and_hosts_are_stand_ins(_: &mut Scene) -> Spec {
    let frontend = "  acl resolv src -f /etc/resolv.conf\n  acl hosts src -f /etc/hosts\n  \
                    http-request deny if resolv || hosts\n  default_backend app\n";
    let tail = "resolvers dns\n  parse-resolv-conf\nbackend app\n  server s1 127.0.0.1:8080 resolvers dns init-addr none\n";
    // the world's stand-ins (world.rs), whose lines may show
    let host = host_name();
    let stand_in = [
        "nameserver 127.0.0.1".to_owned(),
        "127.0.0.1\tlocalhost".to_owned(),
        "::1\tlocalhost ip6-localhost ip6-loopback".to_owned(),
        format!("127.0.1.1\t{host}"),
    ];
    let mut spec = Spec::check(config("", frontend, tail), REFUSED)
        .must_say("'nameserver 127.0.0.1'")
        .must_say("'127.0.0.1\tlocalhost'");
    let mut leaks = vec![];
    for lines in [host_lines("/etc/resolv.conf"), host_lines("/etc/hosts")] {
        let own = |l: &String| !stand_in.contains(l);
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

/// /etc/os-release (a link to /usr/lib/os-release on most systems) and
/// /usr/lib/os-release, quoted by ACL files: the world shows each only if
/// it lies in a directory it exposes (a library directory shown whole).
/// Either way nothing secret: each path is absent or the host's public file
/// as it is (its first line quoted), never anything else. What is visible
/// is printed (`--nocapture`).
pub fn os_release_is_public_or_absent(_: &mut Scene) -> Spec {
    let paths = ["/etc/os-release", "/usr/lib/os-release"];
    let frontend = "  acl etc src -f /etc/os-release\n  acl lib src -f /usr/lib/os-release\n  \
                    http-request deny if etc || lib\n";
    let firsts: Vec<Option<String>> =
        paths.iter().map(|p| host_lines(p).first().cloned()).collect();
    Spec::check(config("", frontend, ""), REFUSED).extra(move |o| {
        let text = o.all();
        let mut fails = vec![];
        for (path, first) in paths.iter().zip(&firsts) {
            let absent = text.contains(&format!("failed to open pattern file <{path}>"));
            let quoted = first.as_ref().is_some_and(|l| {
                text.contains(&in_json(&format!("'{l}' is not a valid")))
                    && text.contains(&format!("of file '{path}'"))
            });
            eprintln!(
                "note: os_release_is_public_or_absent: {path} is {} in the check's world",
                if absent {
                    "absent"
                } else if quoted {
                    "VISIBLE (the host's file)"
                } else {
                    "?"
                }
            );
            if !absent && !quoted {
                fails.push(format!("{path} is neither absent nor the host's own file"));
            }
        }
        fails
    })
}

/// The host's /etc/passwd and /etc/group read whole by a script: only
/// names and ids show (`root:x:0:0:::`), never a home, a shell, a gecos
/// field or a group's members.
pub fn passwd_is_names_and_ids(_: &mut Scene) -> Spec {
    let script = "local out = {}\n\
for _, path in ipairs({ \"/etc/passwd\", \"/etc/group\" }) do\n\
  local f, err = io.open(path)\n\
  out[#out + 1] = path .. \"=\" .. (f and f:read(\"a\"):gsub(\"\\n\", \" | \") or tostring(err))\n\
end\n\
error(\"accounts: \" .. table.concat(out, \" ## \"))\n";
    let mut spec = lua_render("lua-load", script.into());
    if spec.skip.is_some() {
        return spec;
    }
    let mut leaks = vec![];
    if let Some(stand_in) = passwd_first_stand_in() {
        spec = spec.must_say(format!("/etc/passwd={stand_in} | "));
    }
    if let Some(first) = passwd_first_line() {
        leaks.push(Leak::Text(first.to_owned()));
    }
    for line in host_lines("/etc/passwd") {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() >= 7 && f[4..].iter().any(|x| !x.is_empty()) {
            // what follows the ids: `:gecos:home:shell`
            spec = spec.forbid(format!(":{}:{}:{}:{}", f[3], f[4], f[5], f[6]));
        }
    }
    for line in host_lines("/etc/group") {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() >= 4 && !f[3].is_empty() {
            spec = spec.forbid(format!("{}:{}:{}:{}", f[0], f[1], f[2], f[3]));
        }
    }
    spec.leaks(leaks)
}

/// Whether this haproxy is 2.x (no `expose-deprecated-directives`).
fn haproxy_2() -> bool {
    let out = std::process::Command::new(haproxy()).arg("-v").output().expect("run haproxy -v");
    String::from_utf8_lossy(&out.stdout).contains("version 2.")
}

/// `user`/`group` in `global` and in a `program` section naming `user`/`group`.
fn accounts_config(user: &str, group: &str, frontend: &str) -> String {
    let expose = if haproxy_2() { "" } else { "  expose-deprecated-directives\n" };
    let global = format!("  master-worker\n{expose}  user {user}\n  group {group}\n");
    // after `global`: 3.x wants `expose-deprecated-directives` before any program
    let programs = format!(
        "program known\n  command /bin/true\n  user root\n  group root\n\
program named\n  command /bin/true\n  user {user}\n  group {group}\n"
    );
    config(&global, frontend, &programs)
}

/// Names the host does not know are refused, as bare `haproxy -c` on this
/// host refuses them (the gate maps nothing to a stand-in account).
pub fn unknown_accounts_are_refused_as_bare_refuses(s: &mut Scene) -> Spec {
    let (user, group) = (format!("u{}", &s.tag[..20]), format!("g{}", &s.tag[..20]));
    Spec::check(accounts_config(&user, &group, ""), REFUSED)
        .must_say(format!("cannot find user id for '{user}'"))
        .must_say(format!("cannot find group id for '{group}'"))
}

/// `--accounts DIR` gives the pods' names: they resolve, and HAProxy sees
/// their names and ids only (the file's home and shell stay out).
pub fn accounts_dir_names_resolve(s: &mut Scene) -> Spec {
    let (user, group) = (format!("u{}", &s.tag[..20]), format!("g{}", &s.tag[..20]));
    let home = format!("/home/HOMEMARK-{}", s.tag);
    let dir = s.plant_dir("accounts");
    std::fs::write(
        dir.join("passwd"),
        format!("{user}:x:4242:4243:Pod User:{home}:/bin/sh\nroot:x:0:0:root:/root:/bin/bash\n"),
    )
    .unwrap();
    std::fs::write(dir.join("group"), format!("{group}:x:4243:{user}\nroot:x:0:\n")).unwrap();
    let frontend = "  acl a src -f /etc/passwd\n  http-request deny if a\n";
    Spec::check(accounts_config(&user, &group, frontend), REFUSED)
        .arg("--accounts")
        .arg(dir.to_str().unwrap())
        .must_say(format!("'{user}:x:4242:4243:::'"))
        .forbid("cannot find")
        .forbid("HOMEMARK")
}

/// Lua's module paths, printed and tried by a failing `require`: Lua's own
/// defaults (`./?.lua` among them), as bare HAProxy has them where no
/// `LUA_PATH` is set; the gate's own `LUA_PATH`/`LUA_CPATH` never reach it.
pub fn lua_paths_are_luas_defaults(s: &mut Scene) -> Spec {
    let script = format!(
        "local ok, err = pcall(require, \"missing_{}\")\n\
error(\"lua-paths: \" .. package.path .. \" | \" .. package.cpath .. \" | \" .. tostring(err))\n",
        s.tag
    );
    let mark = format!("LUAPATHMARK-{}", s.tag);
    lua_render("lua-load", script)
        .gate_env("LUA_PATH", format!("/{mark}/?.lua;;"))
        .gate_env("LUA_CPATH", format!("/{mark}/?.so;;"))
        .gate_env("LUA_PATH_5_3", format!("/{mark}/?.lua;;"))
        .gate_env("LUA_PATH_5_4", format!("/{mark}/?.lua;;"))
        .must_say("./?.lua")
        .forbid(mark.clone())
        .canary_env("LUA_PATH", &format!("/{mark}/?.lua;;"))
        .leaks(vec![Leak::Text(mark)])
}

/// `/etc/haproxy/haproxy.cfg` in the world is the render's own config (the
/// config directory's default), never the host's file there: a script
/// reads it and says how long it is.
pub fn config_dir_holds_the_render(_: &mut Scene) -> Spec {
    let script = "local f, err = io.open(\"/etc/haproxy/haproxy.cfg\")\n\
error(\"cfg-bytes=\" .. (f and #f:read(\"a\") or tostring(err)) .. \"=\")\n";
    let mut spec = lua_render("lua-load", script.into());
    if spec.skip.is_some() {
        return spec;
    }
    let own = spec.config.len();
    spec = spec.must_say(format!("cfg-bytes={own}="));
    match std::fs::metadata("/etc/haproxy/haproxy.cfg") {
        Ok(m) if m.len() as usize != own => {
            let host = format!("cfg-bytes={}=", m.len());
            spec.forbid(host.clone()).leaks(vec![Leak::Text(host)])
        }
        _ => spec,
    }
}

/// The world's `/tmp` is scratch: a file planted in the host's /tmp does
/// not exist there, and what a script writes there is gone afterwards.
pub fn tmp_is_scratch(s: &mut Scene) -> Spec {
    let planted = s.host_path(std::env::temp_dir().join(format!("{}-planted", s.tag)));
    let mark = format!("TMPMARK-{}", s.tag);
    std::fs::write(&planted, format!("{mark}\n")).unwrap();
    let written = format!("/tmp/{}-written", s.tag);
    let script = format!(
        "local f, err = io.open([[{}]])\n\
local got = f and f:read(\"l\") or tostring(err)\n\
local w = assert(io.open([[{written}]], \"w\"))\n\
w:write(\"scratch\\n\") w:close()\n\
error(\"tmp: \" .. got)\n",
        planted.display()
    );
    let watch = s.host_path(written.into());
    lua_render("lua-load", script)
        .must_say("tmp: ")
        .must_say("No such file or directory")
        .forbid(mark.clone())
        .watch(watch.clone())
        .leaks(vec![Leak::Text(mark), Leak::Created(watch)])
}
