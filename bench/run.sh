#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# bench/run.sh - prints figures for libthingif (not pass/fail):
#   1. footprint: libthingif.so size (as built and stripped), its NEEDED
#      libraries, the Swift runtime it resolves to, and the resident memory of
#      the aircon example idle after connecting;
#   2. throughput and latency: N commands published at full speed (QoS 1) on
#      the thing's topic, timed from publish to the action-results request
#      (bench/loadgen.c), once with a trivial handler and once with N/10
#      commands whose handler also uploads the state, and N/10 commands sent
#      one at a time (each after the previous one's results: no queueing).
#   The hub's own CPU per command (all its threads, /proc/PID/task) is
#   printed beside each run: it answers every results request, with SQLite
#   on this machine's disk. bench/loadgen publishes commands straight on the
#   thing's topic, which the hub never issued, so the hub answers each
#   results request 404 COMMAND_NOT_FOUND (after the same token and thing
#   checks): that column is the cost of a refused results request, not of
#   a command through the hub. bench/hubs.sh measures commands end to end
#   through the hub's REST API.
# Everything runs on 127.0.0.1: a mosquitto on a free port and thingif-hub
# from the release SwiftPM build, its SQLite database in the scratch folder.
#
# usage: bench/run.sh [-n N] [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

. bench/lib.sh
bench_init 10 "$@"
n_state=$((n / 10))

# --- build ---------------------------------------------------------------
build_bench "$build"
lib=$(ls build-bench/libthingif.so.*.*.* | head -1)   # libthingif.so.MAJOR.MINOR.PATCH
[ -f "$lib" ] || { echo "bench: build-bench has no libthingif.so (run without --no-build)" >&2; exit 1; }
cc -O2 -std=c11 -Iinclude bench/loadgen.c -o "$tmp/loadgen" \
    -L build-bench -lthingif -ljansson -lmosquitto -lpthread -ldl -rdynamic \
    -Wl,-rpath,"$root/build-bench"

