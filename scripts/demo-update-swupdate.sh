# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# scripts/demo-update-swupdate.sh - steps 2 and 3 of scripts/demo-update.sh
# with run-demo.sh's --installer swupdate, sourced by it once the board runs
# (aircon --board … --swupdate "$tmp/swupdate"). SWUpdate, Debian's
# swupdate run for real, writes the board's slots: each release is a .swu
# (scripts/make-swu.sh) signed with a CMS signer's key, whose certificate the
# board holds as $tmp/swupdate/public.pem, and the CLI releases the .swu as
# it would any image. 1.2.0 goes to slot B, the board reboots into it and
# confirms it: SUCCEEDED, the slot's bytes the payload's. 1.3.0's
# sw-description names a wrong sha256: swupdate exits 1 with "HASH
# mismatch", the job ends FAILED INSTALL_FAILED with that reason, and the
# board stays on slot B, slot A unwritten. Uses demo-update.sh's helpers.

echo
echo "── 1b. The SWUpdate signer (its key kept offline like the release key; the board holds its certificate)"
mkdir -p "$tmp/swupdate" "$tmp/swu"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/swu/signer.key" -out "$tmp/swupdate/public.pem" \
    -subj /CN=aircon-swu-2026 -days 30 2>/dev/null || { echo "run-demo: openssl req failed" >&2; exit 1; }
# The board's two "partitions": the raw handler writes into a device that is there.
: >"$tmp/board/slot-a.img"
: >"$tmp/board/slot-b.img"
# swu VERSION PAYLOAD [SHA256]: the .swu of a payload for this board's slots.
swu() {
    bash "$src/scripts/make-swu.sh" --out "$tmp/swu/fw-$1.swu" --version "$1" --payload "$2" \
        --slots "$tmp/board" --cert "$tmp/swupdate/public.pem" --key "$tmp/swu/signer.key" ${3:+--sha256 "$3"} \
        || { echo "run-demo: scripts/make-swu.sh failed" >&2; exit 1; }
    echo "demo: $tmp/swu/fw-$1.swu ($(wc -c <"$tmp/swu/fw-$1.swu") bytes): $(cpio -it --quiet <"$tmp/swu/fw-$1.swu" | tr '\n' ' ')"
}

echo
echo "── 2. Release 1.2.0 as a .swu: downloaded in checked blocks, handed to swupdate, which writes slot B"
head -c 300000 /dev/urandom >"$tmp/swu/payload-1.2.0.img"
swu 1.2.0 "$tmp/swu/payload-1.2.0.img"
release 1.2.0 "$tmp/swu/fw-1.2.0.swu"
show update show "$thing_id" "$job_id" --wait REBOOTING --timeout "$wait_s" || fail "1.2.0 did not install"
grep -q "swupdate exited 0" "$tmp/aircon.log" || fail "no swupdate run ended well"
reboot_board "the board boots slot B (1.2.0, written by swupdate) on trial"
show update show "$thing_id" "$job_id" --wait SUCCEEDED --timeout "$wait_s" || fail "1.2.0 did not succeed"
[ "$(awk '$1 == "reportedVersion" {print $2}' "$tmp/last.out")" = 1.2.0 ] || fail "the hub does not record 1.2.0"
if cmp -s "$tmp/swu/payload-1.2.0.img" "$tmp/board/slot-b.img"; then
    echo "demo: ✓ slot B holds the payload swupdate wrote, byte for byte ($(wc -c <"$tmp/board/slot-b.img") bytes)"
else
    fail "slot B does not hold 1.2.0's payload"
fi

echo
echo "── 3. Release 1.3.0, a .swu whose sw-description names a wrong sha256 (its signature good): swupdate refuses it"
head -c 100000 /dev/urandom >"$tmp/swu/payload-1.3.0.img"
# (1.2.0's payload's: swupdate takes an all-zero hash for none at all)
swu 1.3.0 "$tmp/swu/payload-1.3.0.img" "$(sha256sum "$tmp/swu/payload-1.2.0.img" | cut -d' ' -f1)"
release 1.3.0 "$tmp/swu/fw-1.3.0.swu"
show update show "$thing_id" "$job_id" --wait FAILED --timeout "$wait_s" || fail "1.3.0 did not fail"
[ "$(awk '$1 == "reason" {print $2}' "$tmp/last.out")" = INSTALL_FAILED ] || fail "the failure's reason is not INSTALL_FAILED"
grep -q "swupdate exited 1: HASH mismatch" "$tmp/last.out" || fail "the job does not carry swupdate's reason"
if kill -0 "$device_pid" 2>/dev/null && grep -qx "active=b" "$tmp/board/bootenv" && grep -qx "try=-" "$tmp/board/bootenv" \
    && [ ! -s "$tmp/board/slot-a.img" ]; then
    echo "demo: ✓ the board runs on: slot B good, nothing on trial, slot A unwritten"
else
    fail "the board did not stay on slot B ($(tr '\n' ' ' <"$tmp/board/bootenv"); slot A $(wc -c <"$tmp/board/slot-a.img") bytes)"
fi
