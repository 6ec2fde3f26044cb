#!/bin/sh
# Runs INSIDE the rendergate image (tests/container/run.sh mounts it at
# /harness): every case directory given on the command line through the gate
# (`rendergate check --json`) and through bare `haproxy -dr -c -f haproxy.cfg`
# in a copy of the case's directory as its working directory, with an empty
# environment, as tests/differential (sides.rs, case.rs) runs both sides:
#   - each side gets its own fresh copy of the case, SOURCE left out;
#   - bare's copy has `default-path origin /etc/haproxy` pointed at its own
#     directory (the gate shows the render at /etc/haproxy, its config dir);
#   - bare's kind: exit 0 or 2 pass, 1 refused, anything else (a signal, the
#     30 s deadline) could not run;
#   - bare sees the image's stock files at /etc/haproxy, as a fleet's pod
#     does; the gate gets them through --stock-dir, as kubernetes.yaml has it;
#   - the gate's kind: exit 0 pass, 1 refused, 2 could not run, and the JSON
#     verdict's ok/refused must say the same, or the answer is unreadable.
# One line per case, tab-separated: CASE name gate-kind bare-kind gate-exit
# bare-exit; on a disagreement, DETAIL lines with both sides' output. No
# python in the image: POSIX sh and coreutils only. Cases run one at a time
# (the config-directory world lays each render out in /etc/haproxy itself).
set -u
haproxy=/usr/sbin/haproxy
stock=/usr/share/rendergate/stock   # the image's stock files (Dockerfile)
work=$(mktemp -d "${TMPDIR:-/tmp}/corpus.XXXXXX") || exit 3

kind_of_gate() { # exit status, JSON file
    case "$1" in
        0) by_exit=pass ;;
        1) by_exit=refused ;;
        2) by_exit=could-not-run ;;
        *) echo "unreadable:the-gate-itself-ended-with-$1"; return ;;
    esac
    ok=$(grep -o '"ok": *[a-z]*' "$2" | head -n 1 | sed 's/.*: *//')
    refused=$(grep -o '"refused": *[a-z]*' "$2" | head -n 1 | sed 's/.*: *//')
    case "$ok/$refused" in
        true/false) by_json=pass ;;
        false/true) by_json=refused ;;
        false/false) by_json=could-not-run ;;
        *) echo "unreadable:no-verdict-object"; return ;;
    esac
    if [ "$by_exit" = "$by_json" ]; then echo "$by_exit"; else echo "unreadable:exit-says-$by_exit-json-says-$by_json"; fi
}

kind_of_bare() {
    case "$1" in
        0 | 2) echo pass ;;
        1) echo refused ;;
        *) echo could-not-run ;;
    esac
}

copy_case() { # case dir, fresh dir: the files with the modes a fresh write gives
    if [ -d "$2" ]; then chmod -R u+rwx "$2" && rm -rf "$2" || return 1; fi
    mkdir "$2" && cp -R "$1/." "$2/" && rm -f "$2/SOURCE" \
        && find "$2" -type d -exec chmod 755 {} + && find "$2" -type f -exec chmod 644 {} +
}

for dir in "$@"; do
    dir=${dir%/}
    name=${dir##*/}
    gate=$work/gate
    bare=$work/bare
    if ! copy_case "$dir" "$gate" || ! copy_case "$dir" "$bare"; then
        printf 'CASE\t%s\tharness-error\tharness-error\t-\t-\n' "$name"
        continue
    fi
    if grep -q 'default-path origin /etc/haproxy' "$bare/haproxy.cfg"; then
        sed -i "s#default-path origin /etc/haproxy#default-path origin $bare#g" "$bare/haproxy.cfg"
    fi

    rendergate check --json --timeout 20s --haproxy "$haproxy" --stock-dir "$stock" "$gate" >"$work/gate.out" 2>"$work/gate.err"
    gate_exit=$?
    # bare sees what a fleet's pod sees at /etc/haproxy: the image's stock
    # files (here the emptyDir, filled for bare alone, one bare at a time,
    # and emptied again for the gate's config-directory world)
    flock /tmp/corpus-stock.lock sh -c '
        cp -R "$1/." /etc/haproxy/ || exit 97
        (cd "$2" && exec timeout -s KILL 30 env -i "$3" -dr -c -f haproxy.cfg)
        status=$?
        find /etc/haproxy -mindepth 1 -delete || exit 98
        exit $status' sh "$stock" "$bare" "$haproxy" >"$work/bare.out" 2>&1
    bare_exit=$?

    gate_kind=$(kind_of_gate "$gate_exit" "$work/gate.out")
    bare_kind=$(kind_of_bare "$bare_exit")
    printf 'CASE\t%s\t%s\t%s\t%s\t%s\n' "$name" "$gate_kind" "$bare_kind" "$gate_exit" "$bare_exit"
    if [ "$gate_kind" != "$bare_kind" ]; then
        for side in gate.out gate.err bare.out; do
            head -c 3000 "$work/$side" | sed "s/^/DETAIL\t$name\t$side\t/"
            echo
        done
    fi
done
chmod -R u+rwx "$work" && rm -rf "$work"
