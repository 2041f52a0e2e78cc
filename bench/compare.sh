#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# bench/compare.sh - libthingif against the hand-written lower bound, in one
# run (figures, not pass/fail):
#   the C appliance (bench/c_appliance.c: libmosquitto + jansson, the same
#   protocol, no persistence) and aircon as the test appliance,
#   aircon_test --quiet --no-state (examples-c/aircon.c on libthingif, the
#   same three handlers, durability on, storage on this machine's disk) take
#   the same commands from the same driver (bench/driver.c, which answers
#   every request 204 as the hub does) on the same secured broker, one after
#   the other:
#     one at a time (window 1): p50 round trip, CPU per command;
#     64 in flight (window 64): commands per second, CPU per command;
#   and for aircon the fdatasync calls and bytes written to storage per
#   command (bench/synccount.c, preloaded) and its resident memory.
# Each figure is printed with the ratio aircon / C. A warning is printed when
# other processes used noticeable CPU during a run.
#
# usage: bench/compare.sh [-n N] [--no-build]    (N commands at window 64,
#        N/10 one at a time; default 2000)
# THINGIF_BENCH_PERF=FILE records a perf profile of aircon at window 64.
# THINGIF_BENCH_SERIAL=N sets the one-at-a-time count (the first VmRSS is
# read after it): -n 1000000 with THINGIF_BENCH_SERIAL=1000 is the memory soak.
# THINGIF_BENCH_AIRCON=PATH measures another build's aircon_test (e.g. one
# configured with -DTHINGIF_OPTIMIZE_SIZE=OFF, i.e. -O) instead of
# build-bench/aircon_test.
# THINGIF_BENCH_CALLGRIND=1 runs both appliances under valgrind's callgrind and
# adds the user-space instructions per command: a figure other load on the
# machine does not change (the timings of that run mean nothing);
# THINGIF_BENCH_CALLGRIND=DIR also keeps the profiles there (cg.c.out for the
# C appliance, cg.a.out for aircon; callgrind_annotate reads them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

. bench/lib.sh
bench_init 100 "$@"
n_serial=${THINGIF_BENCH_SERIAL:-$((n / 10))}
aircon=${THINGIF_BENCH_AIRCON:-build-bench/aircon_test}
cg_dir=$tmp
if [ -d "${THINGIF_BENCH_CALLGRIND:-}" ]; then cg_dir=$(cd "$THINGIF_BENCH_CALLGRIND" && pwd); fi
# callgrind NAME: the command prefix that runs an appliance under callgrind.
callgrind() {
    [ -n "${THINGIF_BENCH_CALLGRIND:-}" ] || return 0
    echo valgrind --tool=callgrind "--callgrind-out-file=$cg_dir/cg.$1.out"
}
# instructions NAME: the instructions callgrind counted (startup included).
instructions() {
    [ -f "$cg_dir/cg.$1.out" ] || return 0
    callgrind_annotate "$cg_dir/cg.$1.out" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

# --- build ---------------------------------------------------------------
build_bench "$build"
for p in c_appliance driver; do
    cc -O2 -std=c11 "bench/$p.c" -o "$tmp/$p" -ljansson -lmosquitto -lpthread
done
cc -O2 -shared -fPIC bench/synccount.c -o "$tmp/synccount.so" -ldl

# --- broker, and one onboarding through the hub ------------------------------
start_broker
start_hub "$hub_bin"
onboard_aircon AC-COMPARE
# From here the driver is the hub: it answers the things' requests.
stop "$hub_pid"

# measure NAME PID WINDOW COUNT: runs the driver against the appliance PID
# and keeps the figures in $tmp/NAME.fig (key=value per line).
measure() {
    local name=$1 pid=$2 w=$3 count=$4 d c0 u0 b0 m0 s0 w0 c1 u1 b1 m1 s1 w1 line
    sleep 0.5
    c0=$(cpu_ns "$pid"); u0=$(user_ticks "$pid"); b0=$(busy_ticks); m0=$(cpu_ns "$mosq_pid")
    s0=$(syncs)
    w0=$(date +%s%N)
    "$tmp/driver" --port "$port" --topic "$topic" -n "$count" -w "$w" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    d=$!
    pids+=("$d")
    wait_for "$d" 600 || { echo "bench: the driver did not finish ($name)" >&2; stop "$d"; }
    c1=$(cpu_ns "$pid"); u1=$(user_ticks "$pid"); b1=$(busy_ticks); m1=$(cpu_ns "$mosq_pid")
    w1=$(date +%s%N)
    s1=$(syncs)
    line=$(cat "$tmp/$name.out")
    [ -n "$line" ] || { echo "bench: the driver printed nothing ($name):" >&2; cat "$tmp/$name.err" >&2; exit 1; }
    {
        tr ' ' '\n' <<<"$line"
        echo "cpu_us=$(awk -v a="$c0" -v b="$c1" -v n="$count" 'BEGIN { printf "%.1f", (b - a) / 1000 / n }')"
        echo "user_us=$(awk -v a="$u0" -v b="$u1" -v n="$count" -v hz="$(getconf CLK_TCK)" \
            'BEGIN { printf "%.1f", (b - a) * 1e6 / hz / n }')"
        # Other processes: busy machine ticks beyond the appliance, the broker
        # (the driver's own CPU is part of the bench: driver_cpu_ns).
        echo "other_pct=$(awk -v b0="$b0" -v b1="$b1" -v c="$((c1 - c0))" \
            -v m="$((m1 - m0 + $(sed -n 's/.*driver_cpu_ns=\([0-9]*\).*/\1/p' <<<"$line")))" \
            -v hz="$(getconf CLK_TCK)" -v s="$(((w1 - w0) / 1000000))" -v cores="$(nproc)" \
            'BEGIN { busy = (b1 - b0) / hz; own = (c + m) / 1e9; s = s / 1000; if (s <= 0) s = 1;
                o = 100 * (busy - own) / (s * cores); printf "%.0f", o < 0 ? 0 : o }')"
        echo "syncs=$((s1 - s0 > 0 ? s1 - s0 : 0))"
    } >"$tmp/$name.fig"
    echo "bytes=$(($(written) - bytes0))" >>"$tmp/$name.fig"
    echo "allocs=$(($(allocations) - allocs0))" >>"$tmp/$name.fig"
}

