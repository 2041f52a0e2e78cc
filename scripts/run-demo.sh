#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# The AirConditioner-Demo round trip, end to end, on this machine only:
#
#   mosquitto      free ports on 127.0.0.1, secured as docs/SECURITY.md says:
#                  no anonymous clients, TLS with certificates made here,
#                  things authenticated by client certificates from the
#                  hub's things CA (no per-thing record in the broker)
#   thingif-hub    the framework side: MQTT for things, the REST API for apps
#                  (a free port on 127.0.0.1, data in memory)
#   thingif        the CLI, as a person at a terminal would use it: creates a
#                  user, registers AC-0001 with its password (the appliance
#                  then onboards itself with them, sends a CSR and gets its
#                  certificate from the hub), sends the seeds' three commands and
#                  waits for each one's results, lists the commands, reads
#                  the state; `thingif watch` prints the results as they come
#   aircon         the C appliance (examples-c/aircon.c) on libthingif
#
# With --gateway, the same broker, hub and CLI drive the gateway example
# instead (examples-c/lamps.c, scripts/demo-lamps.sh): the owner registers
# GW-0001 as a gateway, the gateway onboards itself and three lamps behind
# it, and the CLI sends each lamp commands, reads their states, and sends a
# command to an unplugged lamp that the hub holds until it is back.
#
# With --update, AC-0001 runs on a simulated A/B board and takes firmware
# updates (scripts/demo-update.sh): a release key, the CLI's manifest,
# signature and job, the download, install, reboot and confirmation, then a
# release whose self-test fails and rolls back. With --installer swupdate,
# SWUpdate (Debian's swupdate package, run for real) writes the board's
# slots: the releases are signed .swu images (scripts/make-swu.sh), the
# first installed and confirmed, the second broken and refused by swupdate
# (FAILED INSTALL_FAILED, the board still on its slot); skipped (exit 77)
# when swupdate or cpio is not installed.
#
# Everything lives in a temporary folder (broker config, the appliance's
# storage, the CLI's saved credentials, logs) that is removed on exit. Exits 0
# only when every result and the final state are as expected; non-zero when
# one is not, when the appliance crashed, or (with --valgrind) leaked.
#
# usage: scripts/run-demo.sh [--build-dir DIR] [--aircon PATH] [--hub PATH] [--cli PATH]
#                            [--gateway | --update [--installer board|swupdate]]
#                            [--no-hub] [--valgrind] [--keep]
#   --build-dir DIR  the CMake build folder holding aircon (and lamps)
#   --gateway        the gateway demo: DIR/lamps in place of aircon
#   --update         the firmware update demo (aircon on a simulated A/B board)
#   --installer NAME with --update: who writes the slots, the board's own
#                    copy (board, the default) or swupdate
#   --aircon PATH    run this appliance program instead of DIR/aircon (it
#                    takes aircon's arguments: --port, --cafile, --storage,
#                    --vendor-thing-id, --password, and stops on SIGTERM)
#   --hub PATH       the thingif-hub program (default: SwiftPM's, from
#                    `swift build --show-bin-path`)
#   --cli PATH       the thingif CLI (default: SwiftPM's, as for --hub)
#   --no-hub         there is no hub to run: report the demo skipped (exit 77)
#   --valgrind       run the appliance under valgrind; definite leaks fail
#   --keep           keep the temporary folder (its path is printed)
# THINGIF_TARGET_RUN (set by a cross build's ctest, for example
# "qemu-aarch64 -L build/sysroot-arm64") runs the appliance, a program for
# the board, under that emulator; mosquitto, the hub and the CLI stay native.
set -uo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build_dir="" aircon_bin="" hub_bin="" cli_bin="" no_hub=0 use_valgrind=0 keep=0 gateway=0 update=0 installer=board
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build_dir=${2:-}; shift 2 || break ;;
        --aircon) aircon_bin=${2:-}; shift 2 || break ;;
        --hub) hub_bin=${2:-}; shift 2 || break ;;
        --cli) cli_bin=${2:-}; shift 2 || break ;;
        --no-hub) no_hub=1; shift ;;
        --gateway) gateway=1; shift ;;
        --update) update=1; shift ;;
        --installer) installer=${2:-}; shift 2 || break ;;
        --valgrind) use_valgrind=1; shift ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '4,/^set -uo pipefail/s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "run-demo: unknown argument $1" >&2; exit 2 ;;
    esac
done
case "$installer" in
    board) ;;
    swupdate)
        [ "$update" -eq 1 ] || { echo "run-demo: --installer goes with --update" >&2; exit 2; }
        for tool in swupdate cpio; do
            command -v "$tool" >/dev/null && continue
            echo "run-demo: SKIPPED: $tool is not installed (apt install swupdate cpio; scripts/install-deps.sh does)"
            exit 77
        done
        ;;
    *) echo "run-demo: --installer is board or swupdate, not $installer" >&2; exit 2 ;;
