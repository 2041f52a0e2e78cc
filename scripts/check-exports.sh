#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Checks the shared library's ABI surface: only thingif_* symbols are
# defined in its dynamic symbol table, its SONAME is libthingif.so.N with N
# the header's THINGIF_ABI_VERSION, and it
# does not pull in Foundation.
#
# usage: scripts/check-exports.sh path/to/libthingif.so
set -euo pipefail

lib=${1:?usage: check-exports.sh path/to/libthingif.so}
[ -f "$lib" ] || { echo "exports: no such file: $lib" >&2; exit 2; }
fail=0

symbols=$(nm -D --defined-only "$lib" | awk '{print $NF}')
total=$(printf '%s\n' "$symbols" | grep -c . || true)
others=$(printf '%s\n' "$symbols" | grep -v '^thingif_' | grep . || true)
echo "exports: $total defined dynamic symbols in $lib"
if [ -n "$others" ]; then
    echo "exports: FAIL: symbols not starting with thingif_:" >&2
    printf '  %s\n' $others >&2
    fail=1
fi

abi=$(sed -n 's/^#define THINGIF_ABI_VERSION \([0-9]*\).*/\1/p' "$(dirname "$0")/../include/thingif.h")
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
echo "exports: SONAME $soname"
if [ -z "$abi" ] || [ "$soname" != "libthingif.so.$abi" ]; then
    echo "exports: FAIL: SONAME is '$soname', expected libthingif.so.$abi (THINGIF_ABI_VERSION)" >&2
    fail=1
fi

if ldd "$lib" | grep -i 'libFoundation'; then
    echo "exports: FAIL: the library links Foundation" >&2
    fail=1
fi

[ "$fail" -eq 0 ] && echo "exports: ok"
exit "$fail"