# --- 1. footprint (files) ------------------------------------------------
size_of() { stat -c %s "$1"; }
kib() { awk -v b="$1" 'BEGIN { printf "%.0f KiB", b / 1024 }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

lib_size=$(size_of "$lib")
strip -o "$tmp/libthingif.stripped" "$lib"
lib_stripped=$(size_of "$tmp/libthingif.stripped")
# The static archive as a firmware build links it (debug sections stripped).
archive_stripped=""
if [ -f build-bench/libthingif.a ]; then
    strip --strip-debug -o "$tmp/libthingif.a" build-bench/libthingif.a
    archive_stripped=$(kib "$(size_of "$tmp/libthingif.a")")
fi
needed=$(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
swift_total=0
swift_libs=""
while read -r name path; do
    real=$(readlink -f "$path")
    swift_total=$((swift_total + $(size_of "$real")))
    swift_libs="$swift_libs $name"
done < <(ldd "$lib" | awk '$1 ~ /^libswift/ && $3 ~ /^\// { print $1, $3 }')

# --- broker and hub --------------------------------------------------------
start_broker

start_hub "$hub_bin" --db "$tmp/hub.sqlite"

# --- 1. footprint (aircon resident memory) --------------------------------
build-bench/aircon --host 127.0.0.1 --port "$port" --vendor-thing-id AC-BENCH \
    --storage "$tmp/aircon" >"$tmp/aircon.log" 2>&1 &
pids+=($!)
aircon_pid=$!
wait_line "$tmp/aircon.log" "aircon: connected" "$aircon_pid" 30
sleep 2
rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$aircon_pid/status")
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$aircon_pid/status")
threads=$(awk '/^Threads:/ { print $2 }' "/proc/$aircon_pid/status")
stop "$aircon_pid"

# --- 2. throughput and latency ---------------------------------------------
# run_loadgen NAME ARGS...: runs bench/loadgen, bounded, and keeps its line.
run_loadgen() {
    local name=$1 pid h0
    shift
    "$tmp/loadgen" --port "$port" --storage "$tmp/$name" --vendor-thing-id "BENCH-$name" \
        --timeout 300 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pid=$!
    pids+=("$pid")
    # The hub's CPU from the first command on (not the thing's onboarding).
    wait_line "$tmp/$name.err" "loadgen: publishing" "$pid" 60 || true
    h0=$(cpu_ns "$hub_pid")
    if ! wait_for "$pid" 360; then
        echo "bench: loadgen $name did not finish" >&2; stop "$pid"
    fi
    if ! grep -q '^n=' "$tmp/$name.out"; then
        echo "bench: loadgen $name printed no figures:" >&2; cat "$tmp/$name.err" >&2; exit 1
    fi
    grep -v '^loadgen: publishing$' "$tmp/$name.err" >&2 || true
    echo "hub_ns=$(($(cpu_ns "$hub_pid") - h0))" >"$tmp/$name.hub"
}
echo "bench: $n commands, trivial handler …" >&2
run_loadgen plain -n "$n"
echo "bench: $n_state commands, state upload per command …" >&2
run_loadgen state -n "$n_state" --state
echo "bench: $n_state commands, one at a time …" >&2
run_loadgen serial -n "$n_state" --serial

# field FILE KEY: the value of KEY=… in FILE's line.
field() { tr ' ' '\n' <"$1" | sed -n "s/^$2=//p"; }

# --- 3. table ---------------------------------------------------------------
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo
echo "thingif benchmark: $(nproc) cores ($cpu), $(uname -sr), $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "Footprint"
printf '  %-34s %s\n' "$(basename "$lib")" "$(kib "$lib_size")"
printf '  %-34s %s\n' "  stripped" "$(kib "$lib_stripped")"
printf '  %-34s %s\n' "libthingif.a, --strip-debug" "${archive_stripped:-not built}"
printf '  %-34s %s\n' "  NEEDED" "$needed"
printf '  %-34s %s\n' "  Swift runtime (ldd, resolved)" "$(mib "$swift_total") in$swift_libs"
printf '  %-34s %s\n' "aircon idle, connected: VmRSS" "$((rss / 1024)) MiB ($rss kB)"
printf '  %-34s %s\n' "  VmHWM" "$((hwm / 1024)) MiB ($hwm kB)"
printf '  %-34s %s\n' "  threads" "$threads"
echo
echo "Commands (publish QoS 1 -> handler -> action-results request)"
printf '  %-22s %7s %7s %9s %8s %8s %8s %8s %12s %11s\n' run sent done 'cmd/s' 'p50 ms' 'p95 ms' 'p99 ms' 'max ms' \
    'fsync/cmd' 'hub us/cmd'
for r in plain state serial; do
    f="$tmp/$r.out"
    label="trivial handler"
    [ "$r" = state ] && label="+ state upload"
    [ "$r" = serial ] && label="one at a time"
    hub_us=$(awk -v ns="$(field "$tmp/$r.hub" hub_ns)" -v d="$(field "$f" done)" \
        'BEGIN { if (d > 0) printf "%.0f", ns / d / 1000; else print "-" }')
    printf '  %-22s %7s %7s %9s %8s %8s %8s %8s %12s %11s\n' "$label" "$(field "$f" n)" "$(field "$f" done)" \
        "$(field "$f" cmd_per_s)" "$(field "$f" p50_ms)" "$(field "$f" p95_ms)" "$(field "$f" p99_ms)" \
        "$(field "$f" max_ms)" "$(field "$f" fsyncs_per_cmd)x $(field "$f" fsync_ms_per_cmd)ms" "$hub_us"
done
echo
echo "  cmd/s: commands done / (last results request - first publish); latency per command"
echo "  from mosquitto_publish() to its action-results request (in the first two runs all"
echo "  commands are published at once, so it is mostly time queued); fsync/cmd: the library's"
echo "  fsync+fdatasync calls per command and their time; hub us/cmd: thingif-hub's CPU per"
echo "  command (all threads), SQLite on $(stat -f -c %T "$tmp"): the hub did not issue these"
echo "  commands, so it answers their results 404 (bench/hubs.sh measures the hub end to end)."
echo "  One mosquitto, thingif-hub (release) and the thing share the machine."
