# Sourced by build.sh and test.sh: stops with a one-line error (exit 1) unless
# componentize-py is installed at the version requirements.txt pins.
pinned=$(sed -n 's/^componentize-py==\([^ ]*\).*/\1/p' "$(dirname "${BASH_SOURCE[0]}")/requirements.txt")
if ! command -v componentize-py >/dev/null; then
    echo "error: componentize-py not found; pip install --require-hashes -r guest-policy/python/requirements.txt" >&2
    exit 1
fi
installed=$(componentize-py --version | sed -n 's/^componentize-py //p')
if [[ "$installed" != "$pinned" ]]; then
    echo "error: componentize-py $installed found, $pinned wanted; pip install --require-hashes -r guest-policy/python/requirements.txt" >&2
    exit 1
fi
