/* SPDX-License-Identifier: Apache-2.0 */

/*
 * aircon_test.c - the test appliance: examples-c/aircon.c with the flags
 * that only the tests and the bench use.
 *
 * It is aircon.c itself: that file is compiled in below, its main renamed
 * aircon_main, so the Swift tests and the bench run the example's own
 * handlers, setup and loop, and aircon.c carries nothing for them. This
 * program takes its own flags off the command line, hands the rest to
 * aircon_main, and each of its flags acts where aircon.c calls the library:
 * inside aircon.c's text, six thingif_* calls are macros for the wrappers
 * below.
 *
 *   thingif_on_action        --effects-log FILE: after each action that did
 *   thingif_action_fail      not fail, one line "commandID action" appended
 *                            with a single write(2) on an O_APPEND file, so
 *                            the line is in the file even if the process is
 *                            killed right after (and before the library
 *                            records the result). Tests count these lines to
 *                            check that no command ran twice.
 *   thingif_set_broker       --reconnect-ms MIN,MAX, --request-timeout-ms N,
 *                            --keepalive-s N: thingif_set_option() right after.
 *   thingif_set_log_callback --quiet: library warnings only (--verbose still
 *                            gives the debug lines).
 *   thingif_state_update     --no-state: an action leaves the appliance clean,
 *   (and thingif_on_action)  so aircon.c uploads nothing after a command,
 *                            and the upload on each (re)connection sends
 *                            nothing (aircon.c still prints its line). The
 *                            bench compares the command path alone with a
 *                            hand-written appliance.
 *   thingif_loop             --run-seconds N: SIGTERM to itself N seconds
 *                            after the loop started; aircon.c stops as on
 *                            any SIGTERM.
 *
 * It relies on aircon.c registering every handler with its struct aircon
 * (for --no-state) and driving thingif_loop() itself (for --run-seconds).
 *
 * usage: aircon_test [aircon's options] [the options above]   (--help lists both)
 */
#define _POSIX_C_SOURCE 200809L /* as aircon.c, before any system header */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <thingif.h>

THINGIF_NODISCARD static int test_on_action(thingif_t *t, const char *schema, int schema_version, const char *action,
                                            thingif_action_cb cb, void *userdata);
THINGIF_NODISCARD static int test_action_fail(thingif_action_t *action, const char *error_message);
THINGIF_NODISCARD static int test_set_broker(thingif_t *t, const char *host, int port);
THINGIF_NODISCARD static int test_set_log_callback(thingif_t *t, thingif_log_cb cb, int max_level, void *userdata);
THINGIF_NODISCARD static int test_state_update(thingif_t *t, const json_t *state);
THINGIF_NODISCARD static int test_loop(thingif_t *t, int timeout_ms);

#define thingif_on_action test_on_action
#define thingif_action_fail test_action_fail
#define thingif_set_broker test_set_broker
#define thingif_set_log_callback test_set_log_callback
#define thingif_state_update test_state_update
#define thingif_loop test_loop
#define main aircon_main
int aircon_main(int argc, char **argv);

#include "../examples-c/aircon.c"
/* The simulated A/B board aircon.c uses with --board. */
#include "../examples-c/ab_board.c"
/* The installer it hands updates to with --swupdate. */
#include "../examples-c/swupdate_installer.c"

#undef thingif_on_action
#undef thingif_action_fail
#undef thingif_set_broker
#undef thingif_set_log_callback
#undef thingif_state_update
#undef thingif_loop
#undef main

/* This program's flags; 0 or NULL: not given. */
static struct {
    const char *effects_log;
    long reconnect_min_ms;
    long reconnect_max_ms;
    long request_timeout_ms;
    long keepalive_s;
    long run_seconds;
    int quiet;
    int no_state;
} test;

static int test_effects_fd = -1;

/* ---- the wrappers ---- */

/* A handler aircon.c registered, called through test_run_action. */
struct test_handler {
    thingif_action_cb cb;
    void *userdata; /* aircon.c's struct aircon */
};

static struct test_handler test_handlers[8]; /* aircon.c registers three */
static int test_handler_count;
static const thingif_action_t *test_failed; /* the last action thingif_action_fail was called for */