# The counters synccount.so keeps for the appliance under test.
counter_file=""
syncs() { od -An -t d8 -N 8 "$counter_file" | tr -d ' '; }
written() { od -An -t d8 -j 8 -N 8 "$counter_file" | tr -d ' '; }
allocations() { od -An -t d8 -j 24 -N 8 "$counter_file" | tr -d ' '; }

fig() { sed -n "s/^$2=//p" "$tmp/$1.fig"; }

# --- the C appliance -----------------------------------------------------------
counter_file="$tmp/synccount-c"
: >"$counter_file"
LD_PRELOAD="$tmp/synccount.so" THINGIF_SYNCCOUNT_FILE="$counter_file" $(callgrind c) "$tmp/c_appliance" --port "$port" \
    --identity "$storage/identity.json" >"$tmp/c.log" 2>&1 &
pids+=($!)
c_pid=$!
wait_line "$tmp/c.log" "c_appliance: connected" "$c_pid" 30
echo "bench: C appliance, $n_serial one at a time, $n at window 64 …" >&2
bytes0=$(written); allocs0=$(allocations)
measure c1 "$c_pid" 1 "$n_serial"
bytes0=$(written); allocs0=$(allocations)
measure c64 "$c_pid" 64 "$n"
stop "$c_pid"

# --- aircon on libthingif ---------------------------------------------------
counter_file="$tmp/synccount"
: >"$counter_file"
LD_PRELOAD="$tmp/synccount.so" THINGIF_SYNCCOUNT_FILE="$counter_file" $(callgrind a) "$aircon" --host 127.0.0.1 \
    --port "$port" --vendor-thing-id AC-COMPARE --storage "$storage" --quiet --no-state >"$tmp/aircon.log" 2>&1 &
pids+=($!)
a_pid=$!
wait_line "$tmp/aircon.log" "aircon: connected" "$a_pid" 30
echo "bench: aircon, $n_serial one at a time, $n at window 64 …" >&2
bytes0=$(written); allocs0=$(allocations)
measure a1 "$a_pid" 1 "$n_serial"
rss_first=$(awk '/^VmRSS:/ { print $2 }' "/proc/$a_pid/status")
bytes0=$(written); allocs0=$(allocations)
if [ -n "${THINGIF_BENCH_PERF:-}" ]; then
    # A profile of aircon during the 64-in-flight run (perf report -i FILE).
    perf record -g -o "$THINGIF_BENCH_PERF" -p "$a_pid" >/dev/null 2>&1 &
    perf_pid=$!
