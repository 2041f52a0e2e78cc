/* SPDX-License-Identifier: Apache-2.0 */

/*
 * c_appliance.c - the lower bound: the AirConditioner-Demo appliance written
 * by hand on libmosquitto and jansson, speaking the same protocol as a thing
 * on libthingif, with nothing else: no ledger, no outbox, no persistence, no
 * reconnect, no checks beyond what parsing needs.
 *
 * It reads the identity a libthingif thing stored when it onboarded
 * (STORAGE/identity.json: thingID, accessToken, mqttEndpoint), connects with
 * MQTT 5 as that installation's broker client, subscribes to its command
 * topic and, for each command, runs the three actions (turnPower,
 * setPresetTemperature, setFanSpeed; anything else fails) and publishes one
 * action-results request, framed as Kii's MQTT requests are, with Response
 * Topic and Correlation Data, on p/{client}/thing-if/apps/{app}/targets/
 * thing:{id}/commands/{cid}/action-results. Answers on p/{client}/resp are
 * read and ignored. Prints nothing per command.
 *
 * usage: c_appliance --port P --identity STORAGE/identity.json [--host H]
 *                    [--state-burst N]
 * Runs until SIGTERM or SIGINT. With --state-burst N it is a thing that
 * uploads N full states (PUT .../states) as fast as libmosquitto sends them,
 * then counts the framework's answers until all N came or none came for 10
 * s, prints "burst: sent N answered A ok O seconds S per_s R" and exits
 * (0 when all N were answered 2xx). It does not send again what is not
 * answered, so N - A is what the broker dropped on the way to the hub.
 */
#define _GNU_SOURCE

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>

static volatile sig_atomic_t stop;
static const char *app_id, *thing_id, *token, *topic;
static char resp_topic[512];
static unsigned long request_counter;
static long burst, answered, answered_ok;
static double burst_start, last_answer;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* One action: the demo's three, with the parameter each needs. */
static int run_action(const char *name, json_t *params, const char **error)
{
    if (strcmp(name, "turnPower") == 0) {
        if (!json_is_boolean(json_object_get(params, "power"))) {
            *error = "power must be a boolean";
            return 0;
        }
        return 1;
    }
    if (strcmp(name, "setPresetTemperature") == 0 || strcmp(name, "setFanSpeed") == 0) {
        const char *key = name[3] == 'P' ? "presetTemperature" : "fanSpeed";
        if (!json_is_integer(json_object_get(params, key))) {
            *error = "an integer is required";
            return 0;
        }
        return 1;
    }
    *error = "no handler";
    return 0;
}

/* One request to the framework, framed as Kii's MQTT requests are. */
static void put(struct mosquitto *m, const char *path, const char *rid, const char *body)
{
    char *request = NULL;
    int len = asprintf(&request,
                       "PUT\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
                       "X-Kii-RequestID: %s\r\n\r\n%s",
                       token, rid, body);
    if (len > 0) {
        mosquitto_property *p = NULL;
        mosquitto_property_add_string(&p, MQTT_PROP_RESPONSE_TOPIC, resp_topic);
        mosquitto_property_add_binary(&p, MQTT_PROP_CORRELATION_DATA, rid, (uint16_t)strlen(rid));
        mosquitto_publish_v5(m, NULL, path, len, request, 1, false, p);
        mosquitto_property_free_all(&p);
    }
    free(request);
}

/* The state burst: N full states, each a little different. */
static void send_burst(struct mosquitto *m)
{
    char path[1024], rid[32], body[128];
    long i;
    snprintf(path, sizeof path, "p/%s/thing-if/apps/%s/targets/thing:%s/states", topic, app_id, thing_id);
    burst_start = last_answer = now_s();
    for (i = 0; i < burst; i++) {
        snprintf(rid, sizeof rid, "s-%ld", i);
        snprintf(body, sizeof body, "{\"power\":true,\"presetTemperature\":%ld,\"currentTemperature\":%ld}",
                 18 + i % 10, 20 + i % 7);
        put(m, path, rid, body);
    }
}