static void test_record_effect(thingif_action_t *action)
{
    char line[300];
    int n;

    if (test_effects_fd < 0)
        return;
    n = snprintf(line, sizeof line, "%s %s\n", thingif_action_command_id(action), thingif_action_name(action));
    if (n <= 0 || (size_t)n >= sizeof line)
        return;
    while (write(test_effects_fd, line, (size_t)n) < 0 && errno == EINTR)
        ;
}

static void test_run_action(thingif_action_t *action, void *userdata)
{
    const struct test_handler *h = userdata;

    test_failed = NULL;
    h->cb(action, h->userdata);
    if (test_failed == action)
        return;
    test_record_effect(action);
    if (test.no_state)
        ((struct aircon *)h->userdata)->dirty = 0;
}

static int test_on_action(thingif_t *t, const char *schema, int schema_version, const char *action,
                          thingif_action_cb cb, void *userdata)
{
    struct test_handler *h;

    if (test_handler_count == (int)(sizeof test_handlers / sizeof test_handlers[0])) {
        fprintf(stderr, "aircon_test: more handlers than test_handlers holds\n");
        return THINGIF_ERR_NOMEM;
    }
    h = &test_handlers[test_handler_count++];
    h->cb = cb;
    h->userdata = userdata;
    return thingif_on_action(t, schema, schema_version, action, test_run_action, h);
}

static int test_action_fail(thingif_action_t *action, const char *error_message)
{
    test_failed = action;
    return thingif_action_fail(action, error_message);
}

/* Sets one option given on the command line; prints a refusal. */
static int test_set_option(thingif_t *t, int option, long value, const char *flag)
{
    int rc = thingif_set_option(t, option, value);

    if (rc != THINGIF_OK)
        fprintf(stderr, "aircon_test: %s: %s\n", flag, thingif_strerror(rc));
    return rc;
}

static int test_set_broker(thingif_t *t, const char *host, int port)
{
    int rc = thingif_set_broker(t, host, port);

    if (rc == THINGIF_OK && test.reconnect_min_ms > 0)
        rc = test_set_option(t, THINGIF_OPT_RECONNECT_MIN_MS, test.reconnect_min_ms, "--reconnect-ms");
    if (rc == THINGIF_OK && test.reconnect_min_ms > 0)
        rc = test_set_option(t, THINGIF_OPT_RECONNECT_MAX_MS, test.reconnect_max_ms, "--reconnect-ms");
    if (rc == THINGIF_OK && test.request_timeout_ms > 0)
        rc = test_set_option(t, THINGIF_OPT_REQUEST_TIMEOUT_MS, test.request_timeout_ms, "--request-timeout-ms");
    if (rc == THINGIF_OK && test.keepalive_s > 0)
        rc = test_set_option(t, THINGIF_OPT_KEEPALIVE_S, test.keepalive_s, "--keepalive-s");
    return rc;
}

static int test_set_log_callback(thingif_t *t, thingif_log_cb cb, int max_level, void *userdata)
{
    if (test.quiet && max_level == THINGIF_LOG_INFO)
        max_level = THINGIF_LOG_WARNING;
    return thingif_set_log_callback(t, cb, max_level, userdata);
}

static int test_state_update(thingif_t *t, const json_t *state)
{
    if (test.no_state)
        return THINGIF_OK;
    return thingif_state_update(t, state);
}

static double test_now_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int test_loop(thingif_t *t, int timeout_ms)
{
    static double deadline; /* 0: not set yet; -1: passed */
    int rc;

    if (test.run_seconds > 0 && deadline == 0)
        deadline = test_now_seconds() + (double)test.run_seconds;
    rc = thingif_loop(t, timeout_ms);
    if (deadline > 0 && test_now_seconds() >= deadline) {
        deadline = -1;
        raise(SIGTERM);
    }
    return rc;
}

/* ---- command line ---- */

static void test_usage(FILE *out)
{
    usage(out); /* aircon.c's */
    fprintf(out, "\n"
                 "aircon_test, the test appliance, takes these too (for the tests and the bench):\n"
                 "  --effects-log FILE      append \"commandID action\" to FILE for every action\n"
                 "                          that did not fail (tests count what ran)\n"
                 "  --reconnect-ms MIN,MAX  wait between reconnects (default 500,30000)\n"
                 "  --request-timeout-ms N  wait for the framework's answer (default 10000)\n"
                 "  --keepalive-s N         MQTT keepalive (default 60)\n"
                 "  --quiet                 library warnings only\n"
                 "  --no-state              never upload the state (the bench compares the command\n"
                 "                          path alone with a hand-written appliance)\n"
                 "  --run-seconds N         stop after N seconds, as on SIGTERM\n");
}

