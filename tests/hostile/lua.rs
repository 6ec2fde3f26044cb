//! Lua cases: `lua-load` runs a script's top-level code during `haproxy -c`.
//! Every script ends in `error(…)` with what it found, so HAProxy prints it
//! in an `[ALERT]` and the verdict's message shows it.

use crate::cases::config;
use crate::support::*;

/// A render whose global section loads `hostile.lua` with `directive`.
pub fn lua_render(directive: &str, script: String) -> Spec {
    if !has_lua() {
        return no_lua();
    }
    Spec::check(config(&format!("  {directive} hostile.lua\n"), "", ""), REFUSED)
        .files(vec![file("hostile.lua", script)])
}

/// Lua that reads the secret's first line and the token, and raises them.
fn read_and_getenv(secret: &str) -> String {
    format!(
        "local f, err = io.open([[{secret}]])\n\
local got = f and f:read(\"l\") or tostring(err)\n\
return \"read: \" .. got .. \" getenv: \" .. tostring(os.getenv(\"SECRET_TOKEN\"))\n"
    )
}

/// An ordinary script (actions, services, string work) loads and passes.
pub fn lua_valid_script(_: &mut Scene) -> Spec {
    if !has_lua() {
        return no_lua();
    }
    let script = "core.register_action(\"hello\", { \"http-req\" }, function(txn)\n\
  txn:set_var(\"txn.greeting\", string.format(\"hello %d\", 42))\n\
end)\n\
core.register_service(\"ok\", \"http\", function(applet)\n\
  applet:set_status(200)\n\
  applet:start_response()\n\
  applet:send(\"ok\\n\")\n\
end)\n";
    let frontend = "  http-request lua.hello\n  http-request use-service lua.ok if { path /ok }\n";
    Spec::check(crate::cases::config("  lua-load hello.lua\n", frontend, ""), PASS)
        .files(vec![file("hello.lua", script)])
}

pub fn lua_write_outside(s: &mut Scene) -> Spec {
    let near = s.outside.join(format!("written-{}", s.tag));
    let tmp = s.host_path(std::env::temp_dir().join(format!("{}-written", s.tag)));
    let script = format!(
        "local report = {{}}\n\
for _, path in ipairs({{ [[{}]], [[{}]] }}) do\n\
  local f, err = io.open(path, \"w\")\n\
  if f then f:write(\"written by a render\\n\") f:close() report[#report + 1] = \"wrote\"\n\
  else report[#report + 1] = tostring(err) end\n\
end\n\
error(\"lua-write: \" .. table.concat(report, \"; \"))\n",
        near.display(),
        tmp.display()
    );
    lua_render("lua-load", script)
        .watch(near.clone())
        .watch(tmp.clone())
        .leaks(vec![Leak::Created(near), Leak::Created(tmp)])
}

pub fn lua_read_outside(s: &mut Scene) -> Spec {
    let script = format!(
        "local f, err = io.open([[{}]])\nerror(\"lua-read: \" .. (f and f:read(\"l\") or tostring(err)))\n",
        s.secret()
    );
    lua_render("lua-load", script).leaks(vec![Leak::Marker])
}

pub fn lua_getenv(s: &mut Scene) -> Spec {
    lua_render(
        "lua-load",
        "error(\"lua-getenv: \" .. tostring(os.getenv(\"SECRET_TOKEN\")))\n".into(),
    )
    .canary_env("SECRET_TOKEN", &s.token)
    .leaks(vec![Leak::Marker])
}

/// `CMD-RAN-$((6*7))` prints `CMD-RAN-42`, a text found nowhere in the render.
pub fn lua_os_execute(s: &mut Scene) -> Spec {
    let made = s.outside.join(format!("exec-{}", s.tag));
    let script = format!(
        "local ok, how, code = os.execute([[/bin/echo CMD-RAN-$((6*7)) $(/bin/cat {}); /bin/echo x > {}]])\n\
error(\"lua-os-execute: \" .. tostring(ok) .. \" \" .. tostring(how) .. \" \" .. tostring(code))\n",
        s.secret(),
        made.display()
    );
    lua_render("lua-load", script).forbid("CMD-RAN-42").watch(made.clone()).leaks(vec![
        Leak::Marker,
        Leak::Text("CMD-RAN-42".into()),
        Leak::Created(made),
    ])
}

pub fn lua_io_popen(s: &mut Scene) -> Spec {
    let script = format!(
        "local p, err = io.popen([[/bin/cat {}; /bin/echo CMD-RAN-$((6*7))]])\n\
local out = p and p:read(\"a\") or tostring(err)\n\
if p then p:close() end\n\
error(\"lua-popen: \" .. (out:gsub(\"\\n\", \" | \")))\n",
        s.secret()
    );
    lua_render("lua-load", script)
        .forbid("CMD-RAN-42")
        .leaks(vec![Leak::Marker, Leak::Text("CMD-RAN-42".into())])
}

