#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Checks that every source file of thingif says its license: the line
# "SPDX-License-Identifier: Apache-2.0" in one of its first three lines, in
# the file's own comment syntax (after a shebang or swift-tools-version
# line where there is one). scripts/format.sh --check runs it, so
# scripts/test.sh fails on a new file without the line.
#
# The files: tracked or new (not ignored) *.swift, *.c, *.h, *.py, *.sh,
# CMakeLists.txt, *.cmake, *.cmake.in, *.modulemap, *.js, *.css, *.html, and
# any other file that starts with "#!" (a script without an extension);
# not symbolic links, not fuzz/corpus/ or fuzz/seeds/ (inputs, not code).
#
# It also checks that the Yocto recipes' LIC_FILES_CHKSUM md5 sums are those
# of LICENSE and NOTICE as they are now (bitbake stops on a stale one), so an
# edit of NOTICE comes with the recipes' new sums.
#
# usage: scripts/check-license.sh [--list]
#   --list  print the files that must carry the line, and nothing else
set -euo pipefail
cd "$(dirname "$0")/.."

list=0
case "${1:-}" in
    --list) list=1 ;;
    "") ;;
    -h|--help) sed -n '4,20s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "check-license: unknown argument $1" >&2; exit 2 ;;
esac

spdx='SPDX-License-Identifier: Apache-2.0'

# The files that must carry the line, one a line.
sources() {
    git ls-files --cached --others --exclude-standard | sort -u | while IFS= read -r f; do
        [ -f "$f" ] && [ ! -L "$f" ] || continue
        case "$f" in
            fuzz/corpus/* | fuzz/seeds/*) continue ;;
            *.swift | *.c | *.h | *.py | *.sh | CMakeLists.txt | */CMakeLists.txt | *.cmake | *.cmake.in | \
                *.modulemap | *.js | *.css | *.html)
                printf '%s\n' "$f" ;;
            *) [ "$(head -c 2 "$f")" = '#!' ] && printf '%s\n' "$f" ;;
        esac
    done
}

if [ "$list" -eq 1 ]; then
    sources
    exit 0
fi

count=0 bad=0
while IFS= read -r f; do
    count=$((count + 1))
    if ! head -n 3 "$f" | grep -qF "$spdx"; then
        echo "check-license: $f has no \"$spdx\" line in its first three lines" >&2
        bad=$((bad + 1))
    fi
done < <(sources)

# The recipes name LICENSE and NOTICE by where the build (git) or the
# prebuilt tarball (usr/share/doc/thingif/) has them: the file is the
# repository's of the same name.
sums=0 stale=0
while IFS= read -r recipe; do
    while IFS= read -r entry; do
        path=${entry#file://} path=${path%%;*} want=${entry##*md5=}
        sums=$((sums + 1))
        file=$(basename "$path")
        if [ ! -f "$file" ]; then
            echo "check-license: $recipe: LIC_FILES_CHKSUM names $path, and there is no $file" >&2
            stale=$((stale + 1))
        elif [ "$(md5sum < "$file" | cut -d' ' -f1)" != "$want" ]; then
            echo "check-license: $recipe: md5 of $path is $(md5sum < "$file" | cut -d' ' -f1) (of $file), not $want" >&2
            stale=$((stale + 1))
        fi
    done < <(grep -o 'file://[^ ";]*;md5=[0-9a-f]*' "$recipe")
done < <(git ls-files 'deploy/yocto/*.bb')

if [ "$bad" -ne 0 ] || [ "$stale" -ne 0 ]; then
    [ "$bad" -eq 0 ] || echo "check-license: $bad of $count source files lack the line (see scripts/check-license.sh)" >&2
    [ "$stale" -eq 0 ] || echo "check-license: $stale of the recipes' $sums licence checksums are wrong" >&2
    exit 1
fi
echo "check-license: all $count source files carry \"$spdx\"; the recipes' $sums licence checksums hold"
