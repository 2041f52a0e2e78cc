#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# bench/cross.sh - the board builds (cmake/toolchains/, Release, Embedded
# Swift) beside the native one (figures, not pass/fail):
#   the stripped size of libthingif.so per architecture (goal: 300 KB or
#   less on each) and what it needs (NEEDED);
#   a sanity figure for the board code: aircon under qemu-user (as the
#   test appliance, aircon_test --quiet --no-state), one
#   architecture after the other, takes N commands at 64 in flight from
#   bench/driver.c (which answers every request 204 as the hub does) on a
#   native secured broker; commands per second beside native aircon. qemu
#   translates every instruction on this x86_64 machine, so the ratio says
#   that the board code runs the protocol correctly at some speed, not how
#   fast a board is.
#
# usage: bench/cross.sh [-n N] [--no-build]    (default N 2000)
#   builds build-bench (native), build-aarch64 and build-armv7 unless
#   --no-build; the hub onboards each appliance once (THINGIF_HUB_BIN, else
#   SwiftPM's debug thingif-hub from `swift build --show-bin-path`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

. bench/lib.sh
bench_init 100 "$@"
hub_bin=${THINGIF_HUB_BIN:-$(swift build --show-bin-path)/thingif-hub}
[ -x "$hub_bin" ] || { echo "bench: $hub_bin not found (swift build --product thingif-hub, or THINGIF_HUB_BIN)" >&2; exit 1; }

# name  build folder  toolchain  sysroot (Debian arch)  emulator  strip
archs=(
    "x86_64 build-bench - - - strip"
    "aarch64 build-aarch64 aarch64-linux-gnu arm64 qemu-aarch64 aarch64-linux-gnu-strip"
    "armv7 build-armv7 arm-linux-gnueabihf armhf qemu-arm arm-linux-gnueabihf-strip"
)

# --- build -----------------------------------------------------------------
if [ "$build" = 1 ]; then
    for a in "${archs[@]}"; do
        read -r name dir toolchain deb _ _ <<<"$a"
        echo "bench: building $name ($dir, Release) …" >&2
        opts=(-DCMAKE_BUILD_TYPE=Release)
        if [ "$toolchain" != - ]; then
            bash scripts/cross-sysroot.sh "$deb" >/dev/null
            opts+=(-DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/$toolchain.cmake")
        fi
        cmake -G Ninja -S . -B "$dir" "${opts[@]}" >"$tmp/build-$name.log" 2>&1 \
            && cmake --build "$dir" --target thingif aircon_test >>"$tmp/build-$name.log" 2>&1 \
            || { tail -n 40 "$tmp/build-$name.log" >&2; exit 1; }
    done
fi
cc -O2 -std=c11 bench/driver.c -o "$tmp/driver" -ljansson -lmosquitto -lpthread

# --- sizes -----------------------------------------------------------------
abi=$(sed -n 's/^#define THINGIF_ABI_VERSION \([0-9]*\).*/\1/p' include/thingif.h)
echo
printf '%-8s %14s %14s  %s\n' "arch" "stripped (B)" "as built (B)" "NEEDED"
for a in "${archs[@]}"; do
    read -r name dir _ _ _ strip <<<"$a"
    lib=$(readlink -f "$dir/libthingif.so.$abi" 2>/dev/null || true)
    [ -f "$lib" ] || { printf '%-8s (not built: %s)\n' "$name" "$dir"; continue; }
    "$strip" -o "$tmp/$name.so" "$lib"
    size=$(stat -c %s "$tmp/$name.so")
    printf '%-8s %14s %14s  %s%s\n' "$name" "$size" "$(stat -c %s "$lib")" \
        "$(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\].*/\1/p' | tr '\n' ' ')" \
        "$([ "$size" -le 307200 ] || echo ' OVER the 300 KB goal')"
done

# --- the command throughput, each appliance in turn ----------------------------
start_broker
start_hub "$hub_bin"
declare -A rate
for a in "${archs[@]}"; do
    read -r name dir _ deb emu _ <<<"$a"
    [ -x "$dir/aircon_test" ] || continue
    run=()
    [ "$emu" = - ] || run=("$emu" -L "$root/build/sysroot-$deb")
    storage="$tmp/aircon-$name"
    if ! kill -0 "$hub_pid" 2>/dev/null; then start_hub "$hub_bin"; fi
    "${run[@]}" "$dir/aircon_test" --host 127.0.0.1 --port "$port" --vendor-thing-id "AC-CROSS-$name" \
        --storage "$storage" >"$tmp/onboard-$name.log" 2>&1 &
    pids+=($!)
    wait_line "$tmp/onboard-$name.log" "aircon: connected" "$!" 60
    stop "$!"
    stop "$hub_pid"
    topic=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mqttEndpoint"]["mqttTopic"])' \
        "$storage/identity.json")
    "${run[@]}" "$dir/aircon_test" --host 127.0.0.1 --port "$port" --vendor-thing-id "AC-CROSS-$name" \
        --storage "$storage" --quiet --no-state >"$tmp/aircon-$name.log" 2>&1 &
    pids+=($!)
    a_pid=$!
    wait_line "$tmp/aircon-$name.log" "aircon: connected" "$a_pid" 60
    echo "bench: $name aircon${run[*]:+ under ${run[0]}}, $n commands at window 64 …" >&2
    "$tmp/driver" --port "$port" --topic "$topic" -n "$n" -w 64 >"$tmp/$name.out" 2>"$tmp/$name.err" \
        || { echo "bench: the driver failed ($name):" >&2; cat "$tmp/$name.err" >&2; exit 1; }
    stop "$a_pid"
    rate[$name]=$(sed -n 's/.*cmd_per_s=\([0-9]*\).*/\1/p' "$tmp/$name.out")
done
echo
printf '%-8s %16s %10s\n' "arch" "commands/s (w64)" "x native"
for a in "${archs[@]}"; do
    read -r name _ _ _ emu _ <<<"$a"
    [ -n "${rate[$name]:-}" ] || continue
    printf '%-8s %16s %10s  %s\n' "$name" "${rate[$name]}" \
        "$(awk -v a="${rate[$name]}" -v b="${rate[x86_64]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')" \
        "$([ "$emu" = - ] && echo native || echo "under $emu (a sanity figure, not a board's speed)")"
done
