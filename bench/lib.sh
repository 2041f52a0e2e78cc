# SPDX-License-Identifier: Apache-2.0

# bench/lib.sh - what bench/run.sh and bench/compare.sh share: their
# arguments, process control, the secured broker and the hub. Sourced from
# the repository's root; bench_init sets $tmp (a scratch folder) and the
# array pids (processes to stop on exit, in start order). THINGIF_BENCH_KEEP=1
# keeps $tmp (the processes' logs) after the run.

# bench_init MIN_N "$@": -n N (default 2000, at least MIN_N), --no-build,
# -h (prints the calling script's header); sets n and build, makes $tmp and
# stops every process of pids on exit.
bench_init() {
    local min=$1
    shift
    n=2000
    build=1
    while [ $# -gt 0 ]; do
        case "$1" in
            -n) n=${2:?-n needs a number}; shift 2 ;;
            --no-build) build=0; shift ;;
            -h|--help) sed -n '4,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
            *) echo "bench: unknown argument $1" >&2; exit 2 ;;
        esac
    done
    case "$n" in ''|*[!0-9]*) echo "bench: -n wants a positive number" >&2; exit 2 ;; esac
    [ "$n" -ge "$min" ] || { echo "bench: -n wants at least $min" >&2; exit 2; }
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/thingif-bench.XXXXXX")
    pids=()
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

. scripts/proc.sh

stop() {
    local pid=$1
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    wait_for "$pid" 10 || { kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
}

cleanup() {
    local i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop "${pids[$i]}"; done
    if [ "${THINGIF_BENCH_KEEP:-0}" = 1 ]; then echo "bench: logs kept in $tmp" >&2; else rm -rf "$tmp"; fi
}

# thing_budget_off HUB: sets the array thing_budget to the flags that lift a
# thing's request budget (--thing-rate, --thing-burst) when HUB has them;
# empty for a hub older than the setting.
thing_budget_off() {
    thing_budget=()
    if "$1" --help 2>/dev/null | grep -- --thing-rate >/dev/null; then
        thing_budget=(--thing-rate 1000000 --thing-burst 1000000)
    fi
}

# wait_line FILE PATTERN PID SECONDS: waits until FILE holds PATTERN.
wait_line() {
    local end=$((SECONDS + $4))
    until grep -q "$2" "$1" 2>/dev/null; do
        if ! kill -0 "$3" 2>/dev/null || [ "$SECONDS" -ge "$end" ]; then
            echo "bench: no \"$2\" in $1:" >&2
            tail -n 20 "$1" >&2 || true
            return 1
        fi
        sleep 0.05
    done
}

# start_broker [QUEUE]: the secured broker of docs/SECURITY.md on a free
# port, with max_queued_messages QUEUE (default 0: no limit); sets port,
# mosq_pid and admin_password, and exports the hub's identity for the
# bench's publishers (THINGIF_BENCH_USERNAME / _PASSWORD). With
# broker_cert_port set (a free port), the broker also has the listener for
# things with certificates, and the things CA is $tmp/broker/pki/things-ca.*.
start_broker() {
    port=$(free_port)
    admin_password=$(openssl rand -hex 16)
    local extra=()
    [ -z "${broker_cert_port:-}" ] || extra=(--cert-port "$broker_cert_port")
    bash deploy/make-broker-config.sh "$tmp/broker" --port "$port" --admin-user thingif-hub \
        --admin-password "$admin_password" "${extra[@]}" >/dev/null
    echo "max_queued_messages ${1:-0}" >>"$tmp/broker/mosquitto.conf"
    export THINGIF_BENCH_USERNAME=thingif-hub THINGIF_BENCH_PASSWORD=$admin_password
    mosquitto -c "$tmp/broker/mosquitto.conf" >"$tmp/mosquitto.log" 2>&1 &
    pids+=($!)
    mosq_pid=$!
    local end=$((SECONDS + 10))
    until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; do
        if ! kill -0 "$mosq_pid" 2>/dev/null || [ "$SECONDS" -ge "$end" ]; then
            echo "bench: mosquitto did not start:" >&2; cat "$tmp/mosquitto.log" >&2; exit 1
        fi
        sleep 0.05
    done
}

# start_hub BIN [STORE ARGS]: thingif-hub on the broker, with --memory or
# the store arguments given (e.g. --db FILE); sets hub_pid.
start_hub() {
    local bin=$1
    shift
    [ $# -gt 0 ] || set -- --memory
    THINGIF_HUB_BROKER_PASSWORD=$admin_password "$bin" --port "$port" --broker-username thingif-hub \
        --http-port 0 "$@" --quiet >"$tmp/hub.log" 2>&1 &
    pids+=($!)
    hub_pid=$!
    wait_line "$tmp/hub.log" "serving app" "$hub_pid" 30
}

# cpu_ns PID: CPU time the process's live threads have used, in nanoseconds
# (the sum of each thread's schedstat; /proc/PID/schedstat alone is the main
# thread only, and the hub works on its request thread).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

# cpu_sum PID...: CPU nanoseconds of these processes (their live threads).
cpu_sum() {
    local s=0 p c
    for p in "$@"; do
        # A process that ends while it is read gives a partial figure and a
        # failed pipeline: the figure, never the figure and a 0 beside it.
        c=$(cpu_ns "$p" 2>/dev/null) || true
        [[ "$c" =~ ^[0-9]+$ ]] || c=0
        s=$((s + c))
    done
    echo "$s"
}

# user_ticks PID: its user CPU in clock ticks (/proc/PID/stat field 14).
user_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 }'; }

# busy_ticks: CPU ticks of the whole machine not idle (/proc/stat).
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }

# build_bench: the Release library, aircon, the test appliance aircon_test
# and the gateway example lamps (build-bench) and the hub (release,
# .build-bench); sets hub_bin.
build_bench() {
    if [ "$1" = 1 ]; then
        echo "bench: building (cmake Release in build-bench, swift release in .build-bench) …" >&2
        cmake -G Ninja -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DTHINGIF_EMBEDDED=ON >"$tmp/build.log" 2>&1 \
            && cmake --build build-bench --target thingif thingif_static aircon aircon_test lamps >>"$tmp/build.log" 2>&1 \
            && swift build -c release --scratch-path .build-bench --product thingif-hub >>"$tmp/build.log" 2>&1 \
            || { tail -n 40 "$tmp/build.log" >&2; exit 1; }
    fi
    hub_bin="$(swift build -c release --scratch-path .build-bench --show-bin-path)/thingif-hub"
    for f in build-bench/aircon build-bench/aircon_test build-bench/lamps "$hub_bin"; do
        [ -x "$f" ] || { echo "bench: $f is missing (run without --no-build)" >&2; exit 1; }
    done
}

# onboard_aircon ID: aircon onboards through the hub as vendorThingID ID
# into $tmp/aircon and stops; sets storage and topic (its command topic).
onboard_aircon() {
    storage="$tmp/aircon"
    build-bench/aircon --host 127.0.0.1 --port "$port" --vendor-thing-id "$1" --storage "$storage" \
        >"$tmp/onboard.log" 2>&1 &
    pids+=($!)
    wait_line "$tmp/onboard.log" "aircon: connected" "$!" 30
    stop "$!"
    topic=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mqttEndpoint"]["mqttTopic"])' \
        "$storage/identity.json")
}
