#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# ABI guard: the functions declared in include/thingif.h and the thingif_*
# symbols that libthingif.so exports must be the same set, and every export
# must carry the version node of cmake/thingif.map (THINGIF_<ABI>.0). Catches a
# @c function the header forgot and a declaration the library does not
# implement (the compiler checks neither).
#
# The header is run through the C preprocessor (comments and the
# extern "C" guard go, jansson.h is left out by its line markers); then every
# declaration at file scope whose name is followed by "(" is a function,
# typedefs (the callback types) excepted.
#
# usage: scripts/check-abi.sh --header thingif.h --lib libthingif.so
#                             [--cc CC] [--cflags FLAGS] [--version-node NODE]
set -euo pipefail

header="" lib="" cc=cc cflags=""
node=$(sed -n 's/^\(THINGIF_[0-9.]*\) {.*/\1/p' "$(dirname "$0")/../cmake/thingif.map")
while [ $# -gt 0 ]; do
    case "$1" in
        --header) header=$2; shift 2 ;;
        --lib) lib=$2; shift 2 ;;
        --cc) cc=$2; shift 2 ;;
        --cflags) cflags=$2; shift 2 ;;
        --version-node) node=$2; shift 2 ;;
        -h|--help) sed -n '4,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "abi: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -f "$header" ] && [ -f "$lib" ] || { echo "abi: --header FILE and --lib FILE are required" >&2; exit 2; }

# shellcheck disable=SC2086
declared=$("$cc" -E $cflags -x c "$header" | python3 -c '
import os, re, sys
header = os.path.realpath(sys.argv[1])
text, keep = [], False
for line in sys.stdin:
    m = re.match(r"#\s*\d+\s+\"([^\"]*)\"", line)
    if m:
        keep = os.path.realpath(m.group(1)) == header if os.path.exists(m.group(1)) else False
        continue
    if keep:
        text.append(line)
src = " ".join(text)
src = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", src)
# Drop the bodies of enums and structs, innermost first.
while True:
    new = re.sub(r"\{[^{}]*\}", " ", src)
    if new == src:
        break
    src = new
names = set()
for decl in src.split(";"):
    decl = " ".join(decl.split())
    if not decl or re.match(r"(typedef|extern\s+\"C\")\b", decl):
        continue
    m = re.match(r"[^()]*?\b([A-Za-z_]\w*)\s*\(", decl)
    if m and not re.search(r"\(\s*\*", decl[:m.end() + 1]):
        names.add(m.group(1))
print("\n".join(sorted(names)))
' "$header")

# Defined dynamic symbols named thingif_*, with their version node.
exported_raw=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep '^thingif_' || true)
exported=$(printf '%s\n' "$exported_raw" | sed 's/@.*//' | grep . | sort -u || true)

n_decl=$(printf '%s\n' "$declared" | grep -c . || true)
n_exp=$(printf '%s\n' "$exported" | grep -c . || true)
echo "abi: $n_decl functions declared in $header, $n_exp thingif_* symbols exported by $lib"

fail=0
missing_decl=$(comm -13 <(printf '%s\n' "$declared") <(printf '%s\n' "$exported") | grep . || true)
missing_export=$(comm -23 <(printf '%s\n' "$declared") <(printf '%s\n' "$exported") | grep . || true)
if [ -n "$missing_decl" ]; then
    echo "abi: FAIL: exported but not declared in the header:" >&2
    printf '  %s\n' $missing_decl >&2
    fail=1
fi
if [ -n "$missing_export" ]; then
    echo "abi: FAIL: declared in the header but not exported:" >&2
    printf '  %s\n' $missing_export >&2
    fail=1
fi
unversioned=$(printf '%s\n' "$exported_raw" | grep . | grep -v "@@\?$node\$" || true)
if [ -n "$unversioned" ]; then
    echo "abi: FAIL: exports without the version node $node:" >&2
    printf '  %s\n' $unversioned >&2
    fail=1
fi
[ "$n_decl" -gt 0 ] || { echo "abi: FAIL: no declarations parsed from $header" >&2; fail=1; }

[ "$fail" -eq 0 ] && echo "abi: ok (all in $node)"
exit "$fail"
