# Sourced by build.sh and test.sh: stops with a one-line error (exit 1) unless
# componentize-py is installed at the version requirements.txt pins. The one in
# guest-policy/python/.venv (guest-policy/setup-toolchains.sh) comes first.
venv_bin="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/.venv/bin"
[ -x "$venv_bin/componentize-py" ] && export PATH="$venv_bin:$PATH"
pinned=$(sed -n 's/^componentize-py==\([^ ]*\).*/\1/p' "$(dirname "${BASH_SOURCE[0]}")/requirements.txt")
if ! command -v componentize-py >/dev/null; then
    echo "error: componentize-py not found; guest-policy/setup-toolchains.sh" >&2
    exit 1
fi
installed=$(componentize-py --version | sed -n 's/^componentize-py //p')
if [[ "$installed" != "$pinned" ]]; then
    echo "error: componentize-py $installed found, $pinned wanted; guest-policy/setup-toolchains.sh" >&2
    exit 1
fi
