#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Proves that a libthingif.so built with -DTHINGIF_STATIC_STDLIB=ON needs no
# Swift toolchain at run time:
#   1. ldd lists no libswift* library;
#   2. the demo round trip passes while the C appliance runs in a private mount
#      namespace in which the directory holding libswiftCore.so is hidden
#      under an empty tmpfs. Only the appliance runs there: mosquitto,
#      thingif-hub and the thingif CLI (Swift programs, linked dynamically)
#      run outside.
# Needs unshare(1) and the right to mount (root); exits 77 (skipped) without.
#
# usage: scripts/check-static-stdlib.sh --build-dir DIR [--swiftc SWIFTC] [--hub PATH --cli PATH | --no-hub]
#   --hub, --cli  the SwiftPM-built thingif-hub and thingif for the demo
#                 (default: run-demo.sh's); --no-hub: skip the demo, exit 77
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build_dir="" swiftc=swiftc
demo_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build_dir=$2; shift 2 ;;
        --swiftc) swiftc=$2; shift 2 ;;
        --hub|--cli) demo_args+=("$1" "$2"); shift 2 ;;
        --no-hub) demo_args+=("$1"); shift ;;
        -h|--help) sed -n '4,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "static-stdlib: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$build_dir" ] || { echo "static-stdlib: --build-dir DIR is required" >&2; exit 2; }
build_dir=$(cd "$build_dir" && pwd)
abi=$(sed -n 's/^#define THINGIF_ABI_VERSION \([0-9]*\).*/\1/p' "$(dirname "$0")/../include/thingif.h")
lib=$build_dir/libthingif.so.$abi
aircon=$build_dir/aircon
[ -f "$lib" ] && [ -x "$aircon" ] || { echo "static-stdlib: build $build_dir first" >&2; exit 2; }

# 1. No Swift runtime among the library's dependencies.
echo "static-stdlib: ldd $lib"
ldd "$lib" | sed 's/^/  /'
if ldd "$lib" | grep 'libswift' >/dev/null; then
    echo "static-stdlib: FAIL: the library needs the Swift runtime" >&2
    exit 1
fi

# 2. The directory that holds libswiftCore.so, from the toolchain itself.
runtime_dir=$("$swiftc" -print-target-info | python3 -c '
import json, os, sys
for d in json.load(sys.stdin)["paths"]["runtimeLibraryPaths"]:
    if os.path.exists(os.path.join(d, "libswiftCore.so")):
        print(os.path.realpath(d)); break')
[ -n "$runtime_dir" ] || { echo "static-stdlib: libswiftCore.so not found in the toolchain" >&2; exit 2; }
echo "static-stdlib: hiding $runtime_dir from the appliance"

if ! unshare -m sh -c "mount -t tmpfs none '$runtime_dir'" 2>/dev/null; then
    echo "static-stdlib: SKIPPED: cannot mount in a private namespace (needs root and unshare)"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/thingif-static.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# run-demo.sh starts this in place of aircon, with aircon's arguments. The
# exec chain (unshare, sh, aircon) keeps one PID, so run-demo's SIGTERM
# reaches the appliance.
cat > "$tmp/aircon-hidden" <<WRAP
#!/bin/sh
exec unshare -m sh -c '
    mount -t tmpfs none "$runtime_dir" || exit 97
    if [ -e "$runtime_dir/libswiftCore.so" ]; then echo "libswiftCore.so still visible" >&2; exit 98; fi
    echo "the Swift runtime directory is hidden here: $runtime_dir (\$(ls -A "$runtime_dir" | wc -l) entries)" >&2
    exec "\$0" "\$@"' "$aircon" "\$@"
WRAP
chmod +x "$tmp/aircon-hidden"

"$src/scripts/run-demo.sh" --build-dir "$build_dir" --aircon "$tmp/aircon-hidden" ${demo_args[@]+"${demo_args[@]}"}