/// A background loop in HAProxy's group, and one in a session of its own
/// (which a process-group kill does not reach). Their command lines carry
/// the scene's tag, which is how the suite finds them.
pub fn lua_background(s: &mut Scene) -> Spec {
    let mut script = format!(
        "os.execute([[/bin/sh -c 'while :; do /bin/sleep 1; done; : {}-bg' </dev/null >/dev/null 2>&1 &]])\n",
        s.tag
    );
    if std::path::Path::new("/usr/bin/setsid").exists() {
        script.push_str(&format!(
            "os.execute([[/usr/bin/setsid /bin/sh -c 'while :; do /bin/sleep 1; done; : {}-setsid' </dev/null >/dev/null 2>&1 &]])\n",
            s.tag
        ));
    }
    script.push_str("os.execute(\"/bin/sleep 0.3\")\nerror(\"lua-background: started\")\n");
    lua_render("lua-load", script).leaks(vec![Leak::Process])
}

pub fn lua_load_per_thread(s: &mut Scene) -> Spec {
    let script = format!(
        "local function probe()\n{}end\nerror(\"per-thread: \" .. probe())\n",
        read_and_getenv(s.secret())
    );
    lua_render("lua-load-per-thread", script).leaks(vec![Leak::Marker])
}

/// `require` of a module in the render itself, which then reaches out.
pub fn lua_require_in_directory(s: &mut Scene) -> Spec {
    lua_render("lua-load", "error(\"lua-require: \" .. require(\"helper\"))\n".into())
        .files(vec![file("helper.lua", read_and_getenv(s.secret()))])
        .leaks(vec![Leak::Marker])
}

/// `require` of a module planted on the host, via `package.path`.
pub fn lua_require_outside(s: &mut Scene) -> Spec {
    s.plant("evil.lua", "error(\"EVIL-RAN-\" .. 6 * 7)\n");
    let script = format!(
        "package.path = [[{}/?.lua]]\nrequire(\"evil\")\nerror(\"evil was not run\")\n",
        s.outside.display()
    );
    lua_render("lua-load", script)
        .forbid("EVIL-RAN-42")
        .leaks(vec![Leak::Text("EVIL-RAN-42".into())])
}

/// Every other process of the check's world is closed to HAProxy: the
/// init, a copy of the gate outside the world's root, showed the host's
/// whole mount table (the gate's own directories, the host's disks) in its
/// `/proc/1/mountinfo`, as root and unprivileged.
pub fn lua_sees_no_other_process_in_proc(_: &mut Scene) -> Spec {
    let script = "local f = io.open(\"/proc/self/stat\")\n\
local me = f and f:read(\"l\"):match(\"^(%d+)\") or \"?\"\n\
if f then f:close() end\n\
local seen = {}\n\
for pid = 1, 64 do\n\
  local m = io.open(\"/proc/\" .. pid .. \"/mountinfo\")\n\
  if m and tostring(pid) ~= me then seen[#seen + 1] = pid .. \":\" .. m:read(\"l\") end\n\
  if m then m:close() end\n\
end\n\
error(\"PROC-OTHERS [\" .. table.concat(seen, \" \") .. \"]\")\n";
    lua_render("lua-load", script.into()).must_say("PROC-OTHERS []")
}

/// A known limitation, pinned down: a script that ends `haproxy -c` itself,
/// with status 0 and HAProxy's own summary line, before HAProxy reaches the
/// broken line after it, forges a pass. The sandbox bounds what Lua can
/// touch, not what it can say; the README says so. If this ever stops
/// passing, the limitation is gone and the README should change.
pub fn lua_os_exit_forges_a_pass_known_limitation(_: &mut Scene) -> Spec {
    if !has_lua() {
        return no_lua();
    }
    let frontend = "  http-request bogus-action\n";
    let config = crate::cases::config("  lua-load exit.lua\n", frontend, "");
    Spec::check(config, PASS).files(vec![file(
        "exit.lua",
        "io.stdout:write(\"Configuration file is valid\\n\")\nos.exit(0)\n",
    )])
}

pub fn lua_infinite_loop(_: &mut Scene) -> Spec {
    let mut spec = lua_render("lua-load", "while true do end\n".into());
    spec.expect = COULD_NOT_RUN;
    spec.must_say("timed out|timeout|deadline")
}

