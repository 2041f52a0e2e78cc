#!/usr/bin/env bash
# The AirConditioner-Demo round trip, end to end, on this machine only:
#
#   mosquitto (a free port on 127.0.0.1)
#   thingif-hub --demo   the framework side: waits for the thing, sends three
#                        commands, checks every action result
#   aircon               the C appliance (examples-c/aircon.c) on libthingif
#
# Everything lives in a temporary folder (broker config, the appliance's
# storage, logs) that is removed on exit. Exits with the hub's status, or
# non-zero when the appliance crashed or (with --valgrind) leaked.
#
# usage: scripts/run-demo.sh --build-dir DIR [--aircon PATH] [--valgrind] [--keep]
#   --build-dir DIR  the CMake build folder holding thingif-hub and aircon
#   --aircon PATH    run this appliance program instead of DIR/aircon (it
#                    takes aircon's arguments: --port, --storage, --run-seconds)
#   --valgrind       run the appliance under valgrind; definite leaks fail
#   --keep           keep the temporary folder (its path is printed)
set -uo pipefail

build_dir="" aircon_bin="" use_valgrind=0 keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build_dir=${2:-}; shift 2 || break ;;
        --aircon) aircon_bin=${2:-}; shift 2 || break ;;
        --valgrind) use_valgrind=1; shift ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,19s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "run-demo: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$build_dir" ] || { echo "run-demo: --build-dir DIR is required" >&2; exit 2; }

hub_bin=$build_dir/thingif-hub
[ -n "$aircon_bin" ] || aircon_bin=$build_dir/aircon
for f in "$hub_bin" "$aircon_bin"; do
    [ -x "$f" ] || { echo "run-demo: $f not found; build first (cmake --build $build_dir)" >&2; exit 2; }
done
mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)
[ -x "$mosquitto_bin" ] || { echo "run-demo: mosquitto not found (apt install mosquitto)" >&2; exit 2; }

hub_timeout=60
if [ "$use_valgrind" -eq 1 ]; then
    command -v valgrind >/dev/null || { echo "run-demo: valgrind not found" >&2; exit 2; }
    hub_timeout=180
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/thingif-demo.XXXXXX")
mosq_pid="" hub_pid="" aircon_pid=""

# Stops what is still running (by PID), then removes the temporary folder.
cleanup() {
    local pid
    for pid in $aircon_pid $hub_pid $mosq_pid; do
        kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
    done
    for pid in $aircon_pid $hub_pid $mosq_pid; do
        wait_for "$pid" 10 || { kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
    done
    if [ "$keep" -eq 1 ]; then echo "run-demo: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for PID SECONDS: waits for a child to end, at most SECONDS. Sets
# $waited to its exit status and returns 0, or returns 1 if it still runs.
waited=""
wait_for() {
    local pid=$1 deadline=$((SECONDS + $2))
    while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.1
    done
    wait "$pid" 2>/dev/null
    waited=$?
}

# Prefixes every line with who said it, dropping the program's own prefix.
label() { sed -u -e "s/^$1: //" -e "s/^/$(printf '%-7s' "$1")│ /"; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$tmp/mosquitto.conf" <<EOF
listener $port 127.0.0.1
allow_anonymous true
persistence false
EOF

echo "demo: mosquitto on 127.0.0.1:$port (files in $tmp)"
"$mosquitto_bin" -c "$tmp/mosquitto.conf" >"$tmp/mosquitto.log" 2>&1 &
mosq_pid=$!
deadline=$((SECONDS + 10))
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    if ! kill -0 "$mosq_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
        echo "run-demo: mosquitto did not start:" >&2
        cat "$tmp/mosquitto.log" >&2
        exit 1
    fi
    sleep 0.1
done

echo "demo: starting thingif-hub --demo (the framework side)"
"$hub_bin" --demo --port "$port" --timeout "$hub_timeout" \
    > >(tee "$tmp/hub.log" | label hub) 2>&1 &
hub_pid=$!
deadline=$((SECONDS + 15))
until grep -q "serving app" "$tmp/hub.log" 2>/dev/null; do
    if ! kill -0 "$hub_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
        echo "run-demo: thingif-hub did not start" >&2
        exit 1
    fi
    sleep 0.1
done

aircon_cmd=("$aircon_bin" --port "$port" --storage "$tmp/aircon" --run-seconds $((hub_timeout * 5)))
if [ "$use_valgrind" -eq 1 ]; then
    aircon_cmd=(valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99
                --log-file="$tmp/valgrind.log" "${aircon_cmd[@]}")
    echo "demo: starting aircon under valgrind (the appliance)"
else
    echo "demo: starting aircon (the appliance)"
fi
"${aircon_cmd[@]}" > >(label aircon) 2>&1 &
aircon_pid=$!

# The hub bounds each of its own waits by --timeout; this bounds the whole.
hub_status="" aircon_status=""
deadline=$((SECONDS + hub_timeout * 5))
while kill -0 "$hub_pid" 2>/dev/null; do
    if [ -z "$aircon_status" ] && ! kill -0 "$aircon_pid" 2>/dev/null; then
        wait_for "$aircon_pid" 1
        aircon_status=$waited
        echo "run-demo: aircon ended early (status $aircon_status)" >&2
        kill -TERM "$hub_pid" 2>/dev/null
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "run-demo: thingif-hub still runs after $((hub_timeout * 5)) s; stopping it" >&2
        kill -TERM "$hub_pid" 2>/dev/null
        break
    fi
    sleep 0.2
done
if wait_for "$hub_pid" 10; then
    hub_status=$waited
else
    kill -KILL "$hub_pid" 2>/dev/null
    hub_status=137
fi

if [ -z "$aircon_status" ]; then
    kill -TERM "$aircon_pid" 2>/dev/null
    if wait_for "$aircon_pid" 60; then
        aircon_status=$waited
    else
        echo "run-demo: aircon did not stop within 60 s of SIGTERM" >&2
        kill -KILL "$aircon_pid" 2>/dev/null
        aircon_status=137
    fi
fi
sleep 0.2 # let the labelling pipes print the last lines

status=$hub_status
echo
echo "demo: thingif-hub exited with status $hub_status; aircon with status $aircon_status"
if [ "$use_valgrind" -eq 1 ] && [ -f "$tmp/valgrind.log" ]; then
    grep -E "(definitely|indirectly|possibly) lost:|ERROR SUMMARY:|All heap blocks" "$tmp/valgrind.log" \
        | sed 's/^==[0-9]*== */valgrind│ /'
fi
if [ "$aircon_status" -eq 99 ] && [ "$use_valgrind" -eq 1 ]; then
    echo "run-demo: valgrind found definite leaks or memory errors:" >&2
    cat "$tmp/valgrind.log" >&2
    status=1
elif [ "$aircon_status" -ne 0 ]; then
    echo "run-demo: aircon failed (status $aircon_status)" >&2
    [ "$status" -eq 0 ] && status=1
fi
if [ "$status" -ne 0 ]; then
    echo "run-demo: broker log:" >&2
    tail -n 40 "$tmp/mosquitto.log" >&2
    echo "demo: FAILED"
else
    echo "demo: passed"
fi
exit "$status"
