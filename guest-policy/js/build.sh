#!/usr/bin/env bash
# Builds every JavaScript policy in this folder (each top-level *.js file: one
# policy, importing sdk/policy.js) into OUT_DIR/NAME.javascript.wasm, a
# component of wit/policy.wit's world `policy`, with the componentize-qjs
# pinned in package-lock.json. It installs nothing: `npm ci --prefix
# guest-policy/js` does, once (docs/policies.md, "Writing a policy in JavaScript").
set -euo pipefail

if (($# != 1)); then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
wit="$(cd "$here/../../wit" && pwd)/policy.wit"
mkdir -p "$1"
out="$(cd "$1" && pwd)"

install_hint="npm ci --prefix guest-policy/js"
if ! command -v node >/dev/null; then
    echo "error: node is missing (Node.js 18 or later); install it, then run: $install_hint" >&2
    exit 1
fi
tool="$here/node_modules/componentize-qjs/bin/componentize-qjs"
pinned="$(node -p 'require(process.argv[1]).packages["node_modules/componentize-qjs"].version' \
    "$here/package-lock.json")"
installed="$(node -p 'require(process.argv[1]).version' \
    "$here/node_modules/componentize-qjs/package.json" 2>/dev/null || true)"
if [[ "$installed" != "$pinned" ]]; then
    echo "error: componentize-qjs $pinned is not installed (found: ${installed:-none}); run: $install_hint" >&2
    exit 1
fi
# The CLI is a native binding chosen per platform by npm (optional dependencies):
# a copy installed for another platform, or without optional dependencies, fails here.
if ! node "$tool" --help >/dev/null 2>&1; then
    echo "error: componentize-qjs $pinned does not run on this machine (its native binding is missing); run: $install_hint" >&2
    exit 1
fi

shopt -s nullglob
policies=("$here"/*.js)
if ((${#policies[@]} == 0)); then
    echo "error: no policy (*.js) in $here" >&2
    exit 1
fi
for js in "${policies[@]}"; do
    name="$(basename "$js" .js)"
    wasm="$out/$name.javascript.wasm"
    # componentize-qjs builds a module that lacks an export, and `policy
    # check` passes it (the function is looked up per call): every decision
    # would trap. The module is plain JavaScript, so Node can tell first.
    if ! node --input-type=module -e '
        const m = await import(process.argv[1]);
        const missing = ["name", "decide"].filter((f) => typeof m[f] !== "function");
        if (missing.length) {
            console.error(`error: ${process.argv[1]} exports no function ${missing.join(", ")}`);
            process.exit(1);
        }' "$js"; then
        exit 1
    fi
    # --sync: the host runs without the component model's async ABI, which
    # the default runtime needs. --module-root: the policy's imports
    # (./sdk/policy.js) resolve inside this folder, at build time.
    if ! log="$(node "$tool" --wit "$wit" --world policy --sync --module-root "$here" \
        --js "$js" --output "$wasm" 2>&1)"; then
        printf '%s\n' "$log" >&2
        echo "error: componentize-qjs failed to build $js" >&2
        exit 1
    fi
    echo "built $wasm ($(stat -c %s "$wasm") bytes)"
done
