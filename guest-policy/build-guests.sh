#!/usr/bin/env bash
# Builds every policy guest into OUT_DIR, one component per strategy and
# language, named <strategy>.<language>.wasm: the shipped Rust strategies
# (this directory's workspace, for wasm32-wasip2), then each other language
# through its own build script, which takes OUT_DIR and writes its
# <strategy>.<language>.wasm there. host/tests/policy_languages.rs runs every
# component against tests/fixtures/policies/<strategy>.json.
# A missing toolchain stops the build with a one-line error (exit 1).
set -euo pipefail

if (($# != 1)); then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
cargo=${CARGO:-cargo}

# Rust: the shipped strategies, as guest-policy/artifacts builds them for the tests.
libdir=$(rustc --print target-libdir --target wasm32-wasip2 2>/dev/null || true)
if [[ -z "$libdir" || ! -d "$libdir" ]]; then
    echo "error: the Rust target wasm32-wasip2 is not installed; rustup target add wasm32-wasip2" >&2
    exit 1
fi
"$cargo" build --quiet --release --target wasm32-wasip2 --manifest-path "$here/Cargo.toml"
target=$("$cargo" metadata --format-version 1 --no-deps --manifest-path "$here/Cargo.toml" |
    sed 's/.*"target_directory":"\([^"]*\)".*/\1/')
for strategy in scoped-revert fleet-revert quorum-promote observe-only; do
    cp "$target/wasm32-wasip2/release/${strategy//-/_}.wasm" "$out/$strategy.rust.wasm"
done

# The other languages: one build script each, taking OUT_DIR and writing its
# <strategy>.<language>.wasm there; a language added here adds its components
# to EXPECTED in host/tests/policy_languages.rs.
"$here/python/build.sh" "$out"
"$here/js/build.sh" "$out"
