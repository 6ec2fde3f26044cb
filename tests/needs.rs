//! What a test needs that a host may lack: Lua in the haproxy under test, a
//! tool (`openssl`, `cc`, `patchelf`), another HAProxy series. One rule for
//! every suite and every crate's unit tests (each includes this file): where
//! the env var `CI` is set (`.ci/run` sets it), a missing need fails the test,
//! since CI must run them all; elsewhere the test is skipped with a note.

use std::path::Path;

/// `what` is missing here, so `skipped` cannot run: panics in CI, else notes
/// the skip on stderr (shown with `--nocapture`) and returns, and the caller
/// skips.
pub fn missing(what: &str, skipped: &str) {
    if std::env::var_os("CI").is_some() {
        panic!(
            "{what}, so {skipped} cannot run; in CI every test must run (.ci/run installs the tools, \
             tests/build-haproxy.sh builds HAProxy 3.x with Lua and OpenSSL)"
        );
    }
    eprintln!("note: {what}; {skipped} skipped");
}

/// Whether `haproxy` runs Lua (`haproxy -vv` says `+LUA`, `USE_LUA=1` or
/// `Built with Lua`, depending on the version).
pub fn lua(haproxy: &Path) -> bool {
    let out = std::process::Command::new(haproxy).arg("-vv").output().expect("run haproxy -vv");
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("+LUA") || text.contains("USE_LUA=1") || text.contains("Built with Lua")
}