static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg,
                       const mosquitto_property *props)
{
    json_error_t jerr;
    json_t *command, *actions, *results, *body;
    const char *cid;
    char path[1024], rid[32], *text;
    size_t i;

    (void)ud;
    (void)props;
    if (strcmp(msg->topic, topic) != 0) {
        /* A reply on p/{client}/resp: counted in a burst, else ignored. */
        if (burst > 0 && msg->payloadlen >= 3) {
            answered++;
            if (((const char *)msg->payload)[0] == '2')
                answered_ok++;
            last_answer = now_s();
        }
        return;
    }
    command = json_loadb(msg->payload, (size_t)msg->payloadlen, 0, &jerr);
    cid = json_string_value(json_object_get(command, "commandID"));
    actions = json_object_get(command, "actions");
    if (!cid || !json_is_array(actions)) {
        json_decref(command);
        return;
    }
    results = json_array();
    for (i = 0; i < json_array_size(actions); i++) {
        json_t *action = json_array_get(actions, i), *params;
        const char *name, *error = NULL;
        json_t *result;
        void *it = json_object_iter(action);
        if (!it)
            continue;
        name = json_object_iter_key(it);
        params = json_object_iter_value(it);
        if (run_action(name, params, &error))
            result = json_pack("{s:b}", "succeeded", 1);
        else
            result = json_pack("{s:b,s:s}", "succeeded", 0, "errorMessage", error);
        json_array_append_new(results, json_pack("{s:o}", name, result));
    }
    body = json_pack("{s:o}", "actionResults", results);
    text = json_dumps(body, JSON_COMPACT);
    snprintf(path, sizeof path, "p/%s/thing-if/apps/%s/targets/thing:%s/commands/%s/action-results", topic, app_id,
             thing_id, cid);
    snprintf(rid, sizeof rid, "c-%lu", ++request_counter);
    if (text)
        put(m, path, rid, text);
    free(text);
    json_decref(body);
    json_decref(command);
}

static void on_connect(struct mosquitto *m, void *ud, int rc, int flags, const mosquitto_property *props)
{
    (void)ud;
    (void)flags;
    (void)props;
    if (rc != 0) {
        fprintf(stderr, "c_appliance: CONNACK %d\n", rc);
        stop = 1;
        return;
    }
    mosquitto_subscribe(m, NULL, topic, 1);
    mosquitto_subscribe(m, NULL, resp_topic, 1);
    printf("c_appliance: connected\n");
    fflush(stdout);
    if (burst > 0 && burst_start == 0)
        send_burst(m);
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *identity_file = NULL, *username, *password;
    int port = 0, i;
    json_t *ident;
    json_error_t jerr;
    struct mosquitto *m;

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--host") == 0)
            host = argv[i + 1];
        else if (strcmp(argv[i], "--identity") == 0)
            identity_file = argv[i + 1];
        else if (strcmp(argv[i], "--state-burst") == 0)
            burst = atol(argv[i + 1]);
        else
            break;
    }
    if (port <= 0 || !identity_file || i < argc) {
        fprintf(stderr, "usage: c_appliance --port P --identity FILE [--host H] [--state-burst N]\n");
        return 2;
    }
    ident = json_load_file(identity_file, 0, &jerr);
    if (!ident || json_unpack_ex(ident, &jerr, 0, "{s:s,s:s,s:s,s:{s:s,s:s,s:s}}", "appID", &app_id, "thingID",
                                 &thing_id, "accessToken", &token, "mqttEndpoint", "mqttTopic", &topic, "username",
                                 &username, "password", &password) != 0) {
        fprintf(stderr, "c_appliance: %s: %s\n", identity_file, jerr.text);
        return 1;
    }
    snprintf(resp_topic, sizeof resp_topic, "p/%s/resp", topic);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    mosquitto_lib_init();
    m = mosquitto_new(topic, false, NULL); /* the installation's client ID, a persistent session */
    if (!m)
        return 1;
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_username_pw_set(m, username, password);
    mosquitto_connect_v5_callback_set(m, on_connect);
    mosquitto_message_v5_callback_set(m, on_message);
    if (mosquitto_connect_bind_v5(m, host, port, 60, NULL, NULL) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "c_appliance: cannot connect to %s:%d\n", host, port);
        return 1;
    }
    while (!stop) {
        int rc = mosquitto_loop(m, 100, 1);
        if (rc != MOSQ_ERR_SUCCESS && !stop) {
            fprintf(stderr, "c_appliance: %s\n", mosquitto_strerror(rc));
            break;
        }
        if (burst > 0 && burst_start > 0 && (answered >= burst || now_s() - last_answer > 10))
            break;
    }
    if (burst > 0) {
        double secs = last_answer - burst_start;
        printf("burst: sent %ld answered %ld ok %ld seconds %.3f per_s %.0f\n", burst, answered, answered_ok, secs,
               secs > 0 ? (double)answered / secs : 0.0);
    }
    mosquitto_disconnect(m);
    mosquitto_destroy(m);
    mosquitto_lib_cleanup();
    json_decref(ident);
    return burst > 0 && answered_ok < burst ? 1 : 0;
}