esac
if [ "$no_hub" -eq 1 ]; then
    echo "run-demo: SKIPPED: no thingif-hub given (SwiftPM builds it and the CLI: swift build --product thingif-hub, then --product thingif;"
    echo "          configure CMake with -DTHINGIF_HUB_BIN_DIR=\"\$(swift build --show-bin-path)\")"
    exit 77
fi
[ -n "$aircon_bin" ] || [ -n "$build_dir" ] || { echo "run-demo: --build-dir DIR or --aircon PATH is required" >&2; exit 2; }
[ -n "$aircon_bin" ] || aircon_bin=$build_dir/aircon
# The device program this run starts: the appliance, or the gateway example.
device=aircon device_bin=$aircon_bin
if [ "$gateway" -eq 1 ]; then
    [ -n "$build_dir" ] || { echo "run-demo: --gateway needs --build-dir DIR (holding lamps)" >&2; exit 2; }
    device=lamps device_bin=$build_dir/lamps
fi
# The part of the demo sourced below (scripts/demo-$part.sh).
part=$device
[ "$update" -eq 1 ] && part=update
if [ -z "$hub_bin" ] || [ -z "$cli_bin" ]; then
    swift_bin=$(cd "$src" && swift build --show-bin-path 2>/dev/null) \
        || { echo "run-demo: swift build --show-bin-path failed; pass --hub and --cli" >&2; exit 2; }
    [ -n "$hub_bin" ] || hub_bin=$swift_bin/thingif-hub
    [ -n "$cli_bin" ] || cli_bin=$swift_bin/thingif
fi
for f in "$device_bin" "$hub_bin" "$cli_bin"; do
    [ -x "$f" ] || { echo "run-demo: $f not found; build first (scripts/demo.sh shows how)" >&2; exit 2; }
done
mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)
[ -x "$mosquitto_bin" ] || { echo "run-demo: mosquitto not found (apt install mosquitto)" >&2; exit 2; }

wait_s=60
if [ "$use_valgrind" -eq 1 ]; then
    command -v valgrind >/dev/null || { echo "run-demo: valgrind not found" >&2; exit 2; }
    wait_s=180
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/thingif-demo.XXXXXX")
mosq_pid="" hub_pid="" device_pid="" watch_pid=""

# Stops what is still running (by PID), then removes the temporary folder.
cleanup() {
    local pid
    for pid in $watch_pid $device_pid $hub_pid $mosq_pid; do
        kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
    done
    for pid in $watch_pid $device_pid $hub_pid $mosq_pid; do
        wait_for "$pid" 10 || { kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
    done
    if [ "$keep" -eq 1 ]; then echo "run-demo: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

. "$src/scripts/proc.sh"

# Prefixes every line with who said it, dropping the program's own prefix.
label() { sed -u -e "s/^$1: //" -e "s/^/$(printf '%-7s' "$1")│ /"; }

failures=0
fail() { echo "demo: ✗ $*"; failures=$((failures + 1)); }

# The CLI, with its saved credentials in the temporary folder.
export THINGIF_CONFIG=$tmp/cli.json THINGIF_APP_ID=demoApp
unset THINGIF_TOKEN THINGIF_USER_ID
thingif() { "$cli_bin" "$@"; }
# Shows a CLI command as typed, then runs it, its output indented.
show() {
    local a shown=""
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_./:=@,+-]+$ ]]; then shown+=" $a"; else shown+=" '${a//\'/\'\\\'\'}'"; fi
    done
    echo
    echo "\$ thingif$shown"
    "$cli_bin" "$@" 2>&1 | tee "$tmp/last.out" | sed -u 's/^/  /'
    return "${PIPESTATUS[0]}"
}

# --- the broker ------------------------------------------------------------
# The secured configuration of docs/SECURITY.md: no anonymous clients, the
# dynamic-security plugin (the hub makes its own and the bootstrap
# identity's credentials and rights), TLS with a CA and certificates made
# here by openssl, and the listener for things with certificates from the
# things CA (pattern rules: a new thing changes nothing in the broker).
port=$(free_port)
tls_port=$(free_port)
while [ "$tls_port" = "$port" ]; do tls_port=$(free_port); done
cert_port=$(free_port)
while [ "$cert_port" = "$port" ] || [ "$cert_port" = "$tls_port" ]; do cert_port=$(free_port); done
admin_password=$(openssl rand -hex 16)
bash "$src/deploy/make-broker-config.sh" "$tmp/broker" --port "$port" --tls-port "$tls_port" \
    --cert-port "$cert_port" --admin-user thingif-hub --admin-password "$admin_password" \
    || { echo "run-demo: deploy/make-broker-config.sh failed" >&2; exit 1; }
