#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Runs one libFuzzer target of fuzz/ (or all of them, one after the other)
# under AddressSanitizer and LeakSanitizer, for SECONDS each (default 60),
# from the seed corpus fuzz/corpus/TARGET plus what earlier runs grew in
# .build-fuzz/corpus/TARGET (not in git). A finding stops the run: the input
# is saved in .build-fuzz/artifacts/TARGET/, and the exit status is not 0.
# Reproduce one with: .build-fuzz/fuzz-TARGET FILE.
#
# The run is niced and bounded (-max_total_time); FUZZ_JOBS is not offered on
# purpose: one process, one core. FUZZ_FLAGS adds libFuzzer flags.
#
# usage: scripts/fuzz.sh TARGET|all [SECONDS]
#        scripts/fuzz.sh --list
#        scripts/fuzz.sh --ci [SECONDS]   every target, SECONDS each (default 10),
#                                          from the stored seed corpus only
set -euo pipefail
cd "$(dirname "$0")/.."

targets() { for f in fuzz/*.swift; do b=$(basename "$f" .swift); [ "$b" = FuzzSupport ] || echo "$b"; done; }

ci=0
case "${1:-}" in
    -h|--help|"") sed -n '4,18s/^# \{0,1\}//p' "$0"; exit 0 ;;
    --list) targets; exit 0 ;;
    --ci) ci=1; shift; set -- all "${1:-10}" ;;
esac
target=$1
seconds=${2:-60}
if [ "$target" = all ]; then mapfile -t list < <(targets); else list=("$target"); fi

bash fuzz/build.sh "${list[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/fuzz/lsan.supp:print_suppressions=0}
export SWIFT_BACKTRACE=enable=no
status=0
for t in "${list[@]}"; do
    art=.build-fuzz/artifacts/$t
    mkdir -p "$art"
    if [ "$ci" -eq 1 ]; then
        # CI: a scratch copy of the stored seeds, so nothing grows in the tree.
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        dirs=("$work" "fuzz/corpus/$t")
    else
        work=.build-fuzz/corpus/$t
        mkdir -p "$work"
        dirs=("$work" "fuzz/corpus/$t")
    fi
    echo "== fuzz $t for ${seconds}s"
    # shellcheck disable=SC2086
    if ! nice -n 19 ".build-fuzz/fuzz-$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$art/" ${FUZZ_FLAGS:-} "${dirs[@]}" \
        >".build-fuzz/$t.log" 2>&1; then
        status=1
        tail -40 ".build-fuzz/$t.log" >&2
        echo "fuzz: $t found something: see .build-fuzz/$t.log and $art/" >&2
    else
        grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec)' ".build-fuzz/$t.log" || true
        grep -E '^#[0-9]+' ".build-fuzz/$t.log" | tail -1
    fi
    [ "$ci" -eq 1 ] && rm -rf "$work"
done
exit "$status"