fi
measure a64 "$a_pid" 64 "$n"
[ -n "${perf_pid:-}" ] && { kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true; }
rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$a_pid/status")
ledger_kb=$(du -k "$storage/ledger.jsonl" | cut -f1)
stop "$a_pid"

# --- the table ------------------------------------------------------------------
ratio() { awk -v a="$1" -v c="$2" 'BEGIN { if (c > 0) printf "%.2fx", a / c; else print "-" }'; }
per() { awk -v v="$1" -v n="$2" 'BEGIN { printf "%.2f", v / n }'; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo
echo "thingif vs hand-written C: $(nproc) cores ($cpu), $(uname -sr), storage on $(stat -f -c %T "$tmp")," \
    "$(date -u +%Y-%m-%dT%H:%MZ)"
echo
printf '  %-38s %14s %14s %10s\n' figure "C appliance" "aircon" ratio
row() { printf '  %-38s %14s %14s %10s\n' "$1" "$2" "$3" "$(ratio "$3" "$2")"; }
row "one at a time: p50 round trip (us)" "$(fig c1 p50_us)" "$(fig a1 p50_us)"
row "one at a time: p99 round trip (us)" "$(fig c1 p99_us)" "$(fig a1 p99_us)"
row "one at a time: CPU per command (us)" "$(fig c1 cpu_us)" "$(fig a1 cpu_us)"
row "one at a time: user CPU per command (us)" "$(fig c1 user_us)" "$(fig a1 user_us)"
row "64 in flight: commands per second" "$(fig c64 cmd_per_s)" "$(fig a64 cmd_per_s)"
row "64 in flight: p50 round trip (us)" "$(fig c64 p50_us)" "$(fig a64 p50_us)"
row "64 in flight: CPU per command (us)" "$(fig c64 cpu_us)" "$(fig a64 cpu_us)"
row "64 in flight: user CPU per command (us)" "$(fig c64 user_us)" "$(fig a64 user_us)"
if [ -z "${THINGIF_BENCH_CALLGRIND:-}" ]; then
    row "heap allocations per command" "$(per "$(fig c64 allocs)" "$n")" "$(per "$(fig a64 allocs)" "$n")"
else
    # valgrind replaces malloc, so synccount.so cannot count allocations.
    row "instructions per command (callgrind)" "$(per "$(instructions c)" "$((n + n_serial))")" \
        "$(per "$(instructions a)" "$((n + n_serial))")"
fi
echo
printf '  %-38s %s\n' "aircon fdatasync per command" \
    "one at a time $(per "$(fig a1 syncs)" "$n_serial"), 64 in flight $(per "$(fig a64 syncs)" "$n")"
printf '  %-38s %s\n' "aircon bytes written per command" \
    "one at a time $(per "$(fig a1 bytes)" "$n_serial"), 64 in flight $(per "$(fig a64 bytes)" "$n")"
printf '  %-38s %s\n' "aircon VmRSS" "after $n_serial commands $rss_first kB, after all $rss kB (ledger.jsonl $ledger_kb kB)"
# The library aircon ran with: -Osize (build-bench) or another build's.
aircon_lib=$(ldd "$aircon" | awk '/libthingif/ { print $3 }')
if [ -f "$aircon_lib" ]; then
    strip -o "$tmp/libthingif.stripped" "$aircon_lib"
    printf '  %-38s %s\n' "aircon's libthingif.so, stripped" "$(stat -c %s "$tmp/libthingif.stripped") bytes ($aircon_lib)"
fi
printf '  %-38s %s\n' "commands done (C / aircon)" \
    "$(fig c1 done)+$(fig c64 done) / $(fig a1 done)+$(fig a64 done)"
echo
echo "  Goals (docs/DECISIONS.md): 64 in flight >= 0.8x C throughput; one at a time p50 <= 3.5x;"
echo "  CPU per command <= 2x, user <= 3x; fdatasync <= 2 one at a time, <= 0.2 at 64 in flight;"
echo "  libthingif.so <= 300 KB (307,200 bytes) stripped, Embedded Swift."
for r in c1 c64 a1 a64; do
    o=$(fig "$r" other_pct)
    if [ "${o:-0}" -gt 10 ]; then
        echo "  warning: other processes used about $o% of the machine during run $r; figures are noisy"
    fi
done
