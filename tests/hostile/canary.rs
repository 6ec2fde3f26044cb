//! The canary: with `RENDERGATE_HOSTILE_CANARY=1`, every leaking fixture
//! runs with `--no-sandbox` and must leak as its `leaks` say (the secret
//! shows, the file appears, the host-path render passes, a process
//! survives, the check blocks). A fixture that stops leaking unsandboxed
//! proves nothing sandboxed, so this is how the suite cannot go stale
//! silently. Off by default: it runs hostile renders unprotected.

use crate::support::*;

/// Each leak of a fixture and whether it happened.
type Seen = Vec<(Leak, bool)>;

#[test]
fn canary_fixtures_leak_unsandboxed() {
    if std::env::var(CANARY_VAR).as_deref() != Ok("1") {
        eprintln!("note: canary mode is off; {CANARY_VAR}=1 runs the leaking fixtures unsandboxed");
        return;
    }
    let jobs: Vec<Job<(&str, Option<Seen>)>> = crate::ALL
        .iter()
        // the memory bomb would take 4 GiB unsandboxed; it is no leak fixture anyway
        .filter(|(name, _)| *name != "lua_memory_bomb")
        .map(|&(name, build)| Box::new(move || (name, canary(name, build))) as _)
        .collect();
    let mut table = Vec::new();
    let mut stale = Vec::new();
    for (name, seen) in parallel(4, jobs) {
        let Some(seen) = seen else {
            table.push(format!("{name:32} skipped here"));
            continue;
        };
        if seen.is_empty() {
            continue; // not a leaking fixture
        }
        for (leak, happened) in seen {
            table
                .push(format!("{name:32} {:7} {leak:?}", if happened { "LEAKS" } else { "STALE" }));
            if !happened {
                stale.push(format!("{name}: {leak:?}"));
            }
        }
    }
    eprintln!("canary, unsandboxed:\n{}", table.join("\n"));
    assert!(stale.is_empty(), "fixtures that no longer leak unsandboxed:\n{}", stale.join("\n"));
}
