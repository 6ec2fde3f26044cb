//! A render whose own code takes its files out of the gate's reach: a
//! native module it carries (base64 in its `rendered` line, loaded by its
//! Lua) writes a key into one of the render's directories, then `chmod
//! 000`s that directory and the one the render lies in. With the gate unprivileged, as in a pod
//! (no capability lets it ignore modes), nothing of the render may outlive
//! its check, and the next render is judged, in both worlds: the root of
//! the check's own, and the config-directory world (docs/checking.md,
//! "After the verdict").

use crate::needs;
use crate::support::{haproxy, has_lua, which};
use base64::Engine as _;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The ids the gate runs as: a pod's `runAsUser`, no capabilities.
const UID: u32 = 10001;

const MODULE: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>
typedef struct lua_State lua_State;
extern const char *lua_pushstring(lua_State *L, const char *s);
static char said[64];
int luaopen_chmodder(lua_State *L) {
    /* a directory of its own where it may make one (Landlock refuses
       directories in the strict sandbox): the render's own general/ is one */
    mkdir("deep", 0700);
    int fd = open("general/key.pem", O_WRONLY | O_CREAT, 0600);
    if (fd >= 0) { write(fd, "PRIVATE KEY", 11); close(fd); }
    chmod("deep", 0);
    int sub = chmod("general", 0);
    int here = chmod(".", 0);
    if (sub == 0 && here == 0) snprintf(said, sizeof said, "chmodded");
    else snprintf(said, sizeof said, "refused:%d", errno);
    lua_pushstring(L, said);
    return 1;
}
"#;

/// Its Lua: the module's answer is in the refusal, so the test knows the
/// render's code ran and changed the modes.
const LUA: &str = r#"local f = package.loadlib("./general/chmodder.so", "luaopen_chmodder")
if not f then error("MODULE:not-loaded") end
error("MODULE:" .. f())
"#;

const HOSTILE: &str = "global\n  lua-load general/chmodder.lua\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:18080\n";
const VALID: &str = "global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:18080\n";

fn build_module(dir: &Path) -> Option<Vec<u8>> {
    let Some(cc) = which("cc") else {
        needs::missing("no cc", "the chmod render");
        return None;
    };
    std::fs::write(dir.join("chmodder.c"), MODULE).unwrap();
    let out = Command::new(cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("chmodder.so"))
        .arg(dir.join("chmodder.c"))
        .output()
        .unwrap();
    assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
    Some(std::fs::read(dir.join("chmodder.so")).unwrap())
}

/// A directory the unprivileged gate owns, as an emptyDir it was given.
fn owned_dir(path: PathBuf) -> PathBuf {
    std::fs::create_dir_all(&path).unwrap();
    std::os::unix::fs::chown(&path, Some(UID), Some(UID)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    path
}

/// Everything under `dir` (as root, who reads any mode).
fn everything(dir: &Path) -> Vec<PathBuf> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            all.extend(everything(&path));
        }
        all.push(path);
    }
    all
}

/// `rendergate serve` as uid/gid [`UID`], the hostile render then a valid
/// one; the two verdicts, what serve said on stderr.
fn serve(module: &[u8], tmp: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Vec<Value>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rendergate"));
    command
        .args(["serve", "--check-interval", "0s", "--haproxy"])
        .arg(haproxy())
        .args(extra)
        .env_clear()
        .env("TMPDIR", tmp)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setgroups/setgid/setuid between fork and exec, on plain
    // integers; std has no way to drop supplementary groups itself.
    unsafe {
        command.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(UID) != 0
                || libc::setuid(UID) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("start rendergate serve");
    let mut stdin = child.stdin.take().unwrap();
    let encoded = base64::engine::general_purpose::STANDARD.encode(module);
    let hostile = json!({"type": "rendered", "plan": "plan-1", "render": "r-1", "config": HOSTILE,
    "files": [
        {"kind": "general", "path": "general/chmodder.lua", "content": LUA},
        {"kind": "general", "path": "general/chmodder.so", "encoding": "base64", "content": encoded},
    ]});
    let valid = json!({"type": "rendered", "plan": "plan-2", "render": "r-2", "config": VALID});
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut verdicts = Vec::new();
    for line in [hostile, valid] {
        writeln!(stdin, "{line}").unwrap();
        // one render at a time: the second is not queued behind the first
        for out in stdout.by_ref() {
            let out: Value = serde_json::from_str(&out.unwrap()).unwrap();
            if out["type"] == "verdict" {
                verdicts.push(out);
                break;
            }
        }
    }
    drop(stdin);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(child.wait().unwrap().success(), "serve: {stderr}");
    (verdicts, stderr)
}

fn nothing_outlives_the_check_and_the_next_render_is_judged(world: &str) {
    if !has_lua() {
        needs::missing("no Lua in this haproxy", "the chmod render");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let Some(module) = build_module(work.path()) else { return };
    let tmp = owned_dir(work.path().join("tmp"));
    let config_dir = owned_dir(work.path().join("config"));
    let config_arg = config_dir.to_str().unwrap();
    let (extra, env): (Vec<&str>, Vec<(&str, &str)>) = match world {
        "root" => (vec![], vec![]),
        _ => (
            vec!["--config-dir", config_arg],
            vec![("RENDERGATE_SANDBOX_DISABLE", "userns,netns,mountns")],
        ),
    };
    let (verdicts, stderr) = serve(&module, &tmp, &extra, &env);
    assert_eq!(verdicts.len(), 2, "{verdicts:?}\n{stderr}");
    assert!(
        verdicts[0]["message"].as_str().unwrap_or_default().contains("MODULE:chmodded"),
        "the render's code did not run and chmod its directory, so this test proves nothing: {}\n{stderr}",
        verdicts[0]
    );
    assert_eq!(
        verdicts[1]["ok"],
        json!(true),
        "the next render, in the {world} world: {}",
        verdicts[1]
    );
    assert!(
        stderr.contains(&format!("world={world}")),
        "the {world} world was not the one used: {stderr}"
    );
    let left: Vec<_> = everything(&tmp).into_iter().chain(everything(&config_dir)).collect();
    assert!(left.is_empty(), "the render outlived its check: {left:?}\n{stderr}");
}

#[test]
fn a_render_that_chmods_its_directory_000_leaves_nothing_in_the_root_world() {
    nothing_outlives_the_check_and_the_next_render_is_judged("root");
}

#[test]
fn a_render_that_chmods_its_directory_000_leaves_nothing_in_the_config_dir_world() {
    nothing_outlives_the_check_and_the_next_render_is_judged("config-dir");
}
