#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Makes the per-architecture package a firmware build without a Swift
# toolchain consumes (Yocto: thingif-prebuilt; Buildroot:
# BR2_PACKAGE_THINGIF_PREBUILT): cross-builds libthingif for the board
# (Release, Embedded Swift, cmake/toolchains/<arch>.cmake) and packs the
# tree of `cmake --install --prefix /usr`:
#
#   usr/lib/libthingif.so{,.ABI,.VERSION}  usr/lib/libthingif.a
#   usr/include/thingif.h                  usr/lib/pkgconfig/thingif.pc
#   usr/lib/cmake/thingif/                 (find_package(thingif))
#   usr/share/doc/thingif/LICENSE, NOTICE  (the recipes' licence files)
#
# into build/thingif-<version>-<arch>.tar.gz.
#
# usage: deploy/make-prebuilt.sh aarch64|armv7
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
arch=${1:-}
case "$arch" in
    aarch64) toolchain=aarch64-linux-gnu deb=arm64 ;;
    armv7) toolchain=arm-linux-gnueabihf deb=armhf ;;
    *) sed -n '4,17s/^# \{0,1\}//p' "$0"; exit 2 ;;
esac
version=$(sed -n 's/^#define THINGIF_VERSION_STRING "\([0-9.]*\)".*/\1/p' include/thingif.h)
bash scripts/cross-sysroot.sh "$deb"
cmake -G Ninja -S . -B "build-$arch" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/$toolchain.cmake" -DCMAKE_INSTALL_LIBDIR=lib > /dev/null
cmake --build "build-$arch" --target thingif thingif_static
stage=$(mktemp -d "${TMPDIR:-/tmp}/thingif-prebuilt.XXXXXX")
trap 'rm -rf "$stage"' EXIT
DESTDIR="$stage" cmake --install "build-$arch" --prefix /usr > /dev/null
# Installed as built; the firmware build strips (a stripped .so has no
# symbols for a crash report).
out="$src/build/thingif-$version-$arch.tar.gz"
tar -C "$stage" --owner=0 --group=0 -czf "$out" usr
echo "make-prebuilt: $out"
tar -tzvf "$out" | awk '{print "  " $3 "  " $6 ($7 ? " " $7 " " $8 : "")}'