/// Allocates 4 GiB in 64 MiB strings, then says it survived. The sandbox's
/// memory bound, set below that (1 GiB touched, one run at the top, where
/// the address space is not bounded: the default, 16 GiB, lets a render
/// have 4 GiB), must stop it; the gate itself runs under a 12 GiB cap of
/// address space so that a missing bound fails the case instead of the
/// machine.
pub fn lua_memory_bomb(_: &mut Scene) -> Spec {
    let script = "local keep = {}\n\
local chunk = string.rep(\"x\", 64 * 1024 * 1024)\n\
for i = 1, 64 do keep[i] = chunk .. i end\n\
error(\"BOMB-SURVIVED-\" .. 6 * 7)\n";
    let mut spec = lua_render("lua-load", script.into()).forbid("BOMB-SURVIVED-42");
    spec.expect = NOT_PASS;
    spec.rlimit_as = Some(12 << 30);
    spec.args = ["--check-memory", "1GiB", "--check-memory-max", "1GiB"].map(String::from).to_vec();
    spec
}

/// 18 MB on stdout, then an error: every line is read (the error after the
/// flood still refuses), and the message stays bounded.
pub fn lua_output_flood(_: &mut Scene) -> Spec {
    let script = "local line = string.rep(\"flood \", 30) .. \"\\n\"\n\
for i = 1, 100000 do io.stdout:write(line) end\n\
io.stdout:flush()\n\
error(\"lua-flood: done\")\n";
    let mut spec = lua_render("lua-load", script.into()).must_say("lua-flood: done");
    spec.expect = &[Kind::Refused];
    spec
}

/// While HAProxy runs (a script busy for 1 to 2 s of wall time), the check
/// directory and the render's files in it are private to the gate's user:
/// no group or other bits on anything in a check directory (the one holding
/// the render's `maps/hosts.map`, where the render is bound from there),
/// stock files included. Everything under the gate's TMPDIR (the world's
/// root mount point, 0755; its directories and stand-ins, and in the root
/// world the render itself, live in tmpfs mounts of the child's own) must
/// sit below an owner-only directory, so no other user reaches it.
pub fn check_directory_is_private(_: &mut Scene) -> Spec {
    // it passes: a refusal would run twice (docs/checking.md, "Verdicts")
    let script = "local stop = os.time() + 2\nwhile os.time() < stop do end\n";
    let mut spec = lua_render("lua-load", script.into());
    spec.expect = PASS;
    spec.files(vec![file("maps/hosts.map", "example.com app\n")]).observe(
        |tmp: &std::path::Path, done: &std::sync::atomic::AtomicBool| {
            use std::os::unix::fs::PermissionsExt;
            // path -> (mode, is a symlink)
            let mut seen = std::collections::BTreeMap::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let mut stack = vec![tmp.to_path_buf()];
                while let Some(dir) = stack.pop() {
                    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                        let Ok(meta) = std::fs::symlink_metadata(e.path()) else { continue };
                        if meta.is_dir() {
                            stack.push(e.path());
                        }
                        let mode = meta.permissions().mode() & 0o7777;
                        seen.insert(e.path(), (mode, meta.file_type().is_symlink()));
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let check_dirs: Vec<std::path::PathBuf> = seen
                .keys()
                .filter(|p| p.ends_with("maps/hosts.map"))
                .filter_map(|p| p.parent()?.parent().map(std::path::Path::to_path_buf))
                .collect();
            let owner_only = |p: &std::path::Path| {
                seen.get(p).is_some_and(|(mode, link)| !link && mode & 0o077 == 0)
            };
            let mut fails = vec![];
            for (p, (mode, link)) in &seen {
                if *link || mode & 0o077 == 0 {
                    continue;
                }
                let in_check_dir = check_dirs.iter().any(|d| p.starts_with(d));
                let shielded = p.ancestors().skip(1).take_while(|a| *a != tmp).any(owner_only);
                if in_check_dir || !shielded {
                    fails.push(format!("{} has mode {mode:o} while the check runs", p.display()));
                }
            }
            // In the root world the render lies in a tmpfs of the check's
            // own and never under TMPDIR; where it is bound from there, its
            // directory was checked above.
            fails
        },
    )
}

/// `@system-ca` anywhere in the render (here: a Lua comment) asks for the
/// system CA store; with it, a script must still not read the private keys
/// that sit next to the certificates. The script reports how many bytes it
/// read, never the key itself.
pub fn lua_system_ca_mark_keeps_private_keys(_: &mut Scene) -> Spec {
    let Some(key) = readable_private_key() else {
        return Spec::nothing_here(NO_PRIVATE_KEY);
    };
    let script = format!(
        "-- trusts @system-ca\n\
local f, err = io.open([[{}]])\n\
if f then error(\"SSL-PRIVATE-READ \" .. #f:read(\"a\") .. \" bytes\") end\n\
error(\"lua-ssl-private: \" .. tostring(err))\n",
        key.display()
    );
    lua_render("lua-load", script)
        .forbid("SSL-PRIVATE-READ")
        .leaks(vec![Leak::Text("SSL-PRIVATE-READ".into())])
}
