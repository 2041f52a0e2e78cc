#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Proves that a libthingif.so built with -DTHINGIF_EMBEDDED=ON (Embedded
# Swift) needs no Swift runtime at all:
#   1. ldd lists no libswift* library (and the .so has no RUNPATH into a
#      Swift toolchain);
#   2. its stripped size is printed (the figure docs/DECISIONS.md tracks);
#   3. only thingif_* is exported (nm -D), with SONAME libthingif.so.N
#      (N: THINGIF_ABI_VERSION of the header);
#   4. aircon links against it (NEEDED libthingif.so.N, no libswift*), takes
#      only thingif_* from it, and runs (aircon --help);
#   5. libthingif.a links into a plain C program with cc and only libc,
#      libm, libpthread, libmosquitto, libjansson and libcrypto (no Swift toolchain on
#      PATH), and the program creates and destroys a thing.
# The demo round trip with this library is the aircon_demo test of the same
# build folder.
#
# A cross build (cmake/toolchains/) is checked the same way on this machine:
# its ctest sets THINGIF_TARGET_RUN (qemu-user with the sysroot), which runs
# the board's programs and their dynamic loader in place of ldd, and
# THINGIF_TARGET_STRIP; the plain C program is built with DIR/target-cc.
#
# usage: scripts/check-embedded.sh --build-dir DIR
set -euo pipefail

build_dir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build_dir=$2; shift 2 ;;
        -h|--help) sed -n '4,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "embedded: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$build_dir" ] || { echo "embedded: --build-dir DIR is required" >&2; exit 2; }
build_dir=$(cd "$build_dir" && pwd)
abi=$(sed -n 's/^#define THINGIF_ABI_VERSION \([0-9]*\).*/\1/p' "$(dirname "$0")/../include/thingif.h")
lib=$(readlink -f "$build_dir/libthingif.so.$abi" 2>/dev/null || true)
aircon=$build_dir/aircon
[ -f "$lib" ] && [ -x "$aircon" ] || { echo "embedded: build $build_dir first" >&2; exit 2; }
fail=0
run=${THINGIF_TARGET_RUN:-}
# ldd for this machine's programs; for the board's, its own loader under
# qemu-user lists what it loads.
target_ldd() {
    if [ -n "$run" ]; then
        # shellcheck disable=SC2086
        local interp
        interp=$(readelf -l "$aircon" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
        $run -E LD_LIBRARY_PATH="$build_dir" "${THINGIF_SYSROOT:-}$interp" --list "$1"
    else
        ldd "$1"
    fi
}

# 1. No Swift runtime.
echo "embedded: ldd $lib"
target_ldd "$lib" | sed 's/^/  /'
if target_ldd "$lib" | grep 'libswift' >/dev/null; then
    echo "embedded: FAIL: the library needs a Swift runtime library" >&2
    fail=1
fi
if readelf -d "$lib" | grep -E 'RPATH|RUNPATH' | grep -i swift >/dev/null; then
    echo "embedded: FAIL: the library has a run path into a Swift toolchain:" >&2
    readelf -d "$lib" | grep -E 'RPATH|RUNPATH' >&2
    fail=1
fi

# 2. Size, as built and stripped.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/thingif-embedded.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"${THINGIF_TARGET_STRIP:-strip}" -o "$tmp/libthingif.so" "$lib"
echo "embedded: size $(stat -c %s "$lib") bytes as built, $(stat -c %s "$tmp/libthingif.so") bytes stripped"

# 3. Exports.
others=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -v '^thingif_' || true)
echo "embedded: $(nm -D --defined-only "$lib" | grep -c .) defined dynamic symbols"
if [ -n "$others" ]; then
    echo "embedded: FAIL: symbols not starting with thingif_:" >&2
    printf '  %s\n' $others >&2
    fail=1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ "$soname" = "libthingif.so.$abi" ] || { echo "embedded: FAIL: SONAME is '$soname'" >&2; fail=1; }

# 4. The C appliance against it.
needed=$(readelf -d "$aircon" | sed -n 's/.*Shared library: \[\(.*\)\].*/\1/p')
echo "embedded: aircon needs: $(echo $needed)"
echo "$needed" | grep -x "libthingif.so.$abi" >/dev/null || { echo "embedded: FAIL: aircon does not link libthingif.so.$abi" >&2; fail=1; }
if target_ldd "$aircon" | grep 'libswift' >/dev/null; then
    echo "embedded: FAIL: aircon pulls in a Swift runtime library" >&2
    fail=1
fi
# Whatever aircon takes from libthingif is thingif_*.
nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort > "$tmp/lib-defined"
nm -D --undefined-only "$aircon" | awk '{print $NF}' | sed 's/@.*//' | sort > "$tmp/aircon-undefined"
from_lib=$(comm -12 "$tmp/lib-defined" "$tmp/aircon-undefined")
echo "embedded: aircon uses $(echo "$from_lib" | grep -c .) symbols of libthingif"
if echo "$from_lib" | grep -v '^thingif_' | grep . >/dev/null; then
    echo "embedded: FAIL: aircon uses non-thingif_ symbols of libthingif" >&2
    fail=1
fi
# shellcheck disable=SC2086
if ! LD_LIBRARY_PATH="$build_dir" $run "$aircon" --help > "$tmp/help" 2>&1; then
    echo "embedded: FAIL: aircon --help failed:" >&2
    cat "$tmp/help" >&2
    fail=1
fi

# 5. The static archive with plain cc, the Swift toolchain out of PATH.
cat > "$tmp/plain.c" <<'EOF_C'
#include <stdio.h>
#include <thingif.h>
int main(int argc, char **argv)
{
    thingif_t *t = thingif_new("app", "key", argc > 1 ? argv[1] : ".");
    if (!t)
        return 1;
    printf("plain: %s\n", thingif_version());
    return thingif_destroy(t) == THINGIF_OK ? 0 : 1;
}
EOF_C
mkdir -p "$tmp/storage"
plain_path=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -i swift | paste -sd: -)
cc_bin=$(command -v cc)
[ -z "$run" ] || cc_bin=$build_dir/target-cc
if ! PATH="$plain_path" "$cc_bin" -std=c11 -I"$(dirname "$0")/../include" "$tmp/plain.c" "$build_dir/libthingif.a" \
        $(pkg-config --libs libmosquitto jansson libcrypto) -lm -lpthread -o "$tmp/plain" 2>"$tmp/plain.log"; then
    echo "embedded: FAIL: libthingif.a does not link with plain cc:" >&2
    head -20 "$tmp/plain.log" >&2
    fail=1
elif readelf -d "$tmp/plain" | grep 'libswift' >/dev/null; then
    echo "embedded: FAIL: the plain C program needs a Swift runtime library" >&2
    fail=1
elif ! out=$(env -i PATH="$plain_path" $run "$tmp/plain" "$tmp/storage" 2>&1) || [ "${out#plain: }" = "$out" ]; then
    echo "embedded: FAIL: the plain C program did not run: $out" >&2
    fail=1
else
    echo "embedded: libthingif.a + cc: $out ($(stat -c %s "$tmp/plain") bytes, needs: $(readelf -d "$tmp/plain" \
        | sed -n 's/.*Shared library: \[\(.*\)\].*/\1/p' | tr '\n' ' '))"
fi

[ "$fail" -eq 0 ] && echo "embedded: ok"
exit "$fail"
