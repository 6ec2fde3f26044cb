#!/usr/bin/env bash
# The gate in a real container (issue 30): builds the runtime stage of
# examples/deploy/Dockerfile FROM a Debian 12 image and runs it as
# examples/deploy/kubernetes.yaml runs it, under four seccomp profiles,
# asserting what the gate says and does there. Run by .ci/run after the cargo
# tests; needs root, podman, runc, debootstrap and python3, and fails (never
# skips) without them.
#
#   1. base image: Debian 12 (bookworm, minbase, with haproxy and
#      ca-certificates and the security updates), made by debootstrap from apt's
#      configured mirror into $RENDERGATE_CONTAINER_CACHE (default
#      /var/tmp/rendergate-container), imported into podman as
#      localhost/rendergate-base:bookworm; made once, reused while its recipe
#      is unchanged (no container registry is reachable from CI);
#   2. image: the Dockerfile's runtime stage (the lines between its two
#      "runtime stage" marker comments, verbatim) FROM that base, with the
#      binary and policy components CI just built standing in for the build
#      stage at the same paths (nothing is compiled in the container);
#   3. per seccomp profile (podman's default, which CRI-O applies for
#      RuntimeDefault; containerd's/Docker's RuntimeDefault, derived by
#      seccomp.py; unconfined), as uid 10001 with every capability dropped,
#      no_new_privs, a read-only root, and emptyDir-like volumes at /tmp,
#      /etc/haproxy and /var/cache/rendergate:
#        a. a probe that the profile is the one applied (unshare, clone3, an
#           unlisted syscall);
#        b. `rendergate check --explain` claims the world EXPECTED_WORLD says;
#        c. kubernetes.yaml's preflight script exits 0, and
#           `rendergate check /render` (examples/render) exits 0; a render
#           whose Lua looks for processes (processes/) sees none outside its
#           check, and in a root of its own HAProxy is pid 2; a check
#           stopped at its timeout (endless/) leaves no process behind, under
#           a pid 1 that never reaps;
#        d. kubernetes.yaml's `rendergate serve` command line on
#           examples/events.ndjson gives each render the verdict
#           events.expected names;
#        e. the real-world corpus through the gate and bare `haproxy -c`
#           (corpus.sh) agrees case by case, but for deviations.txt.
#
# Environment: RENDERGATE_CONTAINER_CACHE, CARGO_TARGET_DIR (default
# /var/tmp/rendergate-target), RENDERGATE_BIN (default
# $CARGO_TARGET_DIR/debug/rendergate), RENDERGATE_POLICY_DIR (a directory
# with the four shipped .wasm; default: the newest the tests' build made),
# RENDERGATE_CORPORA (the directory holding realworld/),
# RENDERGATE_DEBIAN_MIRROR / RENDERGATE_DEBIAN_SECURITY_MIRROR (default: from
# /etc/apt/sources.list*), RENDERGATE_CONTAINER_PROFILES (a subset, e.g.
# "unconfined podman"; CI runs all four).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
here=$repo/tests/container

# The world `rendergate check --explain` must claim under each profile
# (README, "The sandbox around haproxy -c"): with user namespaces and mount
# allowed, a root of the check's own; under containerd's/Docker's
# RuntimeDefault (unshare refused without CAP_SYS_ADMIN), the config-directory
# world. podman's default profile allows unshare and mount but not chroot
# without CAP_SYS_CHROOT, so root there needs the gate to do without chroot.
declare -A EXPECTED_WORLD=(
    [unconfined]=root
    [podman]=root
    [runtime-default]=config-dir
    [localhost]=root
)
# What the probe must see, per profile: unshare(CLONE_NEWUSER), clone3(NULL,0),
# io_uring_setup (listed by neither profile) as "return/errno".
declare -A EXPECTED_PROBE=(
    [unconfined]="unshare=0 clone3=-1/22 io_uring_setup=-1/14"
    [podman]="unshare=0 clone3=-1/22 io_uring_setup=-1/38"
    [runtime-default]="unshare=-1/1 clone3=-1/38 io_uring_setup=-1/1"
    [localhost]="unshare=0 clone3=-1/38 io_uring_setup=-1/1"
)
read -r -a profiles <<<"${RENDERGATE_CONTAINER_PROFILES:-unconfined podman runtime-default localhost}"

