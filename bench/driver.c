/* SPDX-License-Identifier: Apache-2.0 */

/*
 * driver.c - the load driver of bench/compare.sh: it stands in for the hub.
 *
 * It connects with the hub's broker identity (THINGIF_BENCH_USERNAME and
 * THINGIF_BENCH_PASSWORD), subscribes to every thing request
 * (p/+/thing-if/apps/#, p/+/api/apps/#) and answers each with 204 on
 * p/{client}/resp with the request's Correlation Data, as the hub does. It
 * publishes N AirConditioner-Demo commands (three actions each) on TOPIC,
 * QoS 1, keeping at most W without their action-results request, and times
 * each from its publish to the arrival of that request.
 *
 * Prints one line of key=value figures on stdout.
 *
 * usage: driver --port P --topic TOPIC [-n N] [-w W] [--host H] [--timeout S]
 */
#define _GNU_SOURCE

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "latency.h"

static int n_commands = 1000, window = 1;
static double *sent_at, *done_at;
static int n_done, subscribed;
static char tag[32];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void on_subscribe(struct mosquitto *m, void *ud, int mid, int qc, const int *q)
{
    (void)m, (void)ud, (void)mid, (void)qc, (void)q;
    pthread_mutex_lock(&mu);
    subscribed++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Topic: p/{client}/thing-if/apps/{app}/targets/{target}/commands/{cid}/action-results */
static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg,
                       const mosquitto_property *props)
{
    double t = now_s();
    const char *client = msg->topic + 2, *slash;
    char resp[512];
    void *corr = NULL;
    uint16_t corr_len = 0;
    mosquitto_property *out = NULL;
    static const char answer[] = "204\r\n\r\n";
    long idx;

    (void)ud;
    if (strncmp(msg->topic, "p/", 2) != 0 || !(slash = strchr(client, '/')) || slash - client > 256)
        return;
    snprintf(resp, sizeof resp, "p/%.*s/resp", (int)(slash - client), client);
    mosquitto_property_read_binary(props, MQTT_PROP_CORRELATION_DATA, &corr, &corr_len, false);
    if (corr)
        mosquitto_property_add_binary(&out, MQTT_PROP_CORRELATION_DATA, corr, corr_len);
    mosquitto_publish_v5(m, NULL, resp, (int)sizeof answer - 1, answer, 1, false, out);
    mosquitto_property_free_all(&out);
    free(corr);

    idx = command_index(msg->topic, tag, n_commands);
    if (idx < 0)
        return;
    pthread_mutex_lock(&mu);
    if (done_at[idx] == 0) {
        done_at[idx] = t;
        n_done++;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
}

static void wait_until(double deadline, int (*ready)(void))
{
    struct timespec ts;
    pthread_mutex_lock(&mu);
    while (!ready() && now_s() < deadline) {
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    pthread_mutex_unlock(&mu);
}

static int sent;
static int window_open(void)
{
    return sent - n_done < window;
}
static int all_done(void)
{
    return n_done >= n_commands;
}
static int both_subscribed(void)
{
    return subscribed >= 1;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *topic = NULL;
    int port = 0, timeout_s = 300, i, ok = 0;
    double t0, t_last = 0, *lat, deadline;
    struct timespec cpu;
    char payload[512];
    struct mosquitto *m;
    const char *subs[] = {"p/+/thing-if/apps/#", "p/+/api/apps/#"};

    for (i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (strcmp(f, "--port") == 0)
            port = atoi(v);
        else if (strcmp(f, "--host") == 0)
            host = v;
        else if (strcmp(f, "--topic") == 0)
            topic = v;
        else if (strcmp(f, "-n") == 0)
            n_commands = atoi(v);
        else if (strcmp(f, "-w") == 0)
            window = atoi(v);
        else if (strcmp(f, "--timeout") == 0)
            timeout_s = atoi(v);
        else
            break;
    }
    if (port <= 0 || !topic || n_commands <= 0 || window <= 0 || i < argc) {
        fprintf(stderr, "usage: driver --port P --topic TOPIC [-n N] [-w W] [--host H] [--timeout S]\n");
        return 2;
    }
    snprintf(tag, sizeof tag, "d%ld", (long)getpid());
    sent_at = calloc((size_t)n_commands, sizeof *sent_at);
    done_at = calloc((size_t)n_commands, sizeof *done_at);
    lat = calloc((size_t)n_commands, sizeof *lat);
    if (!sent_at || !done_at || !lat)
        return 1;

    mosquitto_lib_init();
    m = mosquitto_new(NULL, true, NULL);
    if (!m)
        return 1;
    if (getenv("THINGIF_BENCH_USERNAME"))
        mosquitto_username_pw_set(m, getenv("THINGIF_BENCH_USERNAME"), getenv("THINGIF_BENCH_PASSWORD"));
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    mosquitto_message_v5_callback_set(m, on_message);
    if (mosquitto_connect(m, host, port, 60) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "driver: cannot connect\n");
        return 1;
    }
    mosquitto_loop_start(m);
    mosquitto_subscribe_multiple(m, NULL, 2, (char *const *)subs, 1, 0, NULL);
    wait_until(now_s() + 10, both_subscribed);
    if (!subscribed) {
        fprintf(stderr, "driver: no SUBACK\n");
        return 1;
    }

    t0 = now_s();
    deadline = t0 + timeout_s;
    for (i = 0; i < n_commands && now_s() < deadline; i++) {
        int len = snprintf(payload, sizeof payload,
                           "{\"commandID\":\"%s-%d\",\"schema\":\"AirConditioner-Demo\",\"schemaVersion\":1,"
                           "\"issuer\":\"user:bench\",\"actions\":[{\"turnPower\":{\"power\":true}},"
                           "{\"setPresetTemperature\":{\"presetTemperature\":25}},"
                           "{\"setFanSpeed\":{\"fanSpeed\":5}}]}",
                           tag, i);
        wait_until(deadline, window_open);
        pthread_mutex_lock(&mu);
        sent_at[i] = now_s();
        sent++;
        pthread_mutex_unlock(&mu);
        if (mosquitto_publish(m, NULL, topic, len, payload, 1, false) != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "driver: publish %d failed\n", i);
            return 1;
        }
    }
    wait_until(deadline, all_done);

    pthread_mutex_lock(&mu);
    ok = round_trips(sent_at, done_at, n_commands, 1e6, lat, &t_last);
    pthread_mutex_unlock(&mu);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    printf("n=%d done=%d w=%d total_s=%.3f cmd_per_s=%.0f p50_us=%.0f p95_us=%.0f p99_us=%.0f max_us=%.0f "
           "driver_cpu_ns=%lld\n",
           n_commands, ok, window, ok ? t_last - t0 : 0.0, ok ? ok / (t_last - t0) : 0.0, pct(lat, ok, 50),
           pct(lat, ok, 95), pct(lat, ok, 99), ok ? lat[ok - 1] : 0.0,
           (long long)cpu.tv_sec * 1000000000LL + cpu.tv_nsec);
    fflush(stdout);
    mosquitto_disconnect(m);
    mosquitto_loop_stop(m, false);
    mosquitto_destroy(m);
    mosquitto_lib_cleanup();
    return ok == n_commands ? 0 : 3;
}
