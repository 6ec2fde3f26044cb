#!/usr/bin/env bash
# Builds the Python policy components into OUT_DIR as <strategy>.python.wasm:
# each strategy below is a module in guest-policy/python/<strategy>/ defining
# `WitWorld`, componentized with the SDK (guest-policy/python/sdk) against
# wit/policy.wit by componentize-py, at the version pinned in requirements.txt.
# componentize-py generates the world's bindings during the build; nothing
# generated is kept in the tree, and nothing is fetched.
set -euo pipefail

if (($# != 1)); then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
wit=$(cd "$here/../../wit" && pwd)
strategies=(scoped-revert)

source "$here/toolchain.sh"

mkdir -p "$1"
out=$(cd "$1" && pwd)
# componentize-py adds the building host's site-packages to the component's
# module path unless VIRTUAL_ENV names a virtual environment: an empty one
# keeps what the host has installed out of the component.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/venv/lib/site-packages"
# The sources are built from a copy: the interpreter componentize-py runs
# writes bytecode caches beside the modules it imports.
cp -R "$here/sdk" "$scratch/sdk"

for strategy in "${strategies[@]}"; do
    cp -R "$here/$strategy" "$scratch/$strategy"
    # Written aside and moved into place: a failed build leaves no component.
    (cd "$scratch" && VIRTUAL_ENV="$scratch/venv" \
        componentize-py --quiet --wit-path "$wit" --world policy componentize \
        --python-path sdk --python-path "$strategy" "${strategy//-/_}" \
        --output "$scratch/$strategy.wasm")
    mv "$scratch/$strategy.wasm" "$out/$strategy.python.wasm"
done
