# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# scripts/demo-update.sh - the firmware update part of scripts/run-demo.sh
# (--update), sourced by it once the broker, the hub (with an adminToken) and
# the CLI's user are up. AC-0001 runs on a simulated A/B board
# (examples-c/ab_board.c: two slot files and a boot environment; "reboot" is
# aircon exiting with status 3, and this script starting it again, as the
# board's power would). The operator makes a release key and the board's
# trust file, then with the CLI: a manifest, its signature, a rollout to the
# appliance; it downloads the image over its own connection, installs it
# into the other slot, reboots, passes its self-test and confirms: SUCCEEDED
# with 1.2.0, and the rollout completed. Then a release whose self-test
# fails: the trial is rejected, the board rolls back, the old version's boot
# reports ROLLED_BACK, and that one failure aborts its rollout (the
# rollout's abort criteria: 100 % of what ran, ROLLED_BACK). With
# run-demo.sh's --installer swupdate, steps 2 and 3 are
# scripts/demo-update-swupdate.sh's: SWUpdate writes the slots. Uses
# run-demo.sh's helpers and sets thing_id.

show onboard AC-0001 demo-pass --thing-type AirConditioner --firmware-version 1.0.0 --interval 1_MINUTE \
    || { echo "run-demo: thingif onboard failed" >&2; exit 1; }
thing_id=$(awk '$1 == "thingID" {print $2}' "$tmp/last.out")
[ -n "$thing_id" ] || { echo "run-demo: no thingID in the output" >&2; exit 1; }

# --- the release key (offline) and the board's trust file ----------------------
echo
echo "── 1. A release key (kept offline; the hub never sees it) and the trust file the firmware ships"
openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/fw-2026.pem" 2>/dev/null
openssl ec -in "$tmp/fw-2026.pem" -pubout -out "$tmp/fw-2026.pub" 2>/dev/null
python3 -c 'import json, sys; print(json.dumps({"keys": [{"kid": "fw-2026", "publicKey": open(sys.argv[1]).read()}]}))' \
    "$tmp/fw-2026.pub" >"$tmp/trust.json"
echo "demo: key fw-2026 in $tmp/fw-2026.pem, trust file $tmp/trust.json"
mkdir -p "$tmp/board"
# With swupdate: its folder (aircon --swupdate), holding the certificate it
# checks each .swu's signature against.
board_args=(--board "$tmp/board" --trust "$tmp/trust.json")
[ "$installer" = swupdate ] && board_args+=(--swupdate "$tmp/swupdate")

start_board() {
    start_device /dev/null "$1" --vendor-thing-id AC-0001 --password demo-pass "${board_args[@]}"
}
# The board asked for a reboot: aircon ends with status 3; power it up again.
reboot_board() {
    if wait_for "$device_pid" "$wait_s" && [ "$waited" = 3 ]; then
        echo "demo: the board reboots"
        start_board "$1"
    else
        fail "aircon did not exit to reboot (status ${waited:-still running})"
        kill -TERM "$device_pid" 2>/dev/null
        exit 1
    fi
}
# release VERSION IMAGE: the CLI's manifest and signature, then a rollout of
# it to the demo's appliance (the image pushed first; at most one in flight;
# one ROLLED_BACK stops it); sets rollout_id and, once the hub's release tick
# (every second) made the member's job, job_id.
release() {
    show update manifest "$2" --version "$1" --thing-type AirConditioner --block-size 4096 --out "$tmp/fw-$1.json" \
        || fail "thingif update manifest failed"
    show update sign "$tmp/fw-$1.json" --key "$tmp/fw-2026.pem" --kid fw-2026 || fail "thingif update sign failed"
    show update rollout create --image "$2" --manifest "$tmp/fw-$1.json" --thing "$thing_id" --rate 60 \
        --max-in-flight 1 --abort-percent 100 --abort-status ROLLED_BACK || fail "thingif update rollout create failed"
    rollout_id=$(tail -n 1 "$tmp/last.out")
    job_id=-
    local end=$((SECONDS + wait_s))
    while [ "$job_id" = - ] && [ "$SECONDS" -lt "$end" ]; do
        job_id=$("$cli_bin" update rollout things "$rollout_id" 2>/dev/null | awk -v t="$thing_id" '$1 == t {print $4}')
        [ -n "$job_id" ] || job_id=-
        [ "$job_id" != - ] || sleep 0.1
    done
    [ "$job_id" != - ] || fail "rollout $rollout_id released no job"
    show update rollout things "$rollout_id" || fail "thingif update rollout things failed"
}

start_board "the appliance on its board, factory firmware 1.0.0 in slot A"

if [ "$installer" = swupdate ]; then
    # shellcheck source=/dev/null
    . "$src/scripts/demo-update-swupdate.sh"
else
echo
echo "── 2. Release 1.2.0, rolled out: downloaded in checked blocks, installed into slot B, rebooted, confirmed"
head -c 300000 /dev/urandom >"$tmp/fw-1.2.0.img"
release 1.2.0 "$tmp/fw-1.2.0.img"
show update show "$thing_id" "$job_id" --wait REBOOTING --timeout "$wait_s" || fail "1.2.0 did not install"
reboot_board "the board boots slot B (1.2.0) on trial"
show update show "$thing_id" "$job_id" --wait SUCCEEDED --timeout "$wait_s" || fail "1.2.0 did not succeed"
[ "$(awk '$1 == "reportedVersion" {print $2}' "$tmp/last.out")" = 1.2.0 ] || fail "the hub does not record 1.2.0"
show update rollout show "$rollout_id" --wait completed --timeout "$wait_s" || fail "the 1.2.0 rollout did not complete"

echo
echo "── 3. Release 1.3.0 fails its self-test: the board rolls back to 1.2.0, and its rollout stops itself"
{ printf 'SELFTEST-FAIL'; head -c 100000 /dev/urandom; } >"$tmp/fw-1.3.0.img"
release 1.3.0 "$tmp/fw-1.3.0.img"
show update show "$thing_id" "$job_id" --wait REBOOTING --timeout "$wait_s" || fail "1.3.0 did not install"
reboot_board "the board boots slot A (1.3.0) on trial"
reboot_board "the board boots slot B (1.2.0) again"
show update show "$thing_id" "$job_id" --wait ROLLED_BACK --timeout "$wait_s" || fail "1.3.0 did not roll back"
[ "$(awk '$1 == "reason" {print $2}' "$tmp/last.out")" = TRIAL_ROLLED_BACK ] || fail "the rollback's reason is not TRIAL_ROLLED_BACK"
show update rollout show "$rollout_id" --wait aborted --timeout "$wait_s" || fail "the 1.3.0 rollout did not stop itself"
fi
show update list "$thing_id" || fail "thingif update list failed"

send "4. The appliance still takes commands on 1.2.0" "$thing_id" DONE "true" turnPower power=true
