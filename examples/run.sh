#!/usr/bin/env bash
# Sets rendergate up on a fresh Debian machine and runs it on the sample
# render: installs haproxy if it is missing and the policy guests' pinned
# toolchains, builds, checks examples/render, then feeds examples/events.ndjson to `rendergate serve`, and replays it
# into a timeline picture (rendergate-timeline.svg).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

if ! command -v haproxy >/dev/null 2>&1; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq && $sudo apt-get install -y -qq haproxy
fi
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
# The Python and JavaScript policy toolchains, pinned, inside the clone (for the tests).
guest-policy/setup-toolchains.sh
cargo build --quiet --bin rendergate
bin="${CARGO_TARGET_DIR:-target}/debug/rendergate"

echo "== rendergate check examples/render"
"$bin" check examples/render || true
echo
echo "== rendergate serve < examples/events.ndjson"
"$bin" serve --check-interval 0s < examples/events.ndjson
echo
echo "== rendergate replay examples/events.ndjson --timeline rendergate-timeline.svg"
"$bin" replay examples/events.ndjson --timeline rendergate-timeline.svg > /dev/null
echo "the timeline of that stream is in rendergate-timeline.svg"
