#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Makes a SWUpdate image (.swu) for the A/B board of aircon --swupdate
# (examples-c/swupdate_installer.h): a cpio archive in the newc format of
#
#   sw-description      libconfig: the version, hardware-compatibility
#                       ["1.0"], and the set "stable" with two modes, copy1
#                       writing the payload with the raw handler into
#                       SLOTS/slot-a.img, copy2 into SLOTS/slot-b.img, each
#                       with the payload's sha256
#   sw-description.sig  its CMS signature (openssl cms, DER), by the signer's
#                       certificate and key: swupdate -k checks it
#   the payload         under its own file name
#
# --sha256 HEX puts another hash in sw-description (a broken image that
# swupdate must refuse). On a real board the devices are partitions
# (/dev/mmcblk0p2, …) and the sw-description also sets the bootloader's
# variables (docs/UPDATES.md, "A real installer: SWUpdate").
#
# usage: scripts/make-swu.sh --out FILE.swu --version V --payload FILE --slots DIR
#                            --cert CERT.pem --key KEY.pem [--sha256 HEX]
set -euo pipefail

out="" version="" payload="" slots="" cert="" key="" sha=""
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:-}; shift 2 || break ;;
        --version) version=${2:-}; shift 2 || break ;;
        --payload) payload=${2:-}; shift 2 || break ;;
        --slots) slots=${2:-}; shift 2 || break ;;
        --cert) cert=${2:-}; shift 2 || break ;;
        --key) key=${2:-}; shift 2 || break ;;
        --sha256) sha=${2:-}; shift 2 || break ;;
        -h|--help) sed -n '4,/^set -euo pipefail/s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "make-swu: unknown argument $1" >&2; exit 2 ;;
    esac
done
for v in out version payload slots cert key; do
    [ -n "${!v}" ] || { echo "make-swu: --$v is required" >&2; exit 2; }
done
[ -f "$payload" ] || { echo "make-swu: no payload $payload" >&2; exit 2; }
command -v cpio >/dev/null || { echo "make-swu: cpio not found (apt install cpio)" >&2; exit 2; }
name=$(basename "$payload")
# Names and paths go into a libconfig string: no quote or backslash.
for v in "$version" "$name" "$slots"; do
    case "$v" in *'"'* | *'\'*) echo "make-swu: no quote or backslash in $v" >&2; exit 2 ;; esac
done
[ -n "$sha" ] || sha=$(sha256sum "$payload" | cut -d' ' -f1)

work=$(mktemp -d "${TMPDIR:-/tmp}/make-swu.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$payload" "$work/$name"
cat >"$work/sw-description" <<EOF
software =
{
    version = "$version";
    hardware-compatibility = [ "1.0" ];
    stable:
    {
        copy1: { images: ( { filename = "$name"; type = "raw"; device = "$slots/slot-a.img"; sha256 = "$sha"; } ); };
        copy2: { images: ( { filename = "$name"; type = "raw"; device = "$slots/slot-b.img"; sha256 = "$sha"; } ); };
    };
}
EOF
openssl cms -sign -in "$work/sw-description" -out "$work/sw-description.sig" -signer "$cert" -inkey "$key" \
    -outform DER -nosmimecap -binary
# sw-description first, its signature next: swupdate reads the archive as a stream.
(cd "$work" && printf '%s\n' sw-description sw-description.sig "$name" | cpio -o -H newc --quiet) >"$out"
