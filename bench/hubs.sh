#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# bench/hubs.sh - how do commands scale with hubs on one PostgreSQL? (figures,
# not pass/fail). Starts a PostgreSQL of its own (initdb in a temp folder,
# 127.0.0.1 on a free port, default durability: fsync on), the secured
# broker, and a few aircon appliances (build-bench/aircon, onboarded by
# their owner through the hub's REST API). First, as the baseline, one
# thingif-hub on an SQLite file (its own owner and aircons). Then, with 1, 2 and 3 thingif-hub
# processes on that database and broker, bench/hubs_driver.py sends N
# commands through the hubs' REST APIs (round-robin over hubs and things, C
# in flight) and waits for each one's results (an event stream on the first
# hub, fed across hubs by LISTEN/NOTIFY). Prints commands per second end to
# end, latency, and the mean store latency per operation of the round (from
# the hubs' /metrics: thingif_hub_store_latency_seconds{op}, summed over the
# hubs). Hubs, broker, PostgreSQL, the appliances and the driver share this
# machine, so the figures say what the hub and the database cost here, not
# what more machines would give.
#
# usage: bench/hubs.sh [-n N] [--no-build]    (N commands per round, default 1000)
# env:   THINGIF_BENCH_HUB=PATH   a thingif-hub to use instead of the release build
#        THINGIF_BENCH_THINGS=K   appliances (default 4)
#        THINGIF_BENCH_INFLIGHT=C commands in flight (default 16)
#        THINGIF_PG_BIN=DIR       where initdb and postgres are
#        THINGIF_BENCH_SQLITE=0   without the SQLite round
#        THINGIF_BENCH_ROUNDS="1 2 3"  the numbers of hubs, one round each (default 1 2 3)
#        THINGIF_BENCH_PGOPTS="k=v …"   more PostgreSQL settings (e.g. synchronous_commit=off, to see
#                                 what the commits' flushes cost; not a setting to deploy with)
#        THINGIF_BENCH_PGSOCKET=1 the hubs reach PostgreSQL over its Unix socket, not TCP
#        THINGIF_BENCH_PGSTAT=1   also print, for the one-hub round, the statements that cost
#                                 PostgreSQL the most (pg_stat_statements: calls, total and mean ms)
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/lib.sh
bench_init 10 "$@"
case " $* " in *" -n "*) ;; *) n=1000 ;; esac   # the default run stays under ~3 minutes
things_n=${THINGIF_BENCH_THINGS:-4}
inflight=${THINGIF_BENCH_INFLIGHT:-16}

# --- build -------------------------------------------------------------------
if [ -n "${THINGIF_BENCH_HUB:-}" ]; then
    hub_bin=$THINGIF_BENCH_HUB
    if [ "$build" = 1 ]; then
        echo "bench: building aircon (cmake Release in build-bench) …" >&2
        { cmake -G Ninja -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DTHINGIF_EMBEDDED=ON \
            && cmake --build build-bench --target aircon; } >"$tmp/build.log" 2>&1 \
            || { tail -n 40 "$tmp/build.log" >&2; exit 1; }
    fi
    for f in build-bench/aircon "$hub_bin"; do
        [ -x "$f" ] || { echo "bench: $f is missing" >&2; exit 1; }
    done
else
    build_bench "$build"
fi

# --- PostgreSQL ----------------------------------------------------------------
# As in Tests/ThingIFTests/Support/PostgresServer.swift: initdb and postgres
# refuse root, so as root they run as the postgres user (setpriv execs, so
# the PID we stop is postgres' own).
pg_bin=${THINGIF_PG_BIN:-}
if [ -z "$pg_bin" ]; then
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r) $(dirname "$(command -v initdb 2>/dev/null || echo /x/x)"); do
        if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then pg_bin=$d; break; fi
    done
