#!/usr/bin/env bash
# Runs the Python SDK's unit tests (guest-policy/python/tests) on the host's
# CPython (3.11 or later, as the generated bindings need), against bindings
# componentize-py generates from wit/policy.wit into a scratch directory.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
wit=$(cd "$here/../../wit" && pwd)
source "$here/toolchain.sh"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
componentize-py --quiet --wit-path "$wit" --world policy bindings "$scratch/bindings"
PYTHONPATH="$scratch/bindings:$here/sdk" python3 -B -m unittest discover --start-directory "$here/tests" "$@"