/* Reads MIN,MAX of --reconnect-ms; -1 on a bad value (message printed). */
static int test_parse_reconnect(const char *value)
{
    char first[32];
    const char *comma = strchr(value, ',');
    long lo, hi;

    if (comma == NULL || (size_t)(comma - value) >= sizeof first) {
        fprintf(stderr, "aircon_test: --reconnect-ms needs MIN,MAX in milliseconds, not %s\n", value);
        return -1;
    }
    memcpy(first, value, (size_t)(comma - value));
    first[comma - value] = '\0';
    if (parse_long(first, 10, 3600000, &lo) != 0 || parse_long(comma + 1, lo, 3600000, &hi) != 0) {
        fprintf(stderr, "aircon_test: --reconnect-ms needs MIN,MAX with 10 <= MIN <= MAX <= 3600000, not %s\n", value);
        return -1;
    }
    test.reconnect_min_ms = lo;
    test.reconnect_max_ms = hi;
    return 0;
}

/* Reads a number flag of this program into *out; -1 when out of lo..hi (message printed). */
static int test_parse_number(const char *flag, const char *value, long lo, long hi, long *out)
{
    if (parse_long(value, lo, hi, out) != 0) {
        fprintf(stderr, "aircon_test: %s needs a number %ld..%ld, not %s\n", flag, lo, hi, value);
        return -1;
    }
    return 0;
}

/*
 * Takes this program's flags off argv into `test` and leaves aircon.c's, in
 * their order, in args (aircon.c's flags all take a value but --verbose,
 * --help and -h). Returns 0 to run, 1 for --help, -1 for a bad flag of its
 * own (message printed).
 */
static int test_parse_args(int argc, char **argv, char **args, int *count)
{
    int i;

    args[(*count)++] = argv[0];
    for (i = 1; i < argc; i++) {
        const char *flag = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;

        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0)
            return 1;
        if (strcmp(flag, "--quiet") == 0) {
            test.quiet = 1;
            continue;
        }
        if (strcmp(flag, "--no-state") == 0) {
            test.no_state = 1;
            continue;
        }
        if (strcmp(flag, "--effects-log") != 0 && strcmp(flag, "--reconnect-ms") != 0 &&
            strcmp(flag, "--request-timeout-ms") != 0 && strcmp(flag, "--keepalive-s") != 0 &&
            strcmp(flag, "--run-seconds") != 0) {
            /* aircon.c's (it reports one it does not know, or a missing value) */
            args[(*count)++] = argv[i];
            if (strcmp(flag, "--verbose") != 0 && value != NULL)
                args[(*count)++] = argv[++i];
            continue;
        }
        if (value == NULL) {
            fprintf(stderr, "aircon_test: %s needs a value\n", flag);
            return -1;
        }
        i++;
        if (strcmp(flag, "--effects-log") == 0)
            test.effects_log = value;
        else if (strcmp(flag, "--reconnect-ms") == 0)
            bad = test_parse_reconnect(value);
        else if (strcmp(flag, "--request-timeout-ms") == 0)
            bad = test_parse_number(flag, value, 100, 600000, &test.request_timeout_ms);
        else if (strcmp(flag, "--keepalive-s") == 0)
            bad = test_parse_number(flag, value, 5, 65535, &test.keepalive_s);
        else
            bad = test_parse_number(flag, value, 1, 1000000000, &test.run_seconds);
        if (bad)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    char **args = calloc((size_t)argc + 1, sizeof *args);
    int count = 0, status;

    if (args == NULL) {
        fprintf(stderr, "aircon_test: out of memory\n");
        return 1;
    }
    switch (test_parse_args(argc, argv, args, &count)) {
    case 1:
        test_usage(stdout);
        free(args);
        return 0;
    case -1:
        test_usage(stderr);
        free(args);
        return 2;
    }
    if (test.effects_log != NULL) {
        test_effects_fd = open(test.effects_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (test_effects_fd < 0) {
            fprintf(stderr, "aircon_test: cannot open %s: %s\n", test.effects_log, strerror(errno));
            free(args);
            return 1;
        }
    }
    status = aircon_main(count, args);
    if (test_effects_fd >= 0)
        close(test_effects_fd);
    free(args);
    return status;
}