fi
[ -n "$pg_bin" ] || { echo "bench: PostgreSQL is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }
as_pg=()
pg_dir="$tmp/pg"
mkdir -p "$pg_dir"
chmod 700 "$pg_dir"
if [ "$(id -u)" = 0 ]; then
    chmod 755 "$tmp"
    chown postgres:postgres "$pg_dir"
    as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi
pg_port=$(free_port)
"${as_pg[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U thingif --auth=trust -E UTF8 --no-locale >"$tmp/initdb.log" 2>&1 \
    || { cat "$tmp/initdb.log" >&2; exit 1; }
pgstat=${THINGIF_BENCH_PGSTAT:-0}
pg_extra=()
[ "$pgstat" = 1 ] && pg_extra=(-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all)
for o in ${THINGIF_BENCH_PGOPTS:-}; do pg_extra+=(-c "$o"); done
"${as_pg[@]}" "$pg_bin/postgres" -D "$pg_dir/data" -h 127.0.0.1 -p "$pg_port" -k "$pg_dir" \
    -c max_connections=100 "${pg_extra[@]}" >"$tmp/postgres.log" 2>&1 &
pids+=($!)
pg_pid=$!
db_url="postgres://thingif@127.0.0.1:$pg_port/thingif"
# The hubs over the server's Unix socket instead of TCP on loopback.
[ "${THINGIF_BENCH_PGSOCKET:-0}" = 1 ] && db_url="postgres://thingif@/thingif?host=$pg_dir&port=$pg_port"
end=$((SECONDS + 20))
until "$pg_bin/psql" "postgres://thingif@127.0.0.1:$pg_port/postgres" -XAtqc 'CREATE DATABASE thingif' 2>/dev/null; do
    if ! kill -0 "$pg_pid" 2>/dev/null || [ "$SECONDS" -ge "$end" ]; then
        echo "bench: postgres did not start:" >&2; cat "$tmp/postgres.log" >&2; exit 1
    fi
    sleep 0.2
done
psql_db() { "$pg_bin/psql" "$db_url" -XAtq "$@"; }
[ "$pgstat" = 1 ] && psql_db -c 'CREATE EXTENSION pg_stat_statements'

# --- broker and hubs ---------------------------------------------------------
start_broker
hub_urls=()
hub_pids=()
# Each aircon here takes a quarter of the commands, 250 or more a second with
# two requests each: past a thing's default budget (200 a second, 2,000 at
# once), which would measure the 429s and the resends after them instead of
# the hub. Lifted, as the REST budget is (a hub older than the setting has
# the default, and its rounds past about 8 s show it).
thing_budget_off "$hub_bin"

# add_hub DB: one more thingif-hub on the broker and DB (a PostgreSQL URL or an SQLite file).
add_hub() {
    local i=${#hub_pids[@]} http
    http=$(free_port)
    THINGIF_HUB_BROKER_PASSWORD=$admin_password "$hub_bin" --port "$port" --broker-username thingif-hub \
        --http-port "$http" --db "$1" --rate-limit 0 "${thing_budget[@]}" --quiet >"$tmp/hub$i.$2.log" 2>&1 &
    pids+=($!)
    hub_pids+=($!)
    hub_urls+=("http://127.0.0.1:$http")
    wait_line "$tmp/hub$i.$2.log" "serving app" "$!" 60
    local end=$((SECONDS + 30))
    until python3 -c "import urllib.request; urllib.request.urlopen('${hub_urls[$i]}/health', timeout=1)" 2>/dev/null; do
        [ "$SECONDS" -lt "$end" ] || { echo "bench: hub $i does not answer HTTP" >&2; tail "$tmp/hub$i.$2.log" >&2; exit 1; }
        sleep 0.1
    done
}

# --- appliances ----------------------------------------------------------------
# start_aircons NAME: the owner signs up on the first hub and onboards
# things_n aircons there (vendorThingIDs AC-NAME-k), which connect; sets
# token, user, thing_ids and aircon_pids.
start_aircons() {
    local vendors=() k tid ttoken
    for ((k = 1; k <= things_n; k++)); do vendors+=("AC-$1-$k"); done
    python3 bench/hubs_driver.py setup "${hub_urls[0]}" "${vendors[@]}" >"$tmp/setup.$1.json"
    token=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$tmp/setup.$1.json")
    user=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["userID"])' "$tmp/setup.$1.json")
    thing_ids=""
    aircon_pids=()
    for ((k = 0; k < things_n; k++)); do
        read -r tid ttoken < <(python3 -c 'import json,sys; t = json.load(open(sys.argv[1]))["things"][int(sys.argv[2])]; print(t["thingID"], t["accessToken"])' "$tmp/setup.$1.json" "$k")
        thing_ids="$thing_ids${thing_ids:+,}$tid"
        build-bench/aircon --host 127.0.0.1 --port "$port" --storage "$tmp/aircon.$1.$k" --thing-id "$tid" \
            --token "$ttoken" >"$tmp/aircon.$1.$k.log" 2>&1 &
        pids+=($!)
        aircon_pids+=($!)
        wait_line "$tmp/aircon.$1.$k.log" "aircon: connected" "$!" 30
    done
    # A short warm-up on one hub (connections, first plans) before the rounds.
    python3 bench/hubs_driver.py run --hubs "${hub_urls[0]}" --token "$token" --user "$user" --things "$thing_ids" \
        -n 50 -c 4 >/dev/null
}

# store_sums: "op sum count" per op, summed over the running hubs.
store_sums() {
    local u
    for u in "${hub_urls[@]}"; do
        python3 -c "import urllib.request; print(urllib.request.urlopen('$u/metrics', timeout=5).read().decode())"
    done | awk '
        /^thingif_hub_store_latency_seconds_sum\{/ { match($0, /op="[^"]*"/); op = substr($0, RSTART + 4, RLENGTH - 5); s[op] += $NF }
        /^thingif_hub_store_latency_seconds_count\{/ { match($0, /op="[^"]*"/); op = substr($0, RSTART + 4, RLENGTH - 5); c[op] += $NF }
        END { for (op in c) print op, s[op], c[op] }' | sort
}

# The postmaster and its backends (the hubs' connections live through a round).
pg_procs() { echo "$pg_pid" $(ps -o pid= --ppid "$pg_pid"); }

# round LABEL H: N commands through the first H hubs; appends a line to results
# and the store latencies to $tmp/store.LABEL. LABEL "sqlite" has no database CPU.
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
results=()
labels=()
others=()
round() {
    local label=$1 h=$2 urls hc0 hc1 pc0=0 pc1=0 bc0 bc1 ac0 ac1 line
    urls=$(IFS=,; echo "${hub_urls[*]:0:$h}")
    store_sums >"$tmp/store0.$label"
    [ "$pgstat" = 1 ] && [ "$label" = 1 ] && psql_db -c 'SELECT pg_stat_statements_reset()' >/dev/null
    hc0=$(cpu_sum "${hub_pids[@]}")
    bc0=$(cpu_sum "$mosq_pid")
    ac0=$(cpu_sum "${aircon_pids[@]}")
    [ "$label" = sqlite ] || pc0=$(cpu_sum $(pg_procs))
    echo "bench: $label: $h hub(s), $n commands, $inflight in flight …" >&2
    line=$(python3 bench/hubs_driver.py run --hubs "$urls" --token "$token" --user "$user" --things "$thing_ids" \
        -n "$n" -c "$inflight")
    hc1=$(cpu_sum "${hub_pids[@]}")
    bc1=$(cpu_sum "$mosq_pid")
    ac1=$(cpu_sum "${aircon_pids[@]}")
    [ "$label" = sqlite ] || pc1=$(cpu_sum $(pg_procs))
    store_sums >"$tmp/store1.$label"
    if [ "$pgstat" = 1 ] && [ "$label" = 1 ]; then
        psql_db -F ' | ' -c "SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3),
            regexp_replace(left(query, 110), '\s+', ' ', 'g') FROM pg_stat_statements
            WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 25" >"$tmp/pgstat"
    fi
    labels+=("$label")
    results+=("$line hub_cpu_us=$(((hc1 - hc0) / 1000 / n)) pg_cpu_us=$(((pc1 - pc0) / 1000 / n))")
    others+=("broker $(((bc1 - bc0) / 1000 / n)) us, appliances $(((ac1 - ac0) / 1000 / n)) us, driver $(field "$line" driver_cpu_us) us")
    join "$tmp/store0.$label" "$tmp/store1.$label" 2>/dev/null \
        | awk '{ dc = $5 - $3; if (dc > 0) printf "%s=%.2f/%d ", $1, ($4 - $2) / dc * 1000, dc }' >"$tmp/store.$label"
    # ops only in the second snapshot (a new hub's first calls)
    join -v 2 "$tmp/store0.$label" "$tmp/store1.$label" 2>/dev/null \
        | awk '{ if ($3 > 0) printf "%s=%.2f/%d ", $1, $2 / $3 * 1000, $3 }' >>"$tmp/store.$label"
}

# --- rounds --------------------------------------------------------------------
# First one hub on an SQLite file (its own owner and aircons), the baseline;
# then 1, 2, 3 hubs on PostgreSQL.
if [ "${THINGIF_BENCH_SQLITE:-1}" = 1 ]; then
    add_hub "$tmp/hub.sqlite" sqlite
    start_aircons SQLITE
    round sqlite 1
    for p in "${aircon_pids[@]}" "${hub_pids[@]}"; do stop "$p"; done
    hub_pids=()
    hub_urls=()
fi
add_hub "$db_url" pg
start_aircons PG
rounds=${THINGIF_BENCH_ROUNDS:-1 2 3}
for h in $rounds; do
    while [ "${#hub_pids[@]}" -lt "$h" ]; do add_hub "$db_url" pg; done
    sleep 1   # the new hub's shared subscription is in place
    round "$h" "$h"
done

# --- table ---------------------------------------------------------------------
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
pgv=$("$pg_bin/postgres" --version | awk '{ print $3 }')
echo
echo "hubs on one PostgreSQL: $(nproc) cores ($cpu), $(uname -sr), PostgreSQL $pgv, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "  $things_n aircon appliances, $n commands per round (3 actions each), $inflight in flight, hub $hub_bin"
echo "  the hubs reach PostgreSQL over $([ "${THINGIF_BENCH_PGSOCKET:-0}" = 1 ] && echo "its Unix socket" || echo "TCP on 127.0.0.1")"
echo
printf '  %-9s %6s %7s %7s %9s %8s %8s %8s %12s %12s\n' store done polled errors 'cmd/s' 'p50 ms' 'p95 ms' 'max ms' \
    'hub CPU/cmd' 'pg CPU/cmd'
name() { case "$1" in sqlite) echo "SQLite" ;; 1) echo "PG 1 hub" ;; *) echo "PG $1 hubs" ;; esac; }
for ((i = 0; i < ${#results[@]}; i++)); do
    l=${results[$i]}
    lab=${labels[$i]}
    pgc="$(field "$l" pg_cpu_us) us"
    [ "$lab" = sqlite ] && pgc="(in the hub)"
    printf '  %-9s %6s %7s %7s %9s %8s %8s %8s %12s %12s\n' "$(name "$lab")" "$(field "$l" done)" "$(field "$l" polled)" \
        "$(field "$l" errors)" "$(field "$l" cmd_per_s)" "$(field "$l" p50_ms)" "$(field "$l" p95_ms)" \
        "$(field "$l" max_ms)" "$(field "$l" hub_cpu_us) us" "$pgc"
done
echo
echo "  the rest of the machine's CPU per command in the round (the broker, the aircons, this driver):"
for ((i = 0; i < ${#results[@]}; i++)); do
    printf '  %-10s %s\n' "$(name "${labels[$i]}"):" "${others[$i]}"
done
echo
echo "  store latency, mean ms per call / calls in the round (all hubs):"
for lab in "${labels[@]}"; do
    printf '  %-10s ' "$(name "$lab"):"
    tr ' ' '\n' <"$tmp/store.$lab" | sed '/^$/d' | sort | tr '\n' ' '
    echo
done
if [ "$pgstat" = 1 ]; then
    echo
    echo "  pg_stat_statements, one-hub round (calls | total ms | mean ms | statement):"
    sed 's/^/  /' "$tmp/pgstat"
fi
echo
echo "  cmd/s: commands with results / (first POST to last result seen); latency per command from"
echo "  POST to its result event on the stream of hub 1 (polled: no event within 3 s, read with GET)."
echo "  hub CPU/cmd: CPU of all running hubs (every thread) per command; pg CPU/cmd: the same for"
echo "  PostgreSQL's processes. Machine load when done: $(cut -d' ' -f1-3 /proc/loadavg)."
