#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Installs what building and testing thingif needs, when it is missing:
# libmosquitto-dev, libjansson-dev, libsqlite3-dev, libssl-dev (libcrypto for the
# hub's password KDF and token hashes), libpq-dev (the hub's PostgreSQL store)
# and postgresql (the server the PostgreSQL tests start, as the postgres user
# when root), openssl and curl (the HTTPS test), mosquitto (the broker the tests start),
# mosquitto-clients, cmake, ninja-build, pkg-config, valgrind, doxygen, clang-format (the C
# formatting check), chromium and chromium-driver (the dashboard's browser test,
# python/tests/test_dashboard.py; selenium comes from pip in its virtual environment),
# tzdata (the zones timer triggers read), swupdate and cpio (the update demo
# with a real installer, scripts/run-demo.sh --update --installer swupdate),
# and for the cross builds
# (scripts/test-cross.sh) gcc-aarch64-linux-gnu, gcc-arm-linux-gnueabihf and
# qemu-user; the boards' libraries come from scripts/cross-sysroot.sh, which
# installs nothing.
# The Swift toolchain (6.x) must already be on PATH.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep "install ok installed" >/dev/null; }
for p in libmosquitto-dev libjansson-dev libsqlite3-dev libssl-dev libpq-dev postgresql openssl curl mosquitto mosquitto-clients cmake ninja-build pkg-config valgrind doxygen clang-format chromium chromium-driver tzdata swupdate cpio gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf qemu-user; do
  have_pkg "$p" || need+=("$p")
done

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The broker package may start a system-wide mosquitto on port 1883, and the
# postgresql package a cluster on 5432; the tests and the demo start their
# own on free ports and need neither. The swupdate package enables its
# daemon's units (swupdate.service, .socket, swupdate-progress.service): where
# systemd runs, they are stopped here (the demo runs swupdate -i itself, a
# process of its own with its sockets in its own folder); elsewhere
# policy-rc.d or the missing init keeps them from starting.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
  for u in swupdate.socket swupdate.service swupdate-progress.service; do
    if systemctl is-active --quiet "$u" 2>/dev/null; then
      echo "install-deps: stopping $u (the tests run swupdate themselves)"
      $sudo systemctl stop "$u" || true
    fi
  done
fi

if ! command -v swift >/dev/null 2>&1; then
  for d in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
    [ -x "$d/swift" ] && { echo "install-deps: add $d to PATH"; break; }
  done
  echo "install-deps: a Swift 6 toolchain is required (swift not found on PATH)" >&2
  exit 1
fi
