#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# The stripped size of the Embedded libthingif.so per architecture (Release,
# -Osize, every feature compiled in: the shipped build) against its budget
# in scripts/size-budget, and what each component and source file of the
# library costs in it (scripts/size_components.py: the linked symbols'
# sizes, given to the file that declares them).
#
# The budget is a ratchet towards the 300 KB goal (307,200 bytes): --check
# fails when a library is larger than its architecture's budget, so a change
# that grows the library says so in the budget file of its own commit, and
# asks the budget be lowered when a library has shrunk 2 KiB or more below
# it, so what was won stays won. scripts/test.sh runs it with --check after
# the cross stage.
#
# usage: scripts/size.sh [--check] [--no-build] [--components] [--features]
#                        [ARCH ...]
#   ARCH          x86_64 (this machine), aarch64, armv7; default: all three
#   --check       exit 1 when a library is over its budget, or 2 KiB or
#                 more under it
#   --no-build    use the build folders as they are (build-size,
#                 build-aarch64, build-armv7)
#   --components  print the cost per component and the largest files
#   --features    also build with -DTHINGIF_GATEWAYS=OFF (and, apart,
#                 -DTHINGIF_UPDATES=OFF) and print what the
#                 gateways and the updates cost (x86_64 only; about 60 s more)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

check=0 build=1 components=0 features=0
archs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --check) check=1; shift ;;
        --no-build) build=0; shift ;;
        --components) components=1; shift ;;
        --features) features=1; shift ;;
        -h | --help) sed -n '4,27s/^# \{0,1\}//p' "$0"; exit 0 ;;
        x86_64 | aarch64 | armv7) archs+=("$1"); shift ;;
        *) echo "size: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ ${#archs[@]} -gt 0 ] || archs=(x86_64 aarch64 armv7)

goal=307200
abi=$(sed -n 's/^#define THINGIF_ABI_VERSION \([0-9]*\).*/\1/p' include/thingif.h)
nm_bin=$(command -v llvm-nm || command -v nm)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/thingif-size.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Builds libthingif (Release) into DIR with OPTIONS; prints the log's end on failure.
build_lib() {
    local dir=$1
    shift
    cmake -G Ninja -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >"$tmp/build.log" 2>&1 \
        && cmake --build "$dir" --target thingif >>"$tmp/build.log" 2>&1 \
        || { tail -n 40 "$tmp/build.log" >&2; exit 1; }
}

# The stripped size of DIR's library with STRIP.
stripped_size() {
    local lib
    lib=$(readlink -f "$1/libthingif.so.$abi")
    "$2" -o "$tmp/stripped.so" "$lib"
    stat -c %s "$tmp/stripped.so"
}

status=0
printf '%-8s %14s %14s %12s  %s\n' "arch" "stripped (B)" "budget (B)" "goal (B)" "verdict"
for arch in "${archs[@]}"; do
    case "$arch" in
        x86_64) dir=build-size deb="" toolchain="" strip=strip ;;
        aarch64) dir=build-aarch64 deb=arm64 toolchain=aarch64-linux-gnu strip=aarch64-linux-gnu-strip ;;
        armv7) dir=build-armv7 deb=armhf toolchain=arm-linux-gnueabihf strip=arm-linux-gnueabihf-strip ;;
    esac
    if [ "$build" = 1 ]; then
        if [ -n "$toolchain" ]; then
            bash scripts/cross-sysroot.sh "$deb" >/dev/null
            build_lib "$dir" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/$toolchain.cmake"
        else
            build_lib "$dir"
        fi
    fi
    [ -e "$dir/libthingif.so.$abi" ] || { echo "size: no $dir/libthingif.so.$abi (build it, or drop --no-build)" >&2; exit 2; }
    grep -q 'CMAKE_BUILD_TYPE:STRING=Release$' "$dir/CMakeCache.txt" \
        || { echo "size: $dir is not a Release build: its size is not the shipped one" >&2; exit 2; }
    size=$(stripped_size "$dir" "$strip")
    budget=$(awk -v a="$arch" '$1 == a {print $2}' scripts/size-budget)
    [ -n "$budget" ] || { echo "size: scripts/size-budget has no line for $arch" >&2; exit 2; }
    if [ "$size" -gt "$budget" ]; then
        verdict="OVER its budget by $((size - budget)) B: make it smaller, or raise the budget in scripts/size-budget and say why in the commit"
        status=1
    elif [ $((budget - size)) -ge 2048 ]; then
        verdict="$((budget - size)) B under its budget: lower it to $(( (size + 1023) / 1024 * 1024 )) in scripts/size-budget"
        status=1
    else
        verdict="within its budget"
    fi
    [ "$size" -le "$goal" ] && verdict="$verdict, within the goal" || verdict="$verdict, $((size - goal)) B over the goal"
    printf '%-8s %14s %14s %12s  %s\n' "$arch" "$(printf "%'d" "$size")" "$(printf "%'d" "$budget")" \
        "$(printf "%'d" "$goal")" "$verdict"
    if [ "$components" = 1 ]; then
        python3 scripts/size_components.py --lib "$(readlink -f "$dir/libthingif.so.$abi")" --stripped "$size" \
            --sources Sources/ThingIF Sources/ThingIFC --nm "$nm_bin" --demangle swift-demangle | sed 's/^/  /'
    fi
    if [ "$features" = 1 ] && [ "$arch" = x86_64 ]; then
        build_lib build-size-nogw -DTHINGIF_GATEWAYS=OFF
        without=$(stripped_size build-size-nogw strip)
        echo "  gateways (-DTHINGIF_GATEWAYS=OFF): $(printf "%'d" "$without") B without them, so they cost $(printf "%'d" $((size - without))) B"
        build_lib build-size-noupd -DTHINGIF_UPDATES=OFF
        without=$(stripped_size build-size-noupd strip)
        echo "  updates (-DTHINGIF_UPDATES=OFF): $(printf "%'d" "$without") B without them, so they cost $(printf "%'d" $((size - without))) B"
    fi
done
if [ "$check" = 1 ]; then
    [ "$status" -eq 0 ] && echo "size: ok" || echo "size: FAIL (scripts/size-budget)" >&2
    exit "$status"
fi
