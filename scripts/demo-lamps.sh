# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# scripts/demo-lamps.sh - the gateway part of scripts/run-demo.sh
# (--gateway), sourced by it once the broker, the hub and the CLI's user are
# up: the owner registers GW-0001 as a gateway; the gateway example
# (examples-c/lamps.c) onboards itself and three lamps behind it, each a
# thing of its own; the CLI lists them, sends each lamp commands and reads
# their states, and sends one to an unplugged lamp, which the hub holds until the
# lamp is back. It uses run-demo.sh's helpers (show, fail, start_device,
# check_command, check_state, send) and types on the gateway's console
# through a FIFO.

show onboard GW-0001 demo-pass --thing-type LampGateway --firmware-version 1.0.0 --layout GATEWAY \
    || { echo "run-demo: thingif onboard failed" >&2; exit 1; }
thing_id=$(awk '$1 == "thingID" {print $2}' "$tmp/last.out")
[ -n "$thing_id" ] || { echo "run-demo: no thingID in the output" >&2; exit 1; }

# The gateway's console (plug, unplug, remove, list) is its stdin: a FIFO
# this script holds open for reading and writing, so neither end waits.
mkfifo "$tmp/lamps.console"
exec 4<>"$tmp/lamps.console"
console() { echo "$*" >&4; }

# The gateway onboards itself with the vendorThingID and password the owner
# registered (with a certificate, as aircon does), then each lamp it finds
# on its radio through its own connection: the lamps get the gateway's owner.
start_device "$tmp/lamps.console" "the gateway; it onboards itself, then LAMP-0000 .. LAMP-0002 behind it" \
    --vendor-thing-id GW-0001 --password demo-pass --lamps 3

# wait_line PATTERN: waits for a line of the gateway's output; prints its match.
wait_line() {
    local deadline=$((SECONDS + wait_s)) found
    until found=$(grep -o -m1 -E "$1" "$tmp/lamps.log" 2>/dev/null); do
        if ! kill -0 "$device_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then return 1; fi
        sleep 0.1
    done
    echo "$found"
}

lamp=()
for n in 0 1 2; do
    line=$(wait_line "LAMP-000$n added as [^ ]+") || { fail "LAMP-000$n was not added"; break; }
    lamp[n]=${line##* }
done

if [ "${#lamp[@]}" -eq 3 ]; then
    # online_lamps N: waits until the hub lists N of the gateway's lamps online.
    online_lamps() {
        local deadline=$((SECONDS + wait_s))
        until [ "$(thingif end-node list "$thing_id" --json 2>/dev/null | grep -o '"online" *: *true' | wc -l)" -eq "$1" ]; do
            [ "$SECONDS" -lt "$deadline" ] || { fail "the hub does not list $1 lamps online"; return; }
            sleep 0.2
        done
    }
    # The hub sees each lamp online behind the gateway once the gateway says so.
    online_lamps 3
    echo
    echo "── The gateway's end nodes, as the owner sees them"
    show end-node list "$thing_id" || fail "thingif end-node list failed"

    send "1. LAMP-0000: on, at 80 % (two actions, run by the gateway's radio)" "${lamp[0]}" DONE "true true" \
        turnPower power=true setBrightness brightness=80 --schema Lamp-Demo
    send "2. LAMP-0001: a brightness out of range (the gateway refuses it)" "${lamp[1]}" INCOMPLETE "false" \
        setBrightness brightness=150 --schema Lamp-Demo

    echo
    echo "── 3. LAMP-0002 unplugged: the hub holds its command until the lamp is back"
    echo "\$ (gateway console) unplug 2"
    console unplug 2
    online_lamps 2
    show end-node get "$thing_id" "${lamp[2]}" || fail "thingif end-node get failed"
    if show command send "${lamp[2]}" turnPower power=true --schema Lamp-Demo; then
        held=$(awk '$1 == "command" && $3 == "sent" {print $2; exit}' "$tmp/last.out")
        check_command "${lamp[2]}" "$held" SENDING ""
        echo "\$ (gateway console) plug 2"
        console plug 2
        deadline=$((SECONDS + wait_s))
        until thingif command get "${lamp[2]}" "$held" --json 2>/dev/null | grep -q '"commandState" *: *"DONE"'; do
            [ "$SECONDS" -lt "$deadline" ] || break
            sleep 0.2
        done
        show command get "${lamp[2]}" "$held"
        check_command "${lamp[2]}" "$held" DONE "true"
    else
        fail "thingif command send failed"
    fi

    # --- read back -------------------------------------------------------------------
    echo
    echo "── 4. Each lamp's state (the gateway uploads it for each lamp after each change)"
    for n in 0 1 2; do
        case $n in
            0) want='{"power": true, "brightness": 80}' ;;
            1) want='{"power": false, "brightness": 50}' ;;
            2) want='{"power": true, "brightness": 50}' ;;
        esac
        check_state "${lamp[n]}" "$want" "LAMP-000$n"
    done
    echo
    echo "\$ (gateway console) list"
    console list
    wait_line "LAMP-0002  ${lamp[2]}  online" >/dev/null || fail "the gateway does not list LAMP-0002 online"
fi
exec 4>&-
