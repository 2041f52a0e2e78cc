#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Formats the project's C (clang-format, .clang-format) and Swift
# (swift-format from the toolchain, .swift-format: 4 spaces, 120 columns)
# in place, or with --check only reports what is not formatted and exits 1;
# --check also runs scripts/check-license.sh (every source file's SPDX line).
# scripts/test.sh runs --check on the whole tree.
#
# usage: scripts/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    -h|--help) sed -n '4,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "format: unknown argument $1" >&2; exit 2 ;;
esac

command -v clang-format >/dev/null || { echo "format: clang-format is missing (apt install clang-format)" >&2; exit 2; }
mapfile -t c_files < <(git ls-files '*.c' '*.h')
mapfile -t swift_files < <(git ls-files '*.swift' | grep -v '^Package.swift$')

if [ "$check" -eq 0 ]; then
    clang-format -i "${c_files[@]}"
    swift format format -i --parallel "${swift_files[@]}"
    echo "format: formatted ${#c_files[@]} C and ${#swift_files[@]} Swift files"
    exit 0
fi

bad=0
for f in "${c_files[@]}"; do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "format: $f is not formatted (scripts/format.sh)" >&2
        bad=1
    fi
done
if ! out=$(swift format lint --strict --parallel "${swift_files[@]}" 2>&1); then
    printf '%s\n' "$out" | head -40 >&2 || true
    echo "format: Swift files are not formatted (scripts/format.sh)" >&2
    bad=1
fi
[ "$bad" -eq 0 ] && echo "format: ${#c_files[@]} C and ${#swift_files[@]} Swift files are formatted"
# Not formatting, but the same kind of check on every file, so that a new
# file without its license line fails scripts/test.sh here.
bash scripts/check-license.sh || bad=1
exit "$bad"
