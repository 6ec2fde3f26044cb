//! Builds every component of the guest workspace (guest-policy/Cargo.toml)
//! for wasm32-wasip2, in a target directory of its own, and writes their
//! paths into `components.rs` for the tests to include.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    // Read at run time, not baked in with env!(): cargo may reuse this
    // compiled script for another checkout sharing the target directory.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let guests = Path::new(&manifest_dir).parent().unwrap().to_path_buf();
    let wit = guests.parent().unwrap().join("wit");
    for watched in [guests.join("Cargo.toml"), guests.join("Cargo.lock"), wit] {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    let members = [
        "sdk",
        "core",
        "scoped-revert",
        "fleet-revert",
        "quorum-promote",
        "observe-only",
        "hostile",
    ];
    for member in members {
        println!("cargo:rerun-if-changed={}", guests.join(member).display());
    }

    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let target_dir = out.join("target");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
        .arg(guests.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target_dir)
        // The host build's flags are not the guests' flags.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        // Under `cargo clippy` the host's lint driver would wrap the guests'
        // build too; the guests are linted on their own (.ci/run).
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .status()
        .expect("run cargo for the policy components");
    assert!(
        status.success(),
        "building the policy components in guest-policy/ failed; is the target installed? `rustup target add wasm32-wasip2`"
    );

    let built = target_dir.join("wasm32-wasip2/release");
    let components = [
        ("SCOPED_REVERT", "scoped_revert"),
        ("FLEET_REVERT", "fleet_revert"),
        ("QUORUM_PROMOTE", "quorum_promote"),
        ("OBSERVE_ONLY", "observe_only"),
        ("HOSTILE_SPIN", "hostile_spin"),
        ("HOSTILE_GROW", "hostile_grow"),
        ("HOSTILE_RECURSE", "hostile_recurse"),
        ("HOSTILE_PANIC", "hostile_panic"),
        ("HOSTILE_HUGE", "hostile_huge"),
        ("HOSTILE_RULE_BREAKER", "hostile_rule_breaker"),
        ("HOSTILE_SLOW", "hostile_slow"),
        ("HOSTILE_OTHER_WORLD", "hostile_other_world"),
        ("HOSTILE_STATEFUL", "hostile_stateful"),
        ("HOSTILE_PRINT", "hostile_print"),
        ("HOSTILE_FLOOD", "hostile_flood"),
        ("HOSTILE_PRINT_LATE", "hostile_print_late"),
        ("HOSTILE_SLEEP", "hostile_sleep"),
        ("HOSTILE_STDIN", "hostile_stdin"),
    ];
    // guest-policy/build-guests.sh builds the same workspace the same way:
    // given this directory, it finds the shipped strategies already built.
    let mut code = format!(
        "/// The guests' target directory\npub const TARGET_DIR: &str = {:?};\n",
        target_dir.display().to_string()
    );
    for (name, file) in components {
        let path = built.join(format!("{file}.wasm"));
        assert!(path.is_file(), "{} was not built", path.display());
        code.push_str(&format!(
            "/// `{file}.wasm`\npub const {name}: &str = {:?};\n",
            path.display().to_string()
        ));
    }
    std::fs::write(out.join("components.rs"), code).unwrap();
}
