#!/usr/bin/env bash
# Builds the HAProxy versions the gate is tested against besides Debian's 2.6
# (3.0.11 today: every haproxy-<version>.tar.gz there) from upstream release tarballs (haproxy-<version>.tar.gz), into a cache outside the clone
# that later runs reuse. Prints one line per version: VERSION PATH-TO-BINARY.
#
#   tests/build-haproxy.sh SOURCES_DIR [CACHE_DIR]
#
# SOURCES_DIR holds haproxy-<version>.tar.gz; CACHE_DIR defaults to
# /var/tmp/rendergate-haproxy. Needs build-essential, libssl-dev,
# liblua5.4-dev, libpcre2-dev and zlib1g-dev (.ci/run installs them).
set -euo pipefail
sources="${1:?usage: tests/build-haproxy.sh SOURCES_DIR [CACHE_DIR]}"
cache="${2:-/var/tmp/rendergate-haproxy}"
mkdir -p "$cache"
for tarball in "$sources"/haproxy-*.tar.gz; do
    name="$(basename "$tarball" .tar.gz)"          # haproxy-3.2.0
    version="${name#haproxy-}"
    prefix="$cache/$name"
    # The tarball's hash is part of the stamp: new sources under the same name rebuild.
    stamp="$(sha256sum "$tarball" | cut -c1-16)"
    if [[ -x "$prefix/sbin/haproxy" && "$(cat "$prefix/.stamp" 2>/dev/null)" == "$stamp" ]]; then
        echo "$version $prefix/sbin/haproxy"
        continue
    fi
    work="$(mktemp -d "$cache/build.XXXXXX")"
    tar xzf "$tarball" -C "$work"
    src="$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n1)"
    make -s -C "$src" -j"$(nproc)" TARGET=linux-glibc USE_OPENSSL=1 USE_LUA=1 \
        LUA_INC=/usr/include/lua5.4 LUA_LIB_NAME=lua5.4 USE_PCRE2=1 USE_PCRE2_JIT=1 USE_ZLIB=1 \
        >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; exit 1; }
    rm -rf "$prefix"
    make -s -C "$src" install PREFIX="$prefix" >/dev/null
    echo "$stamp" >"$prefix/.stamp"
    rm -rf "$work"
    echo "$version $prefix/sbin/haproxy"
done
