#!/usr/bin/env bash
# Installs the toolchains of the policy guests in languages other than Rust,
# inside the repository and at pinned versions, so build-guests.sh and
# `cargo test` find them without touching the machine's own packages:
# - Python: componentize-py (guest-policy/python/requirements.txt, hashes
#   required) in the virtual environment guest-policy/python/.venv;
# - JavaScript: componentize-qjs (guest-policy/js/package-lock.json) by npm ci.
# Needs python3 with venv and Node.js with npm (installed with apt when missing).
# docs/policies.md has the guides.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

apt_install() {
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

venv="$here/python/.venv"
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    apt_install python3-venv
fi
[ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check --require-hashes \
    -r "$here/python/requirements.txt"
"$venv/bin/componentize-py" --version

command -v npm >/dev/null || apt_install nodejs npm
npm ci --prefix "$here/js" --no-audit --no-fund --loglevel=error