started=$(date +%s)
failures=()
fail() {
    echo "FAIL: $*" >&2
    failures+=("$*")
}
die() {
    echo "error: tests/container/run.sh: $*" >&2
    exit 1
}
step() { echo "== [$(($(date +%s) - started))s] $*"; }

# --- what it needs: missing is a failure, in CI and out ---
export PATH="$PATH:/usr/sbin:/sbin"
[[ "$(id -u)" == 0 ]] || die "must run as root (debootstrap, podman's rootful storage)"
for tool in podman runc debootstrap python3 tar; do
    command -v "$tool" >/dev/null || die "$tool is missing (apt-get install podman runc debootstrap uidmap python3)"
done
cache=${RENDERGATE_CONTAINER_CACHE:-/var/tmp/rendergate-container}
case "$cache/" in "$repo"/*) die "the cache ($cache) must be outside the clone" ;; esac
mkdir -p "$cache"
target=${CARGO_TARGET_DIR:-/var/tmp/rendergate-target}
bin=${RENDERGATE_BIN:-$target/debug/rendergate}
[[ -x "$bin" ]] || die "no rendergate binary at $bin (build it first: cargo build; or set RENDERGATE_BIN)"
# .ci/run finds the corpus and sets this (docs/checking.md, "The differential test")
corpora=${RENDERGATE_CORPORA:-}
[[ -n "$corpora" && -d "$corpora/realworld" ]] \
    || die "no real-world corpus: set RENDERGATE_CORPORA to the directory holding realworld/ (docs/checking.md, \"The differential test\")"
corpora=$(cd "$corpora" && pwd)

# podman: runc (crun fails on this kind of host's cgroups), cgroupfs, and
# rlimits no higher than the hard limits podman itself runs under (podman
# lowers its own nproc to 32768; raising a hard limit needs CAP_SYS_RESOURCE,
# which a CI sandbox may not grant).
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
[[ "$nofile" == unlimited || "$nofile" -gt 65536 ]] && nofile=65536
[[ "$nproc" == unlimited || "$nproc" -gt 32768 ]] && nproc=32768
pod() { podman --runtime runc --cgroup-manager cgroupfs "$@"; }
limits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")

# --- 1. the base image ---
base=localhost/rendergate-base:bookworm
include=haproxy,ca-certificates
# apt's configured Debian mirrors: "URI SUITE" per enabled deb source.
apt_sources() {
    python3 - /etc/apt/sources.list /etc/apt/sources.list.d/* <<'EOF'
import sys
for path in sys.argv[1:]:
    try:
        text = open(path).read()
    except OSError:
        continue
    if path.endswith(".list"):
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if words[:1] == ["deb"]:
                words = [w for w in words[1:] if not w.startswith("[") and not w.endswith("]")]
                if len(words) >= 2:
                    print(words[0], words[1])
    elif path.endswith(".sources"):
        for paragraph in text.split("\n\n"):
            fields = {}
            for line in paragraph.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.split()
            if "deb" in fields.get("types", []) and fields.get("enabled", ["yes"]) != ["no"]:
                for uri in fields.get("uris", []):
                    for suite in fields.get("suites", []):
                        print(uri, suite)
EOF
}
mirror=${RENDERGATE_DEBIAN_MIRROR:-$(apt_sources | awk '$2 == "bookworm" { print $1; exit }')}
security=${RENDERGATE_DEBIAN_SECURITY_MIRROR:-$(apt_sources | awk '$2 == "bookworm-security" { print $1; exit }')}
[[ -n "$mirror" ]] || die "no Debian bookworm mirror in /etc/apt/sources.list*; set RENDERGATE_DEBIAN_MIRROR"
recipe="debootstrap --variant=minbase --include=$include bookworm $mirror; security ${security:-none}; v1"
recipe_id=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
if [[ "$(pod image inspect --format '{{index .Labels "rendergate.recipe"}}' "$base" 2>/dev/null || true)" != "$recipe_id" ]]; then
    rootfs=$cache/rootfs
    if [[ "$(cat "$rootfs.recipe" 2>/dev/null || true)" != "$recipe_id" ]]; then
        step "debootstrap: $recipe"
        rm -rf "$rootfs" "$rootfs.partial" "$rootfs.recipe"
        debootstrap --variant=minbase --include="$include" bookworm "$rootfs.partial" "$mirror" \
            >"$cache/debootstrap.log" 2>&1 || { tail -n 30 "$cache/debootstrap.log" >&2; die "debootstrap failed (log: $cache/debootstrap.log)"; }
        {
            echo "deb $mirror bookworm main"
            echo "deb $mirror bookworm-updates main"
            [[ -n "$security" ]] && echo "deb $security bookworm-security main"
        } >"$rootfs.partial/etc/apt/sources.list"
        # the security updates, as debian:bookworm-slim plus apt would have them
        chroot "$rootfs.partial" apt-get update -qq >>"$cache/debootstrap.log" 2>&1 \
            && chroot "$rootfs.partial" env DEBIAN_FRONTEND=noninteractive apt-get upgrade -y -qq >>"$cache/debootstrap.log" 2>&1 \
            || { tail -n 30 "$cache/debootstrap.log" >&2; die "apt-get upgrade in the new root failed (log: $cache/debootstrap.log)"; }
        chroot "$rootfs.partial" apt-get clean
        rm -rf "$rootfs.partial"/var/lib/apt/lists/*
        mv "$rootfs.partial" "$rootfs"
        echo "$recipe_id" >"$rootfs.recipe"
    fi
    step "import $base"
    old=$(pod image inspect --format '{{.Id}}' "$base" 2>/dev/null || true)
    tar -C "$rootfs" -c . | pod import --quiet --change "LABEL rendergate.recipe=$recipe_id" - "$base" >/dev/null
    [[ -n "$old" ]] && pod rmi "$old" >/dev/null 2>&1 || true
fi
echo "base: $base ($(pod run --rm --pull=never --network none "${limits[@]}" "$base" haproxy -v | sed -n 1p))"

# --- 2. the image: the Dockerfile's runtime stage, verbatim ---
image=localhost/rendergate:ci
dockerfile=$repo/examples/deploy/Dockerfile
context=$cache/context
rm -rf "$context"
mkdir -p "$context/src/target/release" "$context/src/guest-policy/target/wasm32-wasip2/release"
ln -f "$bin" "$context/src/target/release/rendergate" 2>/dev/null || cp "$bin" "$context/src/target/release/rendergate"
policies=${RENDERGATE_POLICY_DIR:-}
if [[ -z "$policies" ]]; then
    newest=$(find "$target" -path '*/wasm32-wasip2/release/scoped_revert.wasm' -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -n 1 | cut -d' ' -f2-)
    [[ -n "$newest" ]] || die "no scoped_revert.wasm under $target (the tests' build makes them: cargo build --workspace --all-targets; or set RENDERGATE_POLICY_DIR)"
    policies=$(dirname "$newest")