cafile=$tmp/broker/pki/ca.crt
echo "demo: mosquitto on 127.0.0.1, TLS on port $tls_port (CA $cafile), things' certificates on port $cert_port;"
echo "      no anonymous clients (files in $tmp)"
"$mosquitto_bin" -c "$tmp/broker/mosquitto.conf" >"$tmp/mosquitto.log" 2>&1 &
mosq_pid=$!
deadline=$((SECONDS + 10))
until (exec 3<>"/dev/tcp/127.0.0.1/$tls_port") 2>/dev/null; do
    if ! kill -0 "$mosq_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
        echo "run-demo: mosquitto did not start:" >&2
        cat "$tmp/mosquitto.log" >&2
        exit 1
    fi
    sleep 0.1
done

# --- the hub -----------------------------------------------------------------
echo "demo: starting thingif-hub (the framework side: MQTT for the thing, REST for the CLI)"
# The hub's broker password (and the operator's token) go through the
# environment, not the command line.
export THINGIF_ADMIN_TOKEN
THINGIF_ADMIN_TOKEN=$(openssl rand -hex 16)
THINGIF_HUB_ADMIN_TOKEN=$THINGIF_ADMIN_TOKEN THINGIF_HUB_BROKER_PASSWORD=$admin_password \
"$hub_bin" --broker-port "$tls_port" --broker-cafile "$cafile" --broker-username thingif-hub \
    --advertised-tls-port "$tls_port" --http-port 0 --memory \
    --thing-ca-cert "$tmp/broker/pki/things-ca.crt" --thing-ca-key "$tmp/broker/pki/things-ca.key" \
    --advertised-cert-port "$cert_port" \
    --thing-crl "$tmp/broker/things-crl.pem" --broker-acl "$tmp/broker/acl" \
    --broker-pid-file "$tmp/broker/mosquitto.pid" \
    > >(tee "$tmp/hub.log" | label hub) 2>&1 &
hub_pid=$!
hub_url=""
deadline=$((SECONDS + 20))
until [ -n "$hub_url" ]; do
    hub_url=$(sed -n 's|.*HTTP API on \(http://[0-9.:]*\).*|\1|p' "$tmp/hub.log" 2>/dev/null | head -n 1)
    [ -n "$hub_url" ] && grep -q "serving app" "$tmp/hub.log" && break
    hub_url=""
    if ! kill -0 "$hub_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
        echo "run-demo: thingif-hub did not start" >&2
        exit 1
    fi
    sleep 0.1
done
export THINGIF_HUB_URL=$hub_url
echo "demo: the hub's REST API is at $hub_url; the CLI finds it through THINGIF_HUB_URL"

# --- a user and the thing ------------------------------------------------------
show user create || { echo "run-demo: thingif user create failed" >&2; exit 1; }

# start_device STDIN WHAT ARGS…: starts $device_bin (WHAT says what it is)
# on the broker's TLS port with its storage in $tmp/$device and ARGS, its
# stdin from STDIN and its output labelled; under THINGIF_TARGET_RUN's
# emulator and --valgrind when set. Sets device_pid.
start_device() {
    local input=$1 what=$2
    shift 2
    local cmd=("$device_bin" --port "$tls_port" --cafile "$cafile" --storage "$tmp/$device" "$@")
    if [ -n "${THINGIF_TARGET_RUN:-}" ]; then
        # shellcheck disable=SC2206
        cmd=(${THINGIF_TARGET_RUN} "${cmd[@]}")
        echo "demo: $device runs under ${THINGIF_TARGET_RUN}"
    fi
    if [ "$use_valgrind" -eq 1 ]; then
        cmd=(valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99
             --log-file="$tmp/valgrind.log" "${cmd[@]}")
        echo "demo: starting $device under valgrind ($what)"
    else
        echo "demo: starting $device ($what)"
    fi
    # timeout(1): should this script be killed before it stops the device,
    # the device still gets its SIGTERM, later (it runs until one comes).
    # A SIGTERM to timeout reaches the device at once.
    timeout $((wait_s * 10)) "${cmd[@]}" < "$input" > >(tee "$tmp/$device.log" | label "$device") 2>&1 &
    device_pid=$!
}

# check_command THING ID STATE OUTCOMES: the command's state and each
# action's success (e.g. "true true true"), read back as JSON.
check_command() {
    local json
    json=$(thingif command get "$1" "$2" --json) || { fail "command get $2 failed"; return; }
    if ! python3 -c '
import json, sys
c = json.loads(sys.argv[1]); want_state = sys.argv[2]; want = [w == "true" for w in sys.argv[3].split()]
got = [list(r.values())[0].get("succeeded") for r in c.get("actionResults", [])]
ok = c.get("commandState") == want_state and got == want
sys.exit(0 if ok else "command %s: state %s, results %s; expected %s, %s" % (
    c.get("commandID"), c.get("commandState"), got, want_state, want))' "$json" "$3" "$4"; then
        failures=$((failures + 1))
    fi
}

