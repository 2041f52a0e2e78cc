#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Makes a target root file system for cross-building and running libthingif:
# Debian's own packages of the board's architecture (libc6, libc6-dev,
# linux-libc-dev, libgcc-s1, libmosquitto1 + -dev, libjansson4 + -dev,
# libssl3 + libssl-dev (libcrypto: the thing's own TLS key and CSR),
# libcrypt1 + -dev), fetched with `apt-get download` and unpacked
# with `dpkg -x` into one folder.
#
# Nothing is installed on this machine: apt runs with a private state and
# cache folder inside the sysroot's parent, for that one architecture, so
# dpkg's own database, its lock and the machine's multiarch setting are
# untouched (armhf multiarch can hit version skew against the amd64
# packages already installed; a private download has none). The compilers
# (gcc-aarch64-linux-gnu, gcc-arm-linux-gnueabihf) and qemu-user come from
# scripts/install-deps.sh --cross.
#
# The folder is the sysroot of cmake/toolchains/<arch>.cmake
# (-DTHINGIF_SYSROOT=…, default build/sysroot-<arch>) and the -L root of
# qemu-<arch> when the tests run the board's programs. Making it again is
# cheap: an existing sysroot whose package list is unchanged is kept.
#
# usage: scripts/cross-sysroot.sh ARCH [DIR]
#   ARCH  arm64 (aarch64-linux-gnu) or armhf (arm-linux-gnueabihf)
#   DIR   where to put it (default: build/sysroot-ARCH in the source folder)
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
arch=${1:-}
case "$arch" in
    arm64 | armhf) ;;
    -h | --help | "")
        sed -n '4,25s/^# \{0,1\}//p' "$0"
        [ -n "$arch" ] && exit 0 || exit 2
        ;;
    *)
        echo "cross-sysroot: unknown architecture '$arch' (arm64 or armhf)" >&2
        exit 2
        ;;
esac
dir=${2:-$src/build/sysroot-$arch}
pkgs=(libc6 libc6-dev linux-libc-dev libgcc-s1 libcrypt1 libcrypt-dev
    libmosquitto1 libmosquitto-dev libjansson4 libjansson-dev libssl3 libssl-dev)
stamp="$dir/.thingif-sysroot"
want="$arch ${pkgs[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "cross-sysroot: $dir is up to date"
    exit 0
fi

work="$dir.apt"
rm -rf "$dir" "$work"
mkdir -p "$dir" "$work/state/lists/partial" "$work/cache/archives/partial" "$work/debs"
apt_opts=(-o "Dir::State=$work/state" -o "Dir::Cache=$work/cache"
    -o "Dir::State::status=$work/state/status"
    -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
    -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" -q)
: > "$work/state/status"
echo "cross-sysroot: apt-get update (private lists for $arch in $work)"
for try in 1 2 3; do
    apt-get "${apt_opts[@]}" update > "$work/update.log" 2>&1 && break
    if [ "$try" -eq 3 ]; then
        # A mirror in mid-sync fails one index (often -security); the others
        # were read, and the download below says whether they are enough.
        echo "cross-sysroot: warning: apt-get update failed; going on with the indexes it did read:" >&2
        grep -E '^(E|W):' "$work/update.log" >&2 || true
        break
    fi
    sleep 5
done
echo "cross-sysroot: apt-get download ${pkgs[*]}"
(cd "$work/debs" && apt-get "${apt_opts[@]}" download "${pkgs[@]}" > "$work/download.log" 2>&1) \
    || { cat "$work/download.log" >&2; exit 1; }
for deb in "$work/debs"/*.deb; do
    dpkg -x "$deb" "$dir"
done
# Some of Debian's links are absolute (/lib/ld-linux-aarch64.so.1 ->
# /lib/aarch64-linux-gnu/…): made relative inside the sysroot, so the
# linker and qemu -L find the board's file, not this machine's.
find "$dir" -type l | while read -r link; do
    target=$(readlink "$link")
    case "$target" in
        /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$dir$target")" "$link" ;;
    esac
done
# libc.so and friends are linker scripts naming absolute paths; GNU ld looks
# those up inside --sysroot, so they stay as they are.
(cd "$work/debs" && ls *.deb) > "$dir/.thingif-packages"
rm -rf "$work"
echo "$want" > "$stamp"
echo "cross-sysroot: $dir ($(du -sh "$dir" | cut -f1)): $(tr '\n' ' ' < "$dir/.thingif-packages")"