fi
for policy in $(grep -o 'release/[a-z_]*\.wasm ' "$dockerfile" | sed 's#release/##'); do
    [[ -f "$policies/$policy" ]] || die "$policies/$policy is missing (the Dockerfile copies it)"
    cp "$policies/$policy" "$context/src/guest-policy/target/wasm32-wasip2/release/"
done
grep -c '^# --- runtime stage: begin' "$dockerfile" | grep -qx 1 || die "$dockerfile: no single '# --- runtime stage: begin' marker"
grep -c '^# --- runtime stage: end' "$dockerfile" | grep -qx 1 || die "$dockerfile: no single '# --- runtime stage: end' marker"
grep -c '^ARG HAPROXY_IMAGE=' "$dockerfile" | grep -qx 1 || die "$dockerfile: no global ARG HAPROXY_IMAGE"
{
    echo "# Generated by tests/container/run.sh from examples/deploy/Dockerfile: its global"
    echo "# ARG, a stand-in for its build stage (CI's own binary and policies at the"
    echo "# paths the build stage gives them), and its runtime stage, verbatim."
    grep '^ARG HAPROXY_IMAGE=' "$dockerfile"
    echo "FROM scratch AS build"
    echo "LABEL rendergate.ci=build-stand-in"
    echo "COPY src /src"
    sed -n '/^# --- runtime stage: begin/,/^# --- runtime stage: end/p' "$dockerfile"
} >"$context/Dockerfile"
step "build $image FROM $base (runtime stage of examples/deploy/Dockerfile)"
old=$(pod image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
pod build --pull=never --layers=false "${limits[@]}" --network none --build-arg "HAPROXY_IMAGE=$base" \
    -f "$context/Dockerfile" -t "$image" "$context" >"$cache/build.log" 2>&1 \
    || { tail -n 40 "$cache/build.log" >&2; die "podman build failed (log: $cache/build.log)"; }
new=$(pod image inspect --format '{{.Id}}' "$image")
[[ -n "$old" && "$old" != "$new" ]] && pod rmi "$old" >/dev/null 2>&1 || true
# no layer cache (--layers=false), and the stand-in stage's image goes: CI
# builds with a new binary every time, and 400 MB a run would pile up
pod image prune -f --filter label=rendergate.ci=build-stand-in >/dev/null
rm -rf "$context"

# --- 3. the runs ---
# kubernetes.yaml's preflight script and the gate's serve command line, read
# from the manifest so the runs are the pod's own.
kubernetes=$repo/examples/deploy/kubernetes.yaml
preflight=$(awk '
    /- name: sandbox-preflight/ { inpod = 1 }
    inpod && /^ *- \|$/ { script = 1; indent = -1; next }
    script {
        if (indent < 0) { match($0, /^ */); indent = RLENGTH; margin = substr($0, 1, indent) }
        if (substr($0, 1, indent) != margin && $0 !~ /^ *$/) exit
        print substr($0, indent + 1)
    }' "$kubernetes")
[[ "$preflight" == *"rendergate check"* ]] || die "no preflight script read from $kubernetes"
read -r -a serve_line <<<"$(awk '
    /^ *- name: controller$/ { incontainer = 1 }
    incontainer && /^ *args:$/ { inargs = 1; next }
    inargs && /^ *- --$/ { after = 1; next }
    inargs && after {
        if ($0 ~ /^ *#/) next
        if ($0 !~ /^ *- /) exit
        sub(/^ *- /, ""); printf "%s ", $0
    }' "$kubernetes")"
[[ "${serve_line[0]:-}" == rendergate && "${serve_line[1]:-}" == serve ]] || die "no \`rendergate serve\` line read from $kubernetes: ${serve_line[*]}"

python3 "$here/seccomp.py" "${RENDERGATE_SECCOMP_DEFAULT:-/usr/share/containers/seccomp.json}" "$cache"
mapfile -t cases < <(find "$corpora/realworld" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | LC_ALL=C sort)
((${#cases[@]} > 0)) || die "$corpora/realworld holds no case directory"
results=()

for profile in "${profiles[@]}"; do
    case "$profile" in
        unconfined) seccomp=unconfined ;;
        podman) seccomp=$cache/podman.json ;;
        runtime-default) seccomp=$cache/runtime-default.json ;;
        localhost) seccomp=$cache/localhost.json ;;
        *) die "unknown profile $profile (unconfined, podman, runtime-default, localhost)" ;;
    esac
    profile_started=$(date +%s)
    out=$cache/out/$profile
    rm -rf "$out"
    mkdir -p "$out"
    # emptyDirs: fresh node directories, root's, group 10001 (fsGroup) and mode
    # 2777; the pod's containers share them (the preflight and the gate).
    volumes=$cache/volumes/$profile
    rm -rf "$volumes"
    mkdir -p "$volumes/tmp" "$volumes/config-dir" "$volumes/policy-cache"
    chown root:10001 "$volumes"/*
    chmod 2777 "$volumes"/*
    run=(pod run --rm -i --pull=never --network none --timeout 900 "${limits[@]}"
        --user 10001:10001 --cap-drop ALL --security-opt no-new-privileges
        --security-opt "seccomp=$seccomp"
        --read-only --read-only-tmpfs=false
        -v "$volumes/tmp:/tmp" -v "$volumes/config-dir:/etc/haproxy"
        -v "$volumes/policy-cache:/var/cache/rendergate"
        -v "$repo/examples/render:/render:ro"
        -v "$here/processes:/processes:ro"
        -v "$here/endless:/endless:ro"
        -v "$here:/harness:ro"
        -v "$corpora/realworld:/corpus:ro")

    step "$profile: probe"
    probe=$("${run[@]}" --entrypoint perl "$image" -e '
        sub call { my $r = syscall($_[0], @_[1 .. $#_]); return $r == -1 ? "-1/" . ($! + 0) : $r }
        print "unshare=", call(272, 0x10000000), " clone3=", call(435, 0, 0),
            " io_uring_setup=", call(425, 1, 0), "\n";' 2>&1 </dev/null) || true
    echo "  $probe"
    [[ "$probe" == "${EXPECTED_PROBE[$profile]}" ]] \
        || fail "$profile: the profile applied is not the one meant: probe says '$probe', expected '${EXPECTED_PROBE[$profile]}'"

    step "$profile: rendergate check --explain"
    explain=$("${run[@]}" "$image" check --explain 2>&1 </dev/null) || fail "$profile: \`rendergate check --explain\` exited non-zero: $explain"
    echo "$explain" | sed 's/^/  /'
    world=$(grep -o 'world=[a-z-]*' <<<"$explain" | tail -n 1 | cut -d= -f2 || true)
    [[ "$world" == "${EXPECTED_WORLD[$profile]}" ]] \
        || fail "$profile: \`rendergate check --explain\` claims world=${world:-?}, expected world=${EXPECTED_WORLD[$profile]}"

    step "$profile: kubernetes.yaml's preflight; rendergate check /render"
    if ! preflight_out=$("${run[@]}" --entrypoint sh "$image" -c "$preflight" 2>&1 </dev/null); then
        fail "$profile: kubernetes.yaml's sandbox-preflight script failed: $(tail -n 5 <<<"$preflight_out")"
    fi
    checks=ok
    if ! check_out=$("${run[@]}" "$image" check --haproxy /usr/sbin/haproxy /render 2>&1 </dev/null); then
        checks=failed
        fail "$profile: \`rendergate check /render\` (examples/render) did not pass: $check_out"
    fi

    # A render's Lua sees no process outside its check (docs/checking.md,
    # "The check's world"): no /proc entry of the gate, the container's pid 1;
    # in a root of its own HAProxy runs as pid 2 of the check's PID namespace.
    step "$profile: processes a render can see"
    seen=$("${run[@]}" "$image" check --haproxy /usr/sbin/haproxy /processes 2>&1 </dev/null || true)
    if ! grep -q 'outside=\[\]' <<<"$seen"; then
        fail "$profile: a render's Lua saw processes outside its check: $(grep -o 'outside=\[[^]]*\]' <<<"$seen" || tail -n 3 <<<"$seen")"
    elif [[ "$world" == root ]] && ! grep -q '\[ALERT\] *(2) :' <<<"$seen"; then
        fail "$profile: HAProxy is not pid 2 of a PID namespace of the check's: $(grep -m1 ALERT <<<"$seen")"
    else
        echo "  no process outside the check seen$([[ "$world" == root ]] && echo '; HAProxy is pid 2')"
    fi

    # A check stopped at its timeout leaves no process behind (docs/checking.md,
    # "The check's world"), even where the container's pid 1 never reaps an
    # orphan: perl is pid 1 here and waits only for the gate it started.
    step "$profile: a check stopped at its timeout leaves no process"
    stopped=$("${run[@]}" --entrypoint perl "$image" -e '
        system("rendergate", "check", "--haproxy", "/usr/sbin/haproxy", "--timeout", "1s", "/endless");
        print "status=", $? >> 8, "\n";
        select(undef, undef, undef, 0.5);
        for my $stat (glob "/proc/[0-9]*/stat") {
            open(my $f, "<", $stat) or next;
            my $line = <$f>;
            print "left: $line" if $line !~ /^1 /;
        }' 2>&1 </dev/null) || true
    if ! grep -q '^status=2$' <<<"$stopped" || ! grep -q 'timed out' <<<"$stopped"; then
        fail "$profile: the endless render's check did not time out: $(tail -n 3 <<<"$stopped")"
    elif grep -q '^left: ' <<<"$stopped"; then
        fail "$profile: a stopped check left processes: $(grep '^left: ' <<<"$stopped" | cut -c1-60 | tr '\n' ';')"
    else
        echo "  timed out; nothing left"
    fi

    step "$profile: ${serve_line[*]} < examples/events.ndjson"
    serve_status=0
    "${run[@]}" "$image" "${serve_line[@]:1}" <"$repo/examples/events.ndjson" \
        >"$out/serve.out" 2>"$out/serve.err" || serve_status=$?
    ((serve_status == 0)) || fail "$profile: serve exited $serve_status: $(tail -n 5 "$out/serve.err")"
    if ! serve_summary=$(python3 "$here/judge.py" serve "$here/events.expected" "$repo/examples/events.ndjson" "$out/serve.out" 2>&1); then
        checks=failed
        fail "$profile: serve's verdicts: $serve_summary"
    fi
    echo "  ${serve_summary%%$'\n'*}"

    # In a root of its own each check is alone; the config-directory world
    # lays every render out in /etc/haproxy: one check at a time there.
    jobs=1
    [[ "$world" == root ]] && jobs=$(($(nproc) < 4 ? $(nproc) : 4))
    step "$profile: ${#cases[@]} real-world cases, gate and bare haproxy -c, $jobs at a time"
    corpus_started=$(date +%s)
    corpus_status=0
    printf '/corpus/%s\n' "${cases[@]}" | "${run[@]}" --entrypoint sh "$image" \
        -c "xargs -d '\n' -n 20 -P $jobs sh /harness/corpus.sh" \
        >"$out/corpus.out" 2>"$out/corpus.err" || corpus_status=$?
    ((corpus_status == 0)) || fail "$profile: the corpus run exited $corpus_status: $(tail -n 5 "$out/corpus.err")"
    ran=$(grep -c '^CASE' "$out/corpus.out" || true)
    ((ran == ${#cases[@]})) || fail "$profile: the corpus run judged $ran of ${#cases[@]} cases"
    corpus_summary=$(python3 "$here/judge.py" corpus "$here/deviations.txt" "$profile" "$out/corpus.out" 2>"$out/corpus.failures") \
        || fail "$profile: the gate and bare haproxy -c disagree:
$(cat "$out/corpus.failures")"
    echo "$corpus_summary" | sed 's/^/  /'
    agreement=$(grep -o '^corpus: [0-9]* cases, [0-9]* agree' <<<"$corpus_summary" | sed 's/corpus: \([0-9]*\) cases, \([0-9]*\) agree/\2\/\1/' || true)
    results+=("$(printf '%-16s world=%-11s (expected %-10s) checks %-6s corpus agree %-7s %4ss (corpus %ss)' \
        "$profile" "${world:-?}" "${EXPECTED_WORLD[$profile]}" "$checks" "${agreement:-?}" \
        "$(($(date +%s) - profile_started))" "$(($(date +%s) - corpus_started))")")
done

echo
echo "== container test: $(($(date +%s) - started))s"
printf '  %s\n' "${results[@]}"
if ((${#failures[@]})); then
    echo "container test: ${#failures[@]} failure(s):" >&2
    printf '  - %s\n' "${failures[@]%%$'\n'*}" >&2
    exit 1
fi
echo "container test: ok"
