#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# bench/hub_burst.sh - does the hub keep up with a burst? (figures, not
# pass/fail). One thing (bench/c_appliance.c --state-burst, with the identity
# aircon got when it onboarded) uploads N full states as fast as libmosquitto
# sends them, to thingif-hub with its SQLite store on this machine's disk,
# through the secured broker with mosquitto's default queue limit
# (max_queued_messages 1000 per client). The thing does not send again what
# is not answered, so every state not answered is one the broker dropped
# from the hub's queue. Prints the answers, the hub's requests per second
# and its CPU per request.
#
# usage: bench/hub_burst.sh [-n N] [--no-build]    (N states, default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
bench_init 1 "$@"

build_bench "$build"
cc -O2 -std=c11 bench/c_appliance.c -o "$tmp/c_appliance" -ljansson -lmosquitto -lpthread

start_broker 1000
start_hub "$hub_bin" --db "$tmp/hub.sqlite"
onboard_aircon AC-BURST

c0=$(cpu_ns "$hub_pid")
u0=$(user_ticks "$hub_pid")
rc=0
"$tmp/c_appliance" --port "$port" --identity "$storage/identity.json" --state-burst "$n" >"$tmp/burst.log" 2>&1 \
    || rc=$?
c1=$(cpu_ns "$hub_pid")
u1=$(user_ticks "$hub_pid")
line=$(grep '^burst:' "$tmp/burst.log" || true)
[ -n "$line" ] || { echo "bench: the burst printed nothing:" >&2; cat "$tmp/burst.log" >&2; exit 1; }
read -r _ _ sent _ answered _ ok _ secs _ per_s <<<"$line"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')

echo "hub burst: $(nproc) cores ($cpu), $(uname -sr), SQLite on $(stat -f -c %T "$tmp"), $(date -u +%Y-%m-%dT%H:%MZ)"
echo
printf '  %-40s %s\n' "state uploads sent" "$sent"
printf '  %-40s %s (%s answered 2xx)\n' "answered by the hub" "$answered" "$ok"
printf '  %-40s %s\n' "dropped on the way (sent - answered)" "$((sent - answered))"
printf '  %-40s %s s\n' "first request to last answer" "$secs"
printf '  %-40s %s\n' "hub requests per second" "$per_s"
printf '  %-40s %s us (user %s us)\n' "hub CPU per request" \
    "$(awk -v a="$c0" -v b="$c1" -v n="$sent" 'BEGIN { printf "%.0f", (b - a) / 1000 / n }')" \
    "$(awk -v a="$u0" -v b="$u1" -v n="$sent" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", (b - a) * 1e6 / hz / n }')"
printf '  %-40s %s\n' "broker log lines about dropping" "$(grep -ci 'dropp' "$tmp/mosquitto.log" || true)"
[ "$rc" -eq 0 ] || echo "  note: not every state was answered 2xx (exit $rc)"
