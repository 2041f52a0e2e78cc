# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# scripts/demo-aircon.sh - the AirConditioner-Demo part of scripts/run-demo.sh,
# sourced by it once the broker, the hub and the CLI's user are up: the owner
# registers AC-0001, aircon onboards itself, the CLI sends the seeds' three
# commands and reads the commands and the state back. It uses run-demo.sh's
# helpers (show, fail, start_device, check_command, check_state, send) and sets thing_id
# and watch_pid.

show onboard AC-0001 demo-pass --thing-type AirConditioner --firmware-version 1.0.0 --interval 1_MINUTE \
    || { echo "run-demo: thingif onboard failed" >&2; exit 1; }
thing_id=$(awk '$1 == "thingID" {print $2}' "$tmp/last.out")
thing_token=$(awk '$1 == "accessToken" {print $2}' "$tmp/last.out")
[ -n "$thing_id" ] && [ -n "$thing_token" ] || { echo "run-demo: no thingID/accessToken in the output" >&2; exit 1; }

echo
echo "demo: watching $thing_id in the background (thingif watch: results as they arrive)"
"$cli_bin" watch "$thing_id" --timeout $((wait_s * 5)) > >(tee "$tmp/watch.log" | label watch) 2>&1 &
watch_pid=$!
deadline=$((SECONDS + 15))
until grep -q "^watching" "$tmp/watch.log" 2>/dev/null; do
    if ! kill -0 "$watch_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
        fail "thingif watch did not start"
        break
    fi
    sleep 0.1
done

# The appliance onboards itself with the vendorThingID and password the
# owner registered (same thing): with TLS and no certificate of its own, it
# makes its key, sends a CSR and connects with the certificate the hub signs.
start_device /dev/null "the appliance; it onboards itself with a certificate" \
    --vendor-thing-id AC-0001 --password demo-pass

# --- the seeds' three commands ---------------------------------------------------
send "1. Turn on at 25°C, fan speed 5 (three actions in one command)" "$thing_id" DONE "true true true" \
    turnPower power=true setPresetTemperature presetTemperature=25 setFanSpeed fanSpeed=5 \
    --title "Cool down" --description "Before I get home" --metadata '{"origin":"demo"}'
send "2. A temperature out of range (the appliance refuses it)" "$thing_id" INCOMPLETE "false" \
    setPresetTemperature presetTemperature=99
send "3. Power off" "$thing_id" DONE "true" \
    turnPower power=false

# --- read back ---------------------------------------------------------------------
echo
echo "── 4. All of the thing's commands, and its state"
show command list "$thing_id" || fail "thingif command list failed"
[ "$(grep -c -E ' (DONE|INCOMPLETE) ' "$tmp/last.out")" -eq 3 ] || fail "command list does not show 3 finished commands"
# The appliance uploads its state after each command; wait for the last one.
check_state "$thing_id" '{"power": false, "presetTemperature": 25, "fanSpeed": 5}' AC-0001

# thingif watch must have printed the three finished commands.
deadline=$((SECONDS + 5))
until [ "$(grep -c '^commandID' "$tmp/watch.log")" -ge 3 ] || [ "$SECONDS" -ge "$deadline" ]; do sleep 0.2; done
[ "$(grep -c '^commandID' "$tmp/watch.log")" -eq 3 ] || fail "thingif watch printed $(grep -c '^commandID' "$tmp/watch.log") commands, expected 3"