# check_state THING JSON NAME: waits up to 15 s until THING's state holds
# every field of JSON (the device uploads it after each change), shows it,
# and fails (naming NAME) when it never does.
check_state() {
    local deadline=$((SECONDS + 15)) ok=0
    while [ "$SECONDS" -lt "$deadline" ]; do
        if thingif state get "$1" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin); want = json.loads(sys.argv[1])
sys.exit(0 if all(s.get(k) == v for k, v in want.items()) else 1)' "$2"; then
            ok=1
            break
        fi
        sleep 0.3
    done
    show state get "$1" || fail "thingif state get failed"
    [ "$ok" -eq 1 ] || fail "the state of $3 is not $2"
}

# send TITLE THING STATE OUTCOMES ARGS…: sends a command to THING with the
# CLI (ARGS: its actions and options), waits for its results, checks them.
send() {
    local title=$1 to=$2 state=$3 outcomes=$4
    shift 4
    echo
    echo "── $title"
    if show command send "$to" "$@" --wait "$wait_s"; then
        local cid
        cid=$(awk '$1 == "commandID" {print $2; exit}' "$tmp/last.out")
        if [ -n "$cid" ]; then check_command "$to" "$cid" "$state" "$outcomes"; else fail "no commandID in the output"; fi
    else
        fail "thingif command send failed"
    fi
}

# --- the device and its commands (scripts/demo-aircon.sh or scripts/demo-lamps.sh) ---
# shellcheck source=/dev/null
. "$src/scripts/demo-$part.sh"

# --- stop --------------------------------------------------------------------------
if [ -n "$watch_pid" ]; then
    kill -TERM "$watch_pid" 2>/dev/null
    wait_for "$watch_pid" 10 || kill -KILL "$watch_pid" 2>/dev/null
fi
device_status=""
if kill -0 "$device_pid" 2>/dev/null; then
    kill -TERM "$device_pid" 2>/dev/null
    if wait_for "$device_pid" 60; then
        device_status=$waited
    else
        echo "run-demo: $device did not stop within 60 s of SIGTERM" >&2
        kill -KILL "$device_pid" 2>/dev/null
        device_status=137
    fi
else
    wait_for "$device_pid" 1
    device_status=$waited
    echo "run-demo: $device ended early (status $device_status)" >&2
fi
kill -TERM "$hub_pid" 2>/dev/null
if wait_for "$hub_pid" 10; then hub_status=$waited; else kill -KILL "$hub_pid" 2>/dev/null; hub_status=137; fi
sleep 0.2 # let the labelling pipes print the last lines

echo
echo "demo: $device exited with status $device_status; thingif-hub with status $hub_status"
if [ "$use_valgrind" -eq 1 ] && [ -f "$tmp/valgrind.log" ]; then
    grep -E "(definitely|indirectly|possibly) lost:|ERROR SUMMARY:|All heap blocks" "$tmp/valgrind.log" \
        | sed 's/^==[0-9]*== */valgrind│ /'
fi
# The device ran on the certificate the hub signed for its topic (no
# broker password, no per-thing record in the broker).
if [ -s "$tmp/$device/thing-cert.pem" ] \
    && openssl verify -CAfile "$tmp/broker/pki/things-ca.crt" "$tmp/$device/thing-cert.pem" >/dev/null 2>&1; then
    echo "demo: ✓ the client certificate of $device: $(openssl x509 -in "$tmp/$device/thing-cert.pem" -noout -subject),"
    echo "      signed by the things CA; its key never left $tmp/$device/thing-key.pem"
else
    fail "$device holds no client certificate signed by the things CA"
fi
status=0
[ "$failures" -eq 0 ] || status=1
if [ "$device_status" -eq 99 ] && [ "$use_valgrind" -eq 1 ]; then
    echo "run-demo: valgrind found definite leaks or memory errors:" >&2
    cat "$tmp/valgrind.log" >&2
    status=1
elif [ "$device_status" -ne 0 ]; then
    echo "run-demo: $device failed (status $device_status)" >&2
    status=1
fi
if [ "$hub_status" -ne 0 ]; then
    echo "run-demo: thingif-hub did not stop cleanly (status $hub_status)" >&2
    status=1
fi
if [ "$status" -ne 0 ]; then
    echo "run-demo: broker log:" >&2
    tail -n 40 "$tmp/mosquitto.log" >&2
    echo "demo: FAILED ($failures unexpected result(s))"
else
    echo "demo: passed: every result and the final state came back as expected"
fi
exit "$status"
