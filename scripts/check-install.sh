#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Installs a thingif build into a temporary prefix, builds examples-c/aircon.c
# as an OUTSIDE project against that prefix only, and runs the demo round trip
# (scripts/run-demo.sh: a real mosquitto, thingif-hub, the thingif CLI sends
# three commands) with that appliance. The temporary folder is removed on exit.
#
# usage: scripts/check-install.sh --build-dir DIR --mode pkgconfig|find-package [--cc CC]
#                                 [--hub PATH --cli PATH | --no-hub] [--keep]
#   --build-dir DIR  a built CMake build folder of thingif
#   --cc CC          the C compiler (default cc)
#   --hub, --cli     the SwiftPM-built thingif-hub and thingif for the demo
#                    (default: run-demo.sh's); --no-hub: skip the demo, exit 77
#   --mode pkgconfig      cc aircon.c $(pkg-config --cflags --libs thingif)
#                         with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig
#   --mode find-package   cmake/consumer/CMakeLists.txt: find_package(thingif)
#                         and thingif::thingif, with CMAKE_PREFIX_PATH=PREFIX
#   --keep           keep the temporary folder (its path is printed)
# In a cross build's ctest, THINGIF_TARGET_RUN (the emulator), and
# THINGIF_TOOLCHAIN_FILE (for the find-package consumer) are set: the
# outside project is built for the board and run under qemu-user.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build_dir="" mode="" cc=cc keep=0
demo_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build_dir=$2; shift 2 ;;
        --mode) mode=$2; shift 2 ;;
        --cc) cc=$2; shift 2 ;;
        --hub|--cli) demo_args+=("$1" "$2"); shift 2 ;;
        --no-hub) demo_args+=("$1"); shift ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '4,21s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "check-install: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$build_dir" ] || { echo "check-install: --build-dir DIR is required" >&2; exit 2; }
case "$mode" in pkgconfig|find-package) ;; *) echo "check-install: --mode pkgconfig|find-package" >&2; exit 2 ;; esac
build_dir=$(cd "$build_dir" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/thingif-install.XXXXXX")
cleanup() { if [ "$keep" -eq 1 ]; then echo "check-install: kept $tmp"; else rm -rf "$tmp"; fi; }
trap cleanup EXIT

prefix=$tmp/prefix
echo "check-install: cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; exit 1; }

# What a package must hold. The version is the header's.
version=$(sed -n 's/^#define THINGIF_VERSION_STRING "\([0-9.]*\)".*/\1/p' "$(dirname "$0")/../include/thingif.h")
abi=$(sed -n 's/^#define THINGIF_ABI_VERSION \([0-9]*\).*/\1/p' "$(dirname "$0")/../include/thingif.h")
[ -n "$version" ] || { echo "check-install: no THINGIF_VERSION_STRING in include/thingif.h" >&2; exit 1; }
fail=0
for f in lib/libthingif.so "lib/libthingif.so.$abi" "lib/libthingif.so.$version" lib/libthingif.a \
         include/thingif.h lib/pkgconfig/thingif.pc \
         lib/cmake/thingif/thingifConfig.cmake lib/cmake/thingif/thingifConfigVersion.cmake \
         lib/cmake/thingif/thingifTargets.cmake share/doc/thingif/LICENSE share/doc/thingif/NOTICE; do
    [ -e "$prefix/$f" ] || { echo "check-install: FAIL: $f not installed" >&2; fail=1; }
done
[ "$(readlink "$prefix/lib/libthingif.so")" = "libthingif.so.$abi" ] \
    || { echo "check-install: FAIL: lib/libthingif.so does not point to libthingif.so.$abi" >&2; fail=1; }
[ "$(readlink "$prefix/lib/libthingif.so.$abi")" = "libthingif.so.$version" ] \
    || { echo "check-install: FAIL: lib/libthingif.so.$abi does not point to libthingif.so.$version" >&2; fail=1; }
[ "$fail" -eq 0 ] || exit 1

# The outside project: a copy of the example, nothing from the source tree
# on its include or library path.
app=$tmp/app
mkdir -p "$app"
# aircon.c, the simulated A/B board it takes updates into and the SWUpdate
# installer it may hand them to.
cp "$src/examples-c/aircon.c" "$src/examples-c/ab_board.c" "$src/examples-c/ab_board.h" \
    "$src/examples-c/swupdate_installer.c" "$src/examples-c/swupdate_installer.h" "$app/"
case "$mode" in
pkgconfig)
    export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
    echo "check-install: pkg-config thingif $(pkg-config --modversion thingif):" \
         "$(pkg-config --cflags --libs thingif)"
    # The -rpath makes the program find the installed library, as an
    # ldconfig'd system path would.
    # shellcheck disable=SC2046
    "$cc" -Wall -Wextra -Werror -o "$app/aircon" "$app/aircon.c" "$app/ab_board.c" "$app/swupdate_installer.c" \
        $(pkg-config --cflags --libs thingif) -Wl,-rpath,"$prefix/lib"
    aircon=$app/aircon
    ;;
find-package)
    cp "$src/cmake/consumer/CMakeLists.txt" "$app/"
    toolchain=()
    if [ -n "${THINGIF_TOOLCHAIN_FILE:-}" ]; then
        # The board's toolchain, finding packages outside its sysroot too
        # (the prefix is in this machine's /tmp).
        toolchain=(-DCMAKE_TOOLCHAIN_FILE="$THINGIF_TOOLCHAIN_FILE" -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=BOTH)
    fi
    cmake -G Ninja -S "$app" -B "$app/build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
        ${toolchain[@]+"${toolchain[@]}"} >"$tmp/consumer.log" 2>&1 \
        || { cat "$tmp/consumer.log" >&2; exit 1; }
    cmake --build "$app/build" >>"$tmp/consumer.log" 2>&1 \
        || { cat "$tmp/consumer.log" >&2; exit 1; }
    aircon=$app/build/aircon
    ;;
esac

# It must run on the installed library, not on the build folder's. A
# program for the board is asked through its own dynamic loader under
# qemu-user (what ldd does).
target_ldd() {
    if [ -n "${THINGIF_TARGET_RUN:-}" ]; then
        # shellcheck disable=SC2086
        ${THINGIF_TARGET_RUN} -E LD_TRACE_LOADED_OBJECTS=1 "$1"
    else
        ldd "$1"
    fi
}
resolved=$(target_ldd "$aircon" | awk -v so="libthingif.so.$abi" '$1 == so {print $3}')
echo "check-install: aircon uses $resolved"
if [ "$resolved" != "$prefix/lib/libthingif.so.$abi" ]; then
    echo "check-install: FAIL: expected $prefix/lib/libthingif.so.$abi" >&2
    target_ldd "$aircon" >&2
    exit 1
fi

"$src/scripts/run-demo.sh" --build-dir "$build_dir" --aircon "$aircon" ${demo_args[@]+"${demo_args[@]}"}
