/* SPDX-License-Identifier: Apache-2.0 */

/*
 * loadgen.c - throughput and latency of libthingif, end to end.
 *
 * One process, two MQTT clients:
 *   - the thing: libthingif onboards against thingif-hub, registers one
 *     trivial handler (schema "Bench" v1, action "noop") and runs
 *     thingif_loop_start();
 *   - the publisher: a libmosquitto client that subscribes to every
 *     action-results request, then publishes N schema commands with distinct
 *     commandIDs at full speed (QoS 1) on the thing's mqttTopic, read from
 *     STORAGE/identity.json.
 * Latency is from mosquitto_publish() of a command to the arrival of its
 * action-results request. fsync/fdatasync are wrapped here to count the time
 * the library spends in them.
 *
 * Prints one line of key=value figures on stdout. Built by bench/run.sh.
 *
 * --serial publishes each command only after the previous one's results
 * request arrived (latency without queueing).
 *
 * usage: loadgen --port P --storage DIR [--host H] [-n N] [--state] [--serial]
 *                [--app-id ID] [--app-key KEY] [--vendor-thing-id V]
 *                [--timeout S]
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <mosquitto.h>
#include <thingif.h>

#include "latency.h"

/* --- fsync accounting (interposes the library's calls) ------------------ */

static atomic_long fsync_calls;
static atomic_long fsync_ns;

static long elapsed_ns(const struct timespec *a, const struct timespec *b)
{
    return (b->tv_sec - a->tv_sec) * 1000000000L + (b->tv_nsec - a->tv_nsec);
}

int fsync(int fd)
{
    static int (*real)(int);
    struct timespec a, b;
    int rc;

    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    clock_gettime(CLOCK_MONOTONIC, &a);
    rc = real(fd);
    clock_gettime(CLOCK_MONOTONIC, &b);
    atomic_fetch_add(&fsync_calls, 1);
    atomic_fetch_add(&fsync_ns, elapsed_ns(&a, &b));
    return rc;
}

int fdatasync(int fd)
{
    static int (*real)(int);
    struct timespec a, b;
    int rc;

    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    clock_gettime(CLOCK_MONOTONIC, &a);
    rc = real(fd);
    clock_gettime(CLOCK_MONOTONIC, &b);
    atomic_fetch_add(&fsync_calls, 1);
    atomic_fetch_add(&fsync_ns, elapsed_ns(&a, &b));
    return rc;
}

/* --- the run ------------------------------------------------------------- */

static int n_commands = 2000;
static int with_state = 0;
static int serial = 0;  /* one command at a time: unloaded latency */
static double *sent_at; /* per command index */
static double *done_at; /* 0 until its results request arrives */
static atomic_int n_done;
static atomic_int n_handled;
static atomic_int state_errors;
static const char *run_tag;
static volatile int subscribed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void noop(thingif_action_t *a, void *userdata)
{
    thingif_t *t = userdata;
    int i = atomic_fetch_add(&n_handled, 1);

    (void)a;
    if (with_state) {
        json_t *st = json_pack("{s:i,s:b}", "counter", i, "power", i & 1);
        if (!st || thingif_state_update(t, st) != THINGIF_OK)
            atomic_fetch_add(&state_errors, 1);
        json_decref(st);
    }
}

static void on_subscribe(struct mosquitto *m, void *ud, int mid, int qc, const int *q)
{
    (void)m;
    (void)ud;
    (void)mid;
    (void)qc;
    (void)q;
    subscribed = 1;
}

/* Topic: p/{client}/thing-if/apps/{app}/targets/{target}/commands/{cid}/action-results */
static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg)
{
    double t = now_s();
    long idx;

    (void)m;
    (void)ud;
    idx = command_index(msg->topic, run_tag, n_commands);
    if (idx < 0)
        return;
    pthread_mutex_lock(&mu);
    if (done_at[idx] == 0) {
        done_at[idx] = t;
        atomic_fetch_add(&n_done, 1);
    }
    pthread_mutex_unlock(&mu);
}

