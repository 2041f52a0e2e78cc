#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Compiles a small translation unit that includes include/thingif.h as strict
# C99 and C11, and as C++11 and C++17, with warnings as errors, to prove the
# header is clean in each (it uses long long: C89 and C++98 are not claimed).
#
# usage: scripts/check-header.sh --cc CC --cxx CXX --include DIR [--cflags FLAGS] --out DIR
set -euo pipefail

cc=cc cxx=c++ include="" cflags="" out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --cc) cc=$2; shift 2 ;;
        --cxx) cxx=$2; shift 2 ;;
        --include) include=$2; shift 2 ;;
        --cflags) cflags=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "check-header: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$include" ] && [ -n "$out" ] || { echo "check-header: --include and --out are required" >&2; exit 2; }
mkdir -p "$out"

# The same source serves both languages: it uses the types, the enums and a
# function pointer of each callback type.
cat > "$out/header_check.c" <<'SRC'
#include <thingif.h>

static void on_log(int level, const char *message, void *userdata)
{
    (void)level; (void)message; (void)userdata;
}

static void on_action(thingif_action_t *action, void *userdata)
{
    (void)userdata;
    if (thingif_action_fail(action, thingif_strerror(THINGIF_ERR_INVALID)) != THINGIF_OK)
        return;
}

static long long clock_ms(void *userdata)
{
    (void)userdata;
    return 0;
}

static json_t *state(thingif_t *t, void *userdata)
{
    (void)t; (void)userdata;
    return json_object();
}

int header_check(thingif_t *t);
int header_check(thingif_t *t)
{
    thingif_log_cb log_cb = on_log;
    thingif_action_cb action_cb = on_action;
    thingif_state_cb state_cb = state;
    thingif_clock_cb clock_cb = clock_ms;
    const char *const sets[] = { "morning" };
    int rc = thingif_set_log_callback(t, log_cb, THINGIF_LOG_DEBUG, NULL);
    rc |= thingif_on_action(t, "AirConditioner-Demo", 1, "turnPower", action_cb, NULL);
    rc |= thingif_set_state_provider(t, state_cb, 1000, NULL);
    rc |= thingif_set_option(t, THINGIF_OPT_KEEPALIVE_S, 60L);
    rc |= thingif_set_clock(t, clock_cb, NULL);
    rc |= thingif_timer_create(t, "wake", 1LL, THINGIF_RECUR_DAY, 1, "UTC", sets, 1);
    return rc == THINGIF_OK ? THINGIF_VERSION_MAJOR : THINGIF_ERR_STATE;
}
SRC
cp "$out/header_check.c" "$out/header_check.cpp"

# shellcheck disable=SC2086
set -x
for std in c99 c11; do
    "$cc" -std=$std -Wall -Wextra -pedantic -Werror -I "$include" $cflags -c "$out/header_check.c" -o "$out/header_check_$std.o"
done
for std in c++11 c++17; do
    "$cxx" -std=$std -Wall -Wextra -pedantic -Werror -I "$include" $cflags -c "$out/header_check.cpp" -o "$out/header_check_$std.o"
done
{ set +x; } 2>/dev/null
echo "check-header: thingif.h compiles as C99, C11, C++11 and C++17"

# THINGIF_NODISCARD and THINGIF_DEPRECATED must reach the compiler: a dropped
# status and a call by an old name each have to be diagnosed. Each snippet
# must fail under -Werror with the diagnostic named; one that compiles means
# the attribute is gone (or a name lost it).
expect_diag() { # NAME FLAG BODY
    printf '#include <thingif.h>\nint f(thingif_t *t);\nint f(thingif_t *t)\n{\n    %s\n    return 0;\n}\n' "$3" \
        >"$out/diag_$1.c"
    # shellcheck disable=SC2086
    if "$cc" -std=c11 -Wall -Werror -I "$include" $cflags -c "$out/diag_$1.c" -o "$out/diag_$1.o" \
        2>"$out/diag_$1.log"; then
        echo "check-header: FAIL: $1 compiled without a diagnostic" >&2
        exit 1
    fi
    grep -q -- "$2" "$out/diag_$1.log" || {
        echo "check-header: FAIL: $1 failed, but not with $2:" >&2
        cat "$out/diag_$1.log" >&2
        exit 1
    }
}
# Every function declared to return int is THINGIF_NODISCARD but the three
# getters whose int is a value, not a status. Declarations are read whole
# (clang-format may wrap them), comments left out.
counts=$(python3 - "$include/thingif.h" 2>&1 <<'PY'
import re, sys
src = re.sub(r"/\*.*?\*/", " ", open(sys.argv[1]).read(), flags=re.S)
marked, plain = [], []
for decl in src.split(";"):
    decl = " ".join(decl.split())
    m = re.search(r"(?:^|[;}] ?|\) )((?:THINGIF_[A-Z]+(?:\([^)]*\))? )*)int (thingif_[a-z_]+)\(", decl)
    if m:
        (marked if "THINGIF_NODISCARD" in m.group(1) else plain).append(m.group(2))
getters = {"thingif_is_connected", "thingif_action_schema_version", "thingif_action_index"}
if set(plain) != getters:
    sys.exit("int functions without THINGIF_NODISCARD that are not getters: %s" % sorted(set(plain) - getters)
             + (" (a getter is missing: %s)" % sorted(getters - set(plain)) if getters - set(plain) else ""))
print(len(marked))
PY
) || { echo "check-header: FAIL: $counts" >&2; exit 1; }
expect_diag dropped_status "unused-result" "thingif_set_broker(t, \"127.0.0.1\", 1883);"
expect_diag dropped_destroy "unused-result" "thingif_destroy(t);"
expect_diag old_name "deprecated" "(void)thingif_update_state(t, NULL);"
echo "check-header: $counts status calls are THINGIF_NODISCARD; a dropped one and an old name are diagnosed"
