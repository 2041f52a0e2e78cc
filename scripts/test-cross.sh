#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# The cross stage of scripts/test.sh: for each board architecture, builds
# libthingif.so, libthingif.a, aircon and the C tests with
# cmake/toolchains/<arch>.cmake (Embedded Swift, no Swift runtime), then
# runs ctest's C tests with the board's programs under qemu-user against a
# native mosquitto and thingif-hub: the demo round trip (aircon), the
# exports, the header, the header against the exports, install +
# pkg-config + find_package (the outside project built for the board), no
# Swift runtime and libthingif.a with the board's plain cc, and the
# 32-bit-safe times (wide_time_2040: a timer trigger in 2040).
#
# Release builds, so the sizes printed are the shipped ones. Prints the
# wall time of each architecture and of the stage.
#
# usage: scripts/test-cross.sh [--hub-bin-dir DIR] [ARCH ...]
#   ARCH          aarch64 (arm-64) and/or armv7 (arm-linux-gnueabihf);
#                 default: both
#   --hub-bin-dir the folder with the SwiftPM-built thingif-hub and thingif
#                 (swift build --show-bin-path); without it the demo tests
#                 report themselves skipped
set -euo pipefail
cd "$(dirname "$0")/.."

hub_dir=""
archs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --hub-bin-dir) hub_dir=$2; shift 2 ;;
        -h | --help) sed -n '4,23s/^# \{0,1\}//p' "$0"; exit 0 ;;
        aarch64 | armv7) archs+=("$1"); shift ;;
        *) echo "test-cross: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ ${#archs[@]} -gt 0 ] || archs=(aarch64 armv7)

stage_start=$(date +%s)
for arch in "${archs[@]}"; do
    case "$arch" in
        aarch64) toolchain=aarch64-linux-gnu deb=arm64 ;;
        armv7) toolchain=arm-linux-gnueabihf deb=armhf ;;
    esac
    start=$(date +%s)
    echo "== cross $arch: sysroot, build (cmake/toolchains/$toolchain.cmake), ctest under qemu-user"
    bash scripts/cross-sysroot.sh "$deb"
    cmake -G Ninja -S . -B "build-$arch" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/$toolchain.cmake" \
        -DTHINGIF_HUB_BIN_DIR="$hub_dir" > /dev/null
    cmake --build "build-$arch"
    built=$(date +%s)
    ctest --test-dir "build-$arch" --output-on-failure
    echo "== cross $arch: build $((built - start)) s, ctest $(($(date +%s) - built)) s"
done
echo "== cross stage: $(($(date +%s) - stage_start)) s for ${archs[*]}"