static int die(const char *what, int rc)
{
    fprintf(stderr, "loadgen: %s: %s\n", what, thingif_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *storage = NULL, *app_id = "demoApp", *app_key = "demoKey";
    const char *vtid = "BENCH-0001";
    int port = 0, timeout_s = 120, rc, i, ok;
    char path[4096], payload[512], tag[64];
    json_t *ident;
    json_error_t jerr;
    const char *mqtt_topic = NULL;
    struct mosquitto *m;
    thingif_t *t;
    double deadline, t0, t_last = 0, *lat;
    long calls0, ns0, calls, ns;

    for (i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--state") == 0) {
            with_state = 1;
            continue;
        }
        if (strcmp(argv[i], "--serial") == 0) {
            serial = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "loadgen: %s needs a value\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--host") == 0)
            host = v;
        else if (strcmp(argv[i], "--port") == 0)
            port = atoi(v);
        else if (strcmp(argv[i], "--storage") == 0)
            storage = v;
        else if (strcmp(argv[i], "-n") == 0)
            n_commands = atoi(v);
        else if (strcmp(argv[i], "--app-id") == 0)
            app_id = v;
        else if (strcmp(argv[i], "--app-key") == 0)
            app_key = v;
        else if (strcmp(argv[i], "--vendor-thing-id") == 0)
            vtid = v;
        else if (strcmp(argv[i], "--timeout") == 0)
            timeout_s = atoi(v);
        else {
            fprintf(stderr, "loadgen: unknown flag %s\n", argv[i]);
            return 2;
        }
        i++;
    }
    if (port <= 0 || !storage || n_commands <= 0) {
        fprintf(stderr, "usage: loadgen --port P --storage DIR [-n N] [--state] [--host H]\n");
        return 2;
    }
    snprintf(tag, sizeof tag, "b%ld", (long)getpid());
    run_tag = tag;
    sent_at = calloc((size_t)n_commands, sizeof *sent_at);
    done_at = calloc((size_t)n_commands, sizeof *done_at);
    lat = calloc((size_t)n_commands, sizeof *lat);
    if (!sent_at || !done_at || !lat)
        return 1;

    /* The thing. */
    t = thingif_new(app_id, app_key, storage);
    if (!t) {
        fprintf(stderr, "loadgen: thingif_new failed\n");
        return 1;
    }
    if ((rc = thingif_set_broker(t, host, port)) != THINGIF_OK)
        return die("set_broker", rc);
    if ((rc = thingif_on_action(t, "Bench", 1, "noop", noop, t)) != THINGIF_OK)
        return die("on_action", rc);
    if ((rc = thingif_onboard(t, vtid, "bench-pass", "Bench", "1.0.0", NULL)) != THINGIF_OK)
        return die("onboard", rc);
    if ((rc = thingif_loop_start(t)) != THINGIF_OK)
        return die("loop_start", rc);
    deadline = now_s() + 15;
    while (!thingif_is_connected(t)) {
        if (now_s() > deadline) {
            fprintf(stderr, "loadgen: the thing did not connect\n");
            return 1;
        }
        usleep(10000);
    }

    snprintf(path, sizeof path, "%s/identity.json", storage);
    ident = json_load_file(path, 0, &jerr);
    if (!ident || json_unpack_ex(ident, &jerr, 0, "{s:{s:s}}", "mqttEndpoint", "mqttTopic", &mqtt_topic) != 0) {
        fprintf(stderr, "loadgen: %s: no mqttEndpoint.mqttTopic (%s)\n", path, jerr.text);
        return 1;
    }

    /* The publisher. */
    mosquitto_lib_init();
    m = mosquitto_new(NULL, true, NULL);
    if (!m) {
        fprintf(stderr, "loadgen: mosquitto_new failed\n");
        return 1;
    }
    /* The publisher stands in for the hub: on the secured broker it uses the
     * hub's identity (THINGIF_BENCH_USERNAME / THINGIF_BENCH_PASSWORD). */
    if (getenv("THINGIF_BENCH_USERNAME"))
        mosquitto_username_pw_set(m, getenv("THINGIF_BENCH_USERNAME"), getenv("THINGIF_BENCH_PASSWORD"));
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    /* As the library, the driver and the C appliance do: without it one command
     * at a time waits for the kernel's delayed acknowledgements (about 40 ms). */
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    mosquitto_message_callback_set(m, on_message);
    if (mosquitto_connect(m, host, port, 60) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: publisher cannot connect\n");
        return 1;
    }
    mosquitto_loop_start(m);
    mosquitto_subscribe(m, NULL, "p/+/thing-if/apps/+/targets/+/commands/+/action-results", 1);
    deadline = now_s() + 10;
    while (!subscribed) {
        if (now_s() > deadline) {
            fprintf(stderr, "loadgen: no SUBACK\n");
            return 1;
        }
        usleep(1000);
    }

    /* bench/run.sh starts counting the hub's CPU here, after onboarding (a
     * password KDF) and the connections. */
    fprintf(stderr, "loadgen: publishing\n");
    calls0 = atomic_load(&fsync_calls);
    ns0 = atomic_load(&fsync_ns);
    t0 = now_s();
    for (i = 0; i < n_commands; i++) {
        int len = snprintf(payload, sizeof payload,
                           "{\"commandID\":\"%s-%d\",\"schema\":\"Bench\",\"schemaVersion\":1,"
                           "\"issuer\":\"user:bench\",\"actions\":[{\"noop\":{}}]}",
                           tag, i);
        sent_at[i] = now_s();
        rc = mosquitto_publish(m, NULL, mqtt_topic, len, payload, 1, false);
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "loadgen: publish %d: %s\n", i, mosquitto_strerror(rc));
            return 1;
        }
        if (serial) {
            double end = now_s() + 10;
            while (atomic_load(&n_done) <= i && now_s() < end)
                usleep(50);
        }
    }
    double t_pub = now_s() - t0;

    deadline = now_s() + timeout_s;
    while (atomic_load(&n_done) < n_commands && now_s() < deadline)
        usleep(2000);
    calls = atomic_load(&fsync_calls) - calls0;
    ns = atomic_load(&fsync_ns) - ns0;

    pthread_mutex_lock(&mu);
    ok = round_trips(sent_at, done_at, n_commands, 1000.0, lat, &t_last);
    pthread_mutex_unlock(&mu);

    printf("n=%d done=%d state=%d serial=%d publish_s=%.3f total_s=%.3f cmd_per_s=%.0f "
           "p50_ms=%.1f p95_ms=%.1f p99_ms=%.1f max_ms=%.1f "
           "fsyncs_per_cmd=%.1f fsync_ms_per_cmd=%.3f state_errors=%d\n",
           n_commands, ok, with_state, serial, t_pub, ok ? t_last - t0 : 0.0, ok ? ok / (t_last - t0) : 0.0,
           pct(lat, ok, 50), pct(lat, ok, 95), pct(lat, ok, 99), ok ? lat[ok - 1] : 0.0, ok ? (double)calls / ok : 0.0,
           ok ? (double)ns / 1e6 / ok : 0.0, atomic_load(&state_errors));
    fflush(stdout);

    mosquitto_disconnect(m);
    mosquitto_loop_stop(m, false);
    mosquitto_destroy(m);
    mosquitto_lib_cleanup();
    if (thingif_destroy(t) != THINGIF_OK)
        ok = 0;
    json_decref(ident);
    return ok == n_commands ? 0 : 3;
}
