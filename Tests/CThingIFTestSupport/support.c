/* SPDX-License-Identifier: Apache-2.0 */

/*
 * support.c - the C test appliance (see include/ctest_support.h).
 *
 * Uses libthingif only through thingif.h. Two mutexes: `mu` guards records,
 * behaviors, registrations and the device state; `log_mu` guards the log
 * lines. Neither is held while calling into the library, because the library
 * may log (and so call back) from inside any call.
 */
#define _GNU_SOURCE
#include "ctest_support.h"
#include "thingif.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CT_MAX_BEHAVIORS 32
#define CT_MAX_LOG_LINES 20000
#define CT_MAX_DEFERRED 64

struct behavior {
    char *action;
    char *fail_message;
    char *data_json;
    int upload_mode; /* 0 none, 1 PUT, 2 PATCH */
    int probe;
    int defer;
    int sleep_ms;
    int hold_ms; /* wait for ct_release, at most this long */
};

/* A deferred action waiting for ct_complete_deferred. */
struct pending {
    char *action;
    thingif_deferred_t *d;
};

enum handler_kind { KIND_RECORDER = 0, KIND_AIRCON = 1, KIND_ALIAS_AIRCON = 2 };

struct registration {
    struct registration *next;
    ct_thing *ct;
    char *tag;
    int kind;
};

struct ct_thing {
    thingif_t *t;
    int log_level;
    pthread_mutex_t mu;
    json_t *records;
    struct behavior behaviors[CT_MAX_BEHAVIORS];
    int nbehaviors;
    struct registration *regs;
    int power, preset_temperature, fan_speed;
    int provider_calls;
    struct pending deferred[CT_MAX_DEFERRED];
    int ndeferred;

    pthread_mutex_t log_mu;
    char **logs;
    int nlogs;
    ct_log_hook log_hook; /* under log_mu */
    void *log_hook_ud;

    long long clock_ms; /* the fake clock (ct_use_fake_clock), read atomically */

    /* thingif_end_node_cb's calls, in order (under mu): {"event","vendorThingID","thingID","detail"}. */
    json_t *end_node_events;

    /* ct_behave_hold: handlers inside the hold, and whether ct_release came (under mu). */
    pthread_cond_t hold_cv;
    int holding;
    int released;
};

/* ---------------------------------------------------------------- helpers */

/* `ms` milliseconds from now on `clock`, for pthread_cond_timedwait. */
static struct timespec deadline_in(clockid_t clock, int ms)
{
    struct timespec deadline;
    clock_gettime(clock, &deadline);
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    return deadline;
}

/* Inside a handler: wait for ct_release, at most max_ms. */
static void hold(ct_thing *ct, int max_ms)
{
    struct timespec deadline = deadline_in(CLOCK_REALTIME, max_ms);
    pthread_mutex_lock(&ct->mu);
    ct->holding++;
    while (!ct->released && pthread_cond_timedwait(&ct->hold_cv, &ct->mu, &deadline) == 0) {
    }
    ct->holding--;
    pthread_mutex_unlock(&ct->mu);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static char *dump_or_null(const json_t *j)
{
    return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
}

static const char *level_name(int level)
{
    switch (level) {
    case THINGIF_LOG_ERROR: return "ERROR";
    case THINGIF_LOG_WARNING: return "WARNING";
    case THINGIF_LOG_INFO: return "INFO";
    case THINGIF_LOG_DEBUG: return "DEBUG";
    default: return "?";
    }
}

static void log_cb(int level, const char *message, void *userdata)
{
    ct_thing *ct = userdata;
    const char *lv = level_name(level);
    size_t n = strlen(lv) + 1 + strlen(message) + 1;
    char *line = malloc(n);
    if (!line)
        return;
    snprintf(line, n, "%s %s", lv, message);
    pthread_mutex_lock(&ct->log_mu);
    if (ct->nlogs == CT_MAX_LOG_LINES) {
        /* Keep the newer half. */
        int half = CT_MAX_LOG_LINES / 2;
        for (int i = 0; i < half; i++)
            free(ct->logs[i]);
        memmove(ct->logs, ct->logs + half, (size_t)(CT_MAX_LOG_LINES - half) * sizeof(char *));
        ct->nlogs -= half;
    }
    ct->logs[ct->nlogs++] = line;
    ct_log_hook hook = ct->log_hook;
    void *hook_ud = ct->log_hook_ud;
    pthread_mutex_unlock(&ct->log_mu);
    if (hook) {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s %s", lv, message);
        hook(copy, hook_ud);
    }
}

/* --------------------------------------------------------------- lifetime */

ct_thing *ct_new(const char *app_id, const char *app_key, const char *storage_dir, int port, int log_level)
{
    ct_thing *ct = calloc(1, sizeof(*ct));
    if (!ct)
        return NULL;
    ct->logs = calloc(CT_MAX_LOG_LINES, sizeof(char *));
    ct->records = json_array();
    if (!ct->logs || !ct->records) {
        free(ct->logs);
        json_decref(ct->records);
        free(ct);
        return NULL;
    }
    pthread_mutex_init(&ct->mu, NULL);
    pthread_mutex_init(&ct->log_mu, NULL);
    pthread_cond_init(&ct->hold_cv, NULL);
    ct->log_level = log_level;
    ct->t = thingif_new(app_id, app_key, storage_dir);
    if (!ct->t) {
        free(ct->logs);
        json_decref(ct->records);
        pthread_mutex_destroy(&ct->mu);
        pthread_mutex_destroy(&ct->log_mu);
        pthread_cond_destroy(&ct->hold_cv);
        free(ct);
        return NULL;
    }
    if (thingif_set_log_callback(ct->t, log_cb, log_level, ct) != THINGIF_OK ||
        thingif_set_broker(ct->t, "127.0.0.1", port) != THINGIF_OK) {
        if (thingif_destroy(ct->t) != THINGIF_OK)
            fprintf(stderr, "support: thingif_destroy failed\n");
        free(ct->logs);
        json_decref(ct->records);
        free(ct);
        return NULL;
    }
    return ct;
}

/* thingif_loop_stop / thingif_destroy on a helper thread, bounded. */
struct bounded_call {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    thingif_t *t;
    int destroy;
    int done;
    int rc;
};

static void *bounded_main(void *arg)
{
    struct bounded_call *b = arg;
    int rc = b->destroy ? thingif_destroy(b->t) : thingif_loop_stop(b->t);
    pthread_mutex_lock(&b->mu);
    b->rc = rc;
    b->done = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* Returns 0 and the call's status in *rc, or -1 on a timeout (then the
 * helper's state is leaked on purpose: its thread still uses it). */
static int run_bounded(thingif_t *t, int destroy, int timeout_ms, int *rc)
{
    struct bounded_call *b = calloc(1, sizeof(*b));
    if (!b)
        return -1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&b->mu, NULL);
    b->t = t;
    b->destroy = destroy;
    pthread_t th;
    if (pthread_create(&th, NULL, bounded_main, b) != 0) {
        free(b);
        return -1;
    }
    struct timespec deadline = deadline_in(CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&b->mu);
    while (!b->done) {
        if (pthread_cond_timedwait(&b->cv, &b->mu, &deadline) == ETIMEDOUT)
            break;
    }
    int done = b->done;
    *rc = b->rc;
    pthread_mutex_unlock(&b->mu);
    if (!done) {
        pthread_detach(th);
        return -1;
    }
    pthread_join(th, NULL);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b);
    return 0;
}

int ct_destroy_handle(ct_thing *ct, int timeout_ms)
{
    if (!ct || !ct->t)
        return THINGIF_OK;
    int rc = 0;
    if (run_bounded(ct->t, 1, timeout_ms, &rc) != 0)
        return -1;
    if (rc == THINGIF_OK)
        ct->t = NULL;
    return rc;
}

int ct_free(ct_thing *ct, int timeout_ms)
{
    if (!ct)
        return THINGIF_OK;
    int rc = ct_destroy_handle(ct, timeout_ms);
    if (rc != THINGIF_OK)
        return rc;
    /* Deferred handles are the caller's until completed: complete the
     * leftovers now that the handle is gone (THINGIF_ERR_STATE; frees them). */
    for (int i = 0; i < ct->ndeferred; i++) {
        if (thingif_deferred_complete(ct->deferred[i].d, NULL, NULL) != THINGIF_ERR_STATE)
            fprintf(stderr, "support: a leftover deferred action was completed after destroy\n");
        free(ct->deferred[i].action);
    }
    for (int i = 0; i < ct->nbehaviors; i++) {
        free(ct->behaviors[i].action);
        free(ct->behaviors[i].fail_message);
        free(ct->behaviors[i].data_json);
    }
    while (ct->regs) {
        struct registration *next = ct->regs->next;
        free(ct->regs->tag);
        free(ct->regs);
        ct->regs = next;
    }
    for (int i = 0; i < ct->nlogs; i++)
        free(ct->logs[i]);
    free(ct->logs);
    json_decref(ct->records);
    json_decref(ct->end_node_events);
    pthread_mutex_destroy(&ct->mu);
    pthread_mutex_destroy(&ct->log_mu);
    pthread_cond_destroy(&ct->hold_cv);
    free(ct);
    return THINGIF_OK;
}

int ct_set_option(ct_thing *ct, int option, long value)
{
    return thingif_set_option(ct->t, option, value);
}

int ct_onboard(ct_thing *ct, const char *vendor_thing_id, const char *password, const char *thing_type,
               const char *firmware_version, const char *properties_json)
{
    return thingif_onboard(ct->t, vendor_thing_id, password, thing_type, firmware_version, properties_json);
}

int ct_use_onboarded(ct_thing *ct, const char *thing_id, const char *access_token)
{
    return thingif_use_onboarded(ct->t, thing_id, access_token);
}

const char *ct_thing_id(ct_thing *ct)
{
    return thingif_thing_id(ct->t);
}

int ct_is_connected(ct_thing *ct)
{
    return thingif_is_connected(ct->t);
}

/* --------------------------------------------------------------- handlers */

static struct behavior *find_behavior_locked(ct_thing *ct, const char *action)
{
    for (int i = 0; i < ct->nbehaviors; i++)
        if (strcmp(ct->behaviors[i].action, action) == 0)
            return &ct->behaviors[i];
    return NULL;
}

static struct behavior *behavior_slot_locked(ct_thing *ct, const char *action)
{
    struct behavior *b = find_behavior_locked(ct, action);
    if (b)
        return b;
    if (ct->nbehaviors == CT_MAX_BEHAVIORS)
        return NULL;
    b = &ct->behaviors[ct->nbehaviors++];
    memset(b, 0, sizeof(*b));
    b->action = strdup(action);
    return b;
}

/* Sets one int field (its offsetof in struct behavior) of `action`'s behavior. */
static int set_behavior_int(ct_thing *ct, const char *action, size_t field, int value)
{
    pthread_mutex_lock(&ct->mu);
    struct behavior *b = behavior_slot_locked(ct, action);
    if (b)
        *(int *)((char *)b + field) = value;
    pthread_mutex_unlock(&ct->mu);
    return b ? 0 : -1;
}

static json_t *device_state(ct_thing *ct, int tick)
{
    pthread_mutex_lock(&ct->mu);
    json_t *s = json_pack("{s:b,s:i,s:i}", "power", ct->power, "presetTemperature", ct->preset_temperature, "fanSpeed",
                          ct->fan_speed);
    pthread_mutex_unlock(&ct->mu);
    if (s && tick >= 0)
        json_object_set_new(s, "tick", json_integer(tick));
    return s;
}

/* The AirConditioner-Demo logic. Returns NULL on success, or the reason
 * (written into buf) for thingif_action_fail(). */
static const char *run_aircon(ct_thing *ct, thingif_action_t *a, int kind, char *buf, size_t len)
{
    const char *name = thingif_action_name(a);
    json_t *params = thingif_action_params(a);
    json_error_t err;
    int power = 0, value = 0;
    if (kind == KIND_AIRCON) {
        if (strcmp(name, "turnPower") == 0) {
            if (json_unpack_ex(params, &err, 0, "{s:b}", "power", &power) != 0)
                goto invalid;
        } else if (strcmp(name, "setPresetTemperature") == 0) {
            if (json_unpack_ex(params, &err, 0, "{s:i}", "presetTemperature", &value) != 0)
                goto invalid;
        } else if (strcmp(name, "setFanSpeed") == 0) {
            if (json_unpack_ex(params, &err, 0, "{s:i}", "fanSpeed", &value) != 0)
                goto invalid;
        } else {
            snprintf(buf, len, "%s: not an AirConditioner-Demo action", name);
            return buf;
        }
    } else {
        /* Trait commands carry scalars: {"turnPower":true}. */
        if (strcmp(name, "turnPower") == 0) {
            if (json_unpack_ex(params, &err, 0, "b", &power) != 0)
                goto invalid;
        } else if (strcmp(name, "setPresetTemperature") == 0 || strcmp(name, "setFanSpeed") == 0) {
            if (json_unpack_ex(params, &err, 0, "i", &value) != 0)
                goto invalid;
        } else {
            snprintf(buf, len, "%s: not an AirConditionerAlias action", name);
            return buf;
        }
    }
    pthread_mutex_lock(&ct->mu);
    if (strcmp(name, "turnPower") == 0)
        ct->power = power;
    else if (strcmp(name, "setPresetTemperature") == 0)
        ct->preset_temperature = value;
    else
        ct->fan_speed = value;
    pthread_mutex_unlock(&ct->mu);
    return NULL;
invalid:
    snprintf(buf, len, "%s: invalid params: %s", name, err.text);
    return buf;
}

static json_t *probe(thingif_action_t *a, ct_thing *ct, json_t **allowed_out)
{
    thingif_t *t = thingif_action_thing(a);
    int loop_stop = thingif_loop_stop(t);
    int destroy = thingif_destroy(t);
    int loop = thingif_loop(t, 0);
    int onboard = thingif_onboard(t, "probe-vendor", "probe-password", NULL, NULL, NULL);
    int use_onboarded = thingif_use_onboarded(t, "probe-thing", "probe-token");
    json_t *forbidden = json_pack("{s:i,s:i,s:i,s:i,s:i}", "loop_stop", loop_stop, "destroy", destroy, "loop", loop,
                                  "onboard", onboard, "use_onboarded", use_onboarded);

    int thing_id = thingif_thing_id(t) != NULL;
    int connected = thingif_is_connected(t);
    int set_option = thingif_set_option(t, THINGIF_OPT_REQUEST_TIMEOUT_MS, 10000);
    int set_log = thingif_set_log_callback(t, log_cb, ct->log_level, ct);
    int on_action = thingif_on_action(t, "ProbeSchema", 1, "probe", NULL, NULL);
    int on_alias = thingif_on_alias_action(t, "ProbeAlias", "probe", NULL, NULL);
    int firmware = thingif_firmware_version_update(t, "probe-1.0");
    int fail_bad_utf8 = thingif_action_fail(a, "\xff\xfe not UTF-8");
    int data_array = thingif_action_attach_data(a, json_array());
    int data_null = thingif_action_attach_data(a, NULL);
    *allowed_out = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "thing_id", thing_id, "is_connected",
                             connected, "set_option", set_option, "set_log_callback", set_log, "on_action", on_action,
                             "on_alias_action", on_alias, "update_firmware_version", firmware, "fail_bad_utf8",
                             fail_bad_utf8, "set_data_array", data_array, "set_data_null", data_null);
    return forbidden;
}

static void handle(thingif_action_t *a, void *userdata)
{
    struct registration *reg = userdata;
    ct_thing *ct = reg->ct;
    const char *name = thingif_action_name(a);

    char *params = dump_or_null(thingif_action_params(a));
    char *metadata = dump_or_null(thingif_action_metadata(a));
    json_t *rec = json_pack("{s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:i,s:s?,s:s?,s:s?,s:s?,s:i,s:b}", "tag", reg->tag, "name",
                            name, "params", params, "commandID", thingif_action_command_id(a), "issuer",
                            thingif_action_issuer(a), "schema", thingif_action_schema(a), "schemaVersion",
                            thingif_action_schema_version(a), "alias", thingif_action_alias(a), "title",
                            thingif_action_title(a), "description", thingif_action_description(a), "metadata", metadata,
                            "index", thingif_action_index(a), "thingMatches", thingif_action_thing(a) == ct->t);
    free(params);
    free(metadata);
    if (!rec)
        rec = json_pack("{s:s}", "error", "could not build the record");
    else {
        json_object_set_new(rec, "expiresAt", json_integer(thingif_action_command_expires_at(a)));
        const char *end_node = thingif_action_end_node(a);
        json_object_set_new(rec, "endNode", end_node ? json_string(end_node) : json_null());
        const char *target = thingif_action_thing_id(a);
        json_object_set_new(rec, "targetThingID", target ? json_string(target) : json_null());
    }

    char reason[512];
    if (reg->kind != KIND_RECORDER) {
        const char *why = run_aircon(ct, a, reg->kind, reason, sizeof(reason));
        if (why)
            json_object_set_new(rec, "failRc", json_integer(thingif_action_fail(a, why)));
    }

    /* Copy the behavior out, then act without the lock. */
    char *fail_message = NULL, *data_json = NULL;
    int upload_mode = 0, do_probe = 0, do_defer = 0, sleep_ms = 0, hold_ms = 0;
    pthread_mutex_lock(&ct->mu);
    struct behavior *b = find_behavior_locked(ct, name);
    if (b) {
        fail_message = dup_or_null(b->fail_message);
        data_json = dup_or_null(b->data_json);
        upload_mode = b->upload_mode;
        do_probe = b->probe;
        do_defer = b->defer;
        sleep_ms = b->sleep_ms;
        hold_ms = b->hold_ms;
    }
    pthread_mutex_unlock(&ct->mu);

    if (sleep_ms > 0)
        usleep((useconds_t)sleep_ms * 1000);
    if (hold_ms > 0)
        hold(ct, hold_ms);

    if (do_probe) {
        json_t *allowed = NULL;
        json_object_set_new(rec, "forbidden", probe(a, ct, &allowed));
        json_object_set_new(rec, "allowed", allowed ? allowed : json_null());
    }
    if (fail_message)
        json_object_set_new(rec, "failRc", json_integer(thingif_action_fail(a, fail_message)));
    if (data_json) {
        json_t *data = json_loads(data_json, 0, NULL);
        json_object_set_new(rec, "dataRc", json_integer(thingif_action_attach_data(a, data)));
    }
    if (upload_mode) {
        json_t *state = device_state(ct, -1);
        int rc = upload_mode == 2 ? thingif_state_patch(thingif_action_thing(a), state)
                                  : thingif_state_update(thingif_action_thing(a), state);
        json_decref(state);
        json_object_set_new(rec, "uploadRc", json_integer(rc));
    }
    free(fail_message);
    free(data_json);

    /* Last, so whatever fail/set_data set above is discarded by the defer. */
    thingif_deferred_t *d = NULL;
    if (do_defer) {
        d = thingif_action_defer(a);
        int same = d != NULL && thingif_action_defer(a) == d;
        json_object_set_new(rec, "deferred", json_boolean(same));
    }

    pthread_mutex_lock(&ct->mu);
    if (d) {
        if (ct->ndeferred < CT_MAX_DEFERRED) {
            ct->deferred[ct->ndeferred].action = strdup(name);
            ct->deferred[ct->ndeferred].d = d;
            ct->ndeferred++;
        } else {
            json_object_set_new(rec, "deferred", json_false());
            d = NULL; /* leaked on purpose: a test never defers this many */
        }
    }
    json_array_append_new(ct->records, rec);
    pthread_mutex_unlock(&ct->mu);
}

static struct registration *add_registration(ct_thing *ct, const char *tag, int kind)
{
    struct registration *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->ct = ct;
    r->tag = strdup(tag ? tag : "");
    r->kind = kind;
    pthread_mutex_lock(&ct->mu);
    r->next = ct->regs;
    ct->regs = r;
    pthread_mutex_unlock(&ct->mu);
    return r;
}

static const char *const aircon_actions[] = {"turnPower", "setPresetTemperature", "setFanSpeed"};

int ct_register_aircon_handlers(ct_thing *ct, const char *schema, int schema_version)
{
    struct registration *r = add_registration(ct, "aircon", KIND_AIRCON);
    if (!r)
        return THINGIF_ERR_NOMEM;
    for (size_t i = 0; i < sizeof(aircon_actions) / sizeof(aircon_actions[0]); i++) {
        int rc = thingif_on_action(ct->t, schema, schema_version, aircon_actions[i], handle, r);
        if (rc != THINGIF_OK)
            return rc;
    }
    return THINGIF_OK;
}

int ct_register_alias_handlers(ct_thing *ct, const char *alias)
{
    struct registration *r = add_registration(ct, "alias", KIND_ALIAS_AIRCON);
    if (!r)
        return THINGIF_ERR_NOMEM;
    for (size_t i = 0; i < sizeof(aircon_actions) / sizeof(aircon_actions[0]); i++) {
        int rc = thingif_on_alias_action(ct->t, alias, aircon_actions[i], handle, r);
        if (rc != THINGIF_OK)
            return rc;
    }
    return THINGIF_OK;
}

int ct_register_recorder(ct_thing *ct, const char *schema, int schema_version, const char *action, const char *tag)
{
    struct registration *r = add_registration(ct, tag, KIND_RECORDER);
    if (!r)
        return THINGIF_ERR_NOMEM;
    return thingif_on_action(ct->t, schema, schema_version, action, handle, r);
}

int ct_register_alias_recorder(ct_thing *ct, const char *alias, const char *action, const char *tag)
{
    struct registration *r = add_registration(ct, tag, KIND_RECORDER);
    if (!r)
        return THINGIF_ERR_NOMEM;
    return thingif_on_alias_action(ct->t, alias, action, handle, r);
}

int ct_register_any(ct_thing *ct, const char *tag)
{
    if (!tag)
        return thingif_on_any_action(ct->t, NULL, NULL);
    struct registration *r = add_registration(ct, tag, KIND_RECORDER);
    if (!r)
        return THINGIF_ERR_NOMEM;
    return thingif_on_any_action(ct->t, handle, r);
}

int ct_unregister(ct_thing *ct, const char *schema, int schema_version, const char *action)
{
    return thingif_on_action(ct->t, schema, schema_version, action, NULL, NULL);
}

int ct_unregister_alias(ct_thing *ct, const char *alias, const char *action)
{
    return thingif_on_alias_action(ct->t, alias, action, NULL, NULL);
}

/* -------------------------------------------------------------- behaviors */

int ct_behave_fail(ct_thing *ct, const char *action, const char *message)
{
    pthread_mutex_lock(&ct->mu);
    struct behavior *b = behavior_slot_locked(ct, action);
    if (b) {
        free(b->fail_message);
        b->fail_message = dup_or_null(message);
    }
    pthread_mutex_unlock(&ct->mu);
    return b ? 0 : -1;
}

int ct_behave_data(ct_thing *ct, const char *action, const char *data_json)
{
    pthread_mutex_lock(&ct->mu);
    struct behavior *b = behavior_slot_locked(ct, action);
    if (b) {
        free(b->data_json);
        b->data_json = dup_or_null(data_json);
    }
    pthread_mutex_unlock(&ct->mu);
    return b ? 0 : -1;
}

int ct_behave_upload_state(ct_thing *ct, const char *action, int mode)
{
    return set_behavior_int(ct, action, offsetof(struct behavior, upload_mode), mode);
}

int ct_behave_sleep(ct_thing *ct, const char *action, int ms)
{
    return set_behavior_int(ct, action, offsetof(struct behavior, sleep_ms), ms);
}

int ct_behave_hold(ct_thing *ct, const char *action, int max_ms)
{
    return set_behavior_int(ct, action, offsetof(struct behavior, hold_ms), max_ms);
}

void ct_release(ct_thing *ct)
{
    pthread_mutex_lock(&ct->mu);
    ct->released = 1;
    pthread_cond_broadcast(&ct->hold_cv);
    pthread_mutex_unlock(&ct->mu);
}

int ct_holding(ct_thing *ct)
{
    pthread_mutex_lock(&ct->mu);
    int n = ct->holding;
    pthread_mutex_unlock(&ct->mu);
    return n;
}

int ct_set_tls(ct_thing *ct, const char *cafile, const char *certfile, const char *keyfile)
{
    return thingif_set_tls(ct->t, cafile, certfile, keyfile);
}

int ct_set_claim_certificate(ct_thing *ct, const char *certfile, const char *keyfile)
{
    return thingif_set_claim_certificate(ct->t, certfile, keyfile);
}

void *ct_handle(ct_thing *ct)
{
    return ct->t;
}

int ct_behave_defer(ct_thing *ct, const char *action, int on)
{
    return set_behavior_int(ct, action, offsetof(struct behavior, defer), on);
}

int ct_complete_deferred(ct_thing *ct, const char *action, const char *error_message, const char *data_json)
{
    json_t *data = NULL;
    if (data_json) {
        data = json_loads(data_json, JSON_DECODE_ANY, NULL);
        if (!data)
            return -1;
    }
    thingif_deferred_t *d = NULL;
    char *taken = NULL;
    pthread_mutex_lock(&ct->mu);
    for (int i = 0; i < ct->ndeferred; i++) {
        if (action && strcmp(ct->deferred[i].action, action) != 0)
            continue;
        d = ct->deferred[i].d;
        taken = ct->deferred[i].action;
        memmove(&ct->deferred[i], &ct->deferred[i + 1], (size_t)(ct->ndeferred - i - 1) * sizeof(struct pending));
        ct->ndeferred--;
        break;
    }
    pthread_mutex_unlock(&ct->mu);
    if (!d) {
        json_decref(data);
        return -2;
    }
    int rc = thingif_deferred_complete(d, error_message, data); /* steals data */
    if (rc == THINGIF_ERR_INVALID) {
        /* The header says the handle is still ours: keep it, first in line. */
        pthread_mutex_lock(&ct->mu);
        if (ct->ndeferred < CT_MAX_DEFERRED) {
            memmove(&ct->deferred[1], &ct->deferred[0], (size_t)ct->ndeferred * sizeof(struct pending));
            ct->deferred[0].action = taken;
            ct->deferred[0].d = d;
            ct->ndeferred++;
            taken = NULL;
        }
        pthread_mutex_unlock(&ct->mu);
    }
    free(taken);
    return rc;
}

int ct_deferred_count(ct_thing *ct)
{
    pthread_mutex_lock(&ct->mu);
    int n = ct->ndeferred;
    pthread_mutex_unlock(&ct->mu);
    return n;
}

int ct_behave_probe(ct_thing *ct, const char *action)
{
    return set_behavior_int(ct, action, offsetof(struct behavior, probe), 1);
}

/* ------------------------------------------------------------------- loop */

int ct_set_broker(ct_thing *ct, const char *host, int port)
{
    return thingif_set_broker(ct->t, host, port);
}

int ct_start(ct_thing *ct)
{
    return thingif_loop_start(ct->t);
}

int ct_stop(ct_thing *ct, int timeout_ms)
{
    int rc = 0;
    if (run_bounded(ct->t, 0, timeout_ms, &rc) != 0)
        return -1;
    return rc;
}

int ct_loop_once(ct_thing *ct, int timeout_ms)
{
    return thingif_loop(ct->t, timeout_ms);
}

int ct_loop_for(ct_thing *ct, int ms)
{
    long long end = now_ms() + ms;
    int rc = THINGIF_OK;
    do {
        rc = thingif_loop(ct->t, 50);
        if (rc != THINGIF_OK && rc != THINGIF_ERR_NO_CONN)
            return rc;
    } while (now_ms() < end);
    return rc;
}

/* ------------------------------------------------------------------ state */

static int upload_text(ct_thing *ct, const char *text, int patch)
{
    json_t *j = json_loads(text, 0, NULL);
    if (!j)
        return -1;
    int rc = patch ? thingif_state_patch(ct->t, j) : thingif_state_update(ct->t, j);
    json_decref(j);
    return rc;
}

int ct_update_state(ct_thing *ct, const char *state_json)
{
    return upload_text(ct, state_json, 0);
}

int ct_patch_state(ct_thing *ct, const char *state_json)
{
    return upload_text(ct, state_json, 1);
}

int ct_update_firmware_version(ct_thing *ct, const char *version)
{
    return thingif_firmware_version_update(ct->t, version);
}

/* ---------------------------------------------------------------- gateways */

static void end_node_cb(thingif_t *t, int event, const char *vendor_thing_id, const char *thing_id, const char *detail,
                        void *userdata)
{
    ct_thing *ct = userdata;
    /* What a firmware reads back inside the callback. */
    const char *now = thingif_end_node_thing_id(t, vendor_thing_id);
    json_t *e = json_pack("{s:i,s:s?,s:s?,s:s?,s:s?}", "event", event, "vendorThingID", vendor_thing_id, "thingID",
                          thing_id, "detail", detail, "lookedUp", now);
    pthread_mutex_lock(&ct->mu);
    if (!ct->end_node_events)
        ct->end_node_events = json_array();
    json_array_append_new(ct->end_node_events, e ? e : json_pack("{s:s}", "error", "could not build the event"));
    pthread_mutex_unlock(&ct->mu);
}

int ct_gateway(ct_thing *ct)
{
    int rc = thingif_set_layout_position(ct->t, THINGIF_LAYOUT_GATEWAY);
    if (rc != THINGIF_OK)
        return rc;
    return thingif_set_end_node_callback(ct->t, end_node_cb, ct);
}

char *ct_end_node_events_json(ct_thing *ct)
{
    pthread_mutex_lock(&ct->mu);
    char *s = ct->end_node_events ? json_dumps(ct->end_node_events, JSON_COMPACT) : strdup("[]");
    pthread_mutex_unlock(&ct->mu);
    return s;
}

int ct_end_node_add(ct_thing *ct, const char *vendor_thing_id, const char *password, const char *thing_type,
                    const char *firmware_version, const char *properties_json)
{
    return thingif_end_node_add(ct->t, vendor_thing_id, password, thing_type, firmware_version, properties_json);
}

char *ct_end_node_thing_id(ct_thing *ct, const char *vendor_thing_id)
{
    const char *id = thingif_end_node_thing_id(ct->t, vendor_thing_id);
    return id ? strdup(id) : NULL;
}

int ct_end_node_set_online(ct_thing *ct, const char *vendor_thing_id, int online)
{
    return thingif_end_node_set_online(ct->t, vendor_thing_id, online);
}

int ct_end_node_remove(ct_thing *ct, const char *vendor_thing_id)
{
    return thingif_end_node_remove(ct->t, vendor_thing_id);
}

static int end_node_upload(ct_thing *ct, const char *vendor_thing_id, const char *state_json, int partial)
{
    json_t *j = json_loads(state_json, JSON_DECODE_ANY, NULL);
    if (!j)
        return -1;
    int rc = partial ? thingif_end_node_state_patch(ct->t, vendor_thing_id, j)
                     : thingif_end_node_state_update(ct->t, vendor_thing_id, j);
    json_decref(j);
    return rc;
}

int ct_end_node_state_update(ct_thing *ct, const char *vendor_thing_id, const char *state_json)
{
    return end_node_upload(ct, vendor_thing_id, state_json, 0);
}

int ct_end_node_state_patch(ct_thing *ct, const char *vendor_thing_id, const char *state_json)
{
    return end_node_upload(ct, vendor_thing_id, state_json, 1);
}

int ct_end_node_firmware_version_update(ct_thing *ct, const char *vendor_thing_id, const char *version)
{
    return thingif_end_node_firmware_version_update(ct->t, vendor_thing_id, version);
}

static void list_one(const char *vendor_thing_id, const char *thing_id, int online, void *userdata)
{
    json_array_append_new(
        userdata, json_pack("{s:s,s:s?,s:b}", "vendorThingID", vendor_thing_id, "thingID", thing_id, "online", online));
}

char *ct_end_node_list_json(ct_thing *ct)
{
    json_t *list = json_array();
    if (thingif_end_node_foreach(ct->t, list_one, list) != THINGIF_OK) {
        json_decref(list);
        return NULL;
    }
    char *s = json_dumps(list, JSON_COMPACT);
    json_decref(list);
    return s;
}

static json_t *state_provider(thingif_t *t, void *userdata)
{
    ct_thing *ct = userdata;
    if (t != ct->t)
        return NULL;
    pthread_mutex_lock(&ct->mu);
    int tick = ++ct->provider_calls;
    pthread_mutex_unlock(&ct->mu);
    return device_state(ct, tick);
}

int ct_set_state_provider(ct_thing *ct, int interval_ms)
{
    if (interval_ms == 0)
        return thingif_set_state_provider(ct->t, NULL, 0, NULL);
    return thingif_set_state_provider(ct->t, state_provider, interval_ms, ct);
}

int ct_state_provider_calls(ct_thing *ct)
{
    pthread_mutex_lock(&ct->mu);
    int n = ct->provider_calls;
    pthread_mutex_unlock(&ct->mu);
    return n;
}

/* ---------------------------------------------------------------- reading */

char *ct_records_json(ct_thing *ct)
{
    pthread_mutex_lock(&ct->mu);
    char *s = json_dumps(ct->records, JSON_COMPACT);
    pthread_mutex_unlock(&ct->mu);
    return s;
}

int ct_record_count(ct_thing *ct)
{
    pthread_mutex_lock(&ct->mu);
    int n = (int)json_array_size(ct->records);
    pthread_mutex_unlock(&ct->mu);
    return n;
}

void ct_clear_records(ct_thing *ct)
{
    pthread_mutex_lock(&ct->mu);
    json_array_clear(ct->records);
    pthread_mutex_unlock(&ct->mu);
}

char *ct_logs_text(ct_thing *ct)
{
    pthread_mutex_lock(&ct->log_mu);
    size_t n = 1;
    for (int i = 0; i < ct->nlogs; i++)
        n += strlen(ct->logs[i]) + 1;
    char *out = malloc(n);
    if (out) {
        char *p = out;
        for (int i = 0; i < ct->nlogs; i++) {
            size_t l = strlen(ct->logs[i]);
            memcpy(p, ct->logs[i], l);
            p[l] = '\n';
            p += l + 1;
        }
        *p = '\0';
    }
    pthread_mutex_unlock(&ct->log_mu);
    return out;
}

void ct_set_log_hook(ct_thing *ct, ct_log_hook hook, void *userdata)
{
    pthread_mutex_lock(&ct->log_mu);
    ct->log_hook = hook;
    ct->log_hook_ud = userdata;
    pthread_mutex_unlock(&ct->log_mu);
}

int ct_log_contains(ct_thing *ct, const char *needle)
{
    int found = 0;
    pthread_mutex_lock(&ct->log_mu);
    for (int i = 0; i < ct->nlogs && !found; i++)
        found = strstr(ct->logs[i], needle) != NULL;
    pthread_mutex_unlock(&ct->log_mu);
    return found;
}

const char *ct_version(void)
{
    return thingif_version();
}

const char *ct_version_macro(void)
{
    return THINGIF_VERSION_STRING;
}

const char *ct_strerror(int status)
{
    return thingif_strerror(status);
}

/* ------------------------------------------------- action sets and timers */

int ct_action_set_create(ct_thing *ct, const char *name)
{
    return thingif_actionset_create(ct->t, name);
}

int ct_action_set_add_action(ct_thing *ct, const char *set, const char *schema, int schema_version, const char *action,
                             const char *params_json)
{
    json_t *params = NULL;
    if (params_json) {
        params = json_loads(params_json, JSON_DECODE_ANY, NULL);
        if (!params)
            return -1;
    }
    int rc = thingif_actionset_add_action(ct->t, set, schema, schema_version, action, params);
    json_decref(params);
    return rc;
}

int ct_action_set_remove_action(ct_thing *ct, const char *set, int index)
{
    return thingif_actionset_remove_action(ct->t, set, index);
}

int ct_action_set_delete(ct_thing *ct, const char *name)
{
    return thingif_actionset_delete(ct->t, name);
}

int ct_action_set_execute(ct_thing *ct, const char *name)
{
    return thingif_actionset_execute(ct->t, name);
}

int ct_timer_create(ct_thing *ct, const char *name, long long fire_date_ms, int recurrence_unit, int recurrence_count,
                    const char *time_zone, const char *action_sets_csv)
{
    const char *names[32];
    char *copy = strdup(action_sets_csv ? action_sets_csv : "");
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && n < 32; tok = strtok_r(NULL, ",", &save))
        names[n++] = tok;
    int rc = thingif_timer_create(ct->t, name, fire_date_ms, recurrence_unit, recurrence_count, time_zone, names, n);
    free(copy);
    return rc;
}

int ct_timer_enable(ct_thing *ct, const char *name, int enabled)
{
    return thingif_timer_enable(ct->t, name, enabled);
}

int ct_timer_delete(ct_thing *ct, const char *name)
{
    return thingif_timer_delete(ct->t, name);
}

static long long fake_clock(void *userdata)
{
    ct_thing *ct = userdata;
    return __atomic_load_n(&ct->clock_ms, __ATOMIC_SEQ_CST);
}

int ct_use_fake_clock(ct_thing *ct, long long start_ms)
{
    __atomic_store_n(&ct->clock_ms, start_ms, __ATOMIC_SEQ_CST);
    return thingif_set_clock(ct->t, fake_clock, ct);
}

void ct_clock_set(ct_thing *ct, long long ms)
{
    __atomic_store_n(&ct->clock_ms, ms, __ATOMIC_SEQ_CST);
}

int ct_use_system_clock(ct_thing *ct)
{
    return thingif_set_clock(ct->t, NULL, NULL);
}

/* ----------------------------------------------------------------- misuse */

struct report {
    char *buf;
    size_t len;
    size_t used;
    int failures;
};

__attribute__((format(printf, 2, 3))) static void report_add(struct report *r, const char *fmt, ...)
{
    r->failures++;
    if (!r->buf || r->len == 0 || r->used + 1 >= r->len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->buf + r->used, r->len - r->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        r->used = r->used + (size_t)n < r->len ? r->used + (size_t)n : r->len - 1;
}

#define CHECK_RC(expr, want)                                                                                        \
    do {                                                                                                            \
        int got_ = (expr);                                                                                          \
        if (got_ != (want))                                                                                         \
            report_add(&rep, "line %d: %s gave %d, expected %d (%s)\n", __LINE__, #expr, got_, (int)(want), #want); \
    } while (0)

#define CHECK_TRUE(cond)                                                      \
    do {                                                                      \
        if (!(cond))                                                          \
            report_add(&rep, "line %d: %s does not hold\n", __LINE__, #cond); \
    } while (0)

static void noop_action(thingif_action_t *a, void *userdata)
{
    (void)a;
    (void)userdata;
}

static void noop_each(const char *vendor_thing_id, const char *thing_id, int online, void *userdata)
{
    (void)vendor_thing_id;
    (void)thing_id;
    (void)online;
    (void)userdata;
}

static json_t *noop_state(thingif_t *t, void *userdata)
{
    (void)t;
    (void)userdata;
    return NULL;
}

static void noop_log(int level, const char *message, void *userdata)
{
    (void)level;
    (void)message;
    (void)userdata;
}

int ct_api_misuse(const char *scratch_dir, char *report, size_t report_len)
{
    struct report rep = {report, report_len, 0, 0};
    if (report && report_len)
        report[0] = '\0';
    char dir1[1024], dir2[1024], ca[1024], under_file[1024];
    snprintf(dir1, sizeof dir1, "%s/misuse-1", scratch_dir);
    snprintf(dir2, sizeof dir2, "%s/misuse-2", scratch_dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", scratch_dir);
    snprintf(under_file, sizeof under_file, "%s/ca.pem/sub", scratch_dir);
    FILE *f = fopen(ca, "w");
    if (f) {
        fputs("not really a certificate\n", f);
        fclose(f);
    }

    /* Version and status texts. */
    CHECK_TRUE(strcmp(thingif_version(), THINGIF_VERSION_STRING) == 0);
    for (int s = THINGIF_OK; s <= THINGIF_ERR_UNSUPPORTED; s++) {
        const char *text = thingif_strerror(s);
        CHECK_TRUE(text != NULL && text[0] != '\0' && strcmp(text, "unknown status") != 0);
    }
    CHECK_TRUE(strcmp(thingif_strerror(-1), "unknown status") == 0);
    CHECK_TRUE(strcmp(thingif_strerror(THINGIF_ERR_UNSUPPORTED + 1), "unknown status") == 0);

    /* thingif_new */
    CHECK_TRUE(thingif_new(NULL, "key", dir1) == NULL);
    CHECK_TRUE(thingif_new("", "key", dir1) == NULL);
    thingif_t *keyless = thingif_new("app", NULL, dir1); /* no app key: a claim certificate onboards */
    CHECK_TRUE(keyless != NULL);
    CHECK_RC(thingif_destroy(keyless), THINGIF_OK);
    CHECK_TRUE(thingif_new("app", "key", NULL) == NULL);
    CHECK_TRUE(thingif_new("app", "key", "") == NULL);
    CHECK_TRUE(thingif_new("app", "key", under_file) == NULL);
    thingif_t *t = thingif_new("app", "", dir1); /* an empty key is allowed */
    CHECK_TRUE(t != NULL);
    if (!t)
        return rep.failures;

    /* Functions on a NULL handle. */
    CHECK_RC(thingif_destroy(NULL), THINGIF_OK);
    CHECK_RC(thingif_set_log_callback(NULL, noop_log, THINGIF_LOG_DEBUG, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(NULL, THINGIF_OPT_KEEPALIVE_S, 60), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_broker(NULL, "127.0.0.1", 1883), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_tls(NULL, ca, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_claim_certificate(NULL, ca, ca), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_onboard(NULL, "v", "p", NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_use_onboarded(NULL, "id", "token"), THINGIF_ERR_INVALID);
    CHECK_TRUE(thingif_thing_id(NULL) == NULL);
    CHECK_RC(thingif_is_connected(NULL), 0);
    CHECK_RC(thingif_on_action(NULL, "S", 1, "a", noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_alias_action(NULL, "A", "a", noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_any_action(NULL, noop_action, NULL), THINGIF_ERR_INVALID);
    json_t *obj = json_pack("{s:b}", "power", 1);
    json_t *arr = json_array();
    CHECK_RC(thingif_state_update(NULL, obj), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_state_patch(NULL, obj), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_state_provider(NULL, noop_state, 1000, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_firmware_version_update(NULL, "1.0"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_loop(NULL, 0), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_loop_start(NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_loop_stop(NULL), THINGIF_ERR_INVALID);
    const char *one_set[] = {"s"};
    CHECK_RC(thingif_actionset_create(NULL, "s"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_add_action(NULL, "s", "S", 1, "a", NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_remove_action(NULL, "s", 0), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_delete(NULL, "s"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_execute(NULL, "s"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(NULL, "tr", 4102444800000LL, THINGIF_RECUR_NONE, 0, "UTC", one_set, 1),
             THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_enable(NULL, "tr", 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_delete(NULL, "tr"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_clock(NULL, NULL, NULL), THINGIF_ERR_INVALID);

    /* Action getters on a NULL action. */
    CHECK_TRUE(thingif_action_name(NULL) == NULL);
    CHECK_TRUE(thingif_action_params(NULL) == NULL);
    CHECK_TRUE(thingif_action_command_id(NULL) == NULL);
    CHECK_TRUE(thingif_action_issuer(NULL) == NULL);
    CHECK_TRUE(thingif_action_schema(NULL) == NULL);
    CHECK_RC(thingif_action_schema_version(NULL), 0);
    CHECK_TRUE(thingif_action_alias(NULL) == NULL);
    CHECK_TRUE(thingif_action_title(NULL) == NULL);
    CHECK_TRUE(thingif_action_description(NULL) == NULL);
    CHECK_TRUE(thingif_action_metadata(NULL) == NULL);
    CHECK_RC(thingif_action_index(NULL), -1);
    CHECK_TRUE(thingif_action_command_expires_at(NULL) == 0);
    CHECK_TRUE(thingif_action_thing(NULL) == NULL);
    CHECK_RC(thingif_action_fail(NULL, "why"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_action_attach_data(NULL, json_object()), THINGIF_ERR_INVALID); /* stolen, also on failure */
    CHECK_RC(thingif_action_attach_data(NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_TRUE(thingif_action_defer(NULL) == NULL);
    CHECK_RC(thingif_deferred_complete(NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_deferred_complete(NULL, "why", json_object()), THINGIF_ERR_INVALID); /* stolen */
    CHECK_RC(thingif_set_layout_position(NULL, THINGIF_LAYOUT_GATEWAY), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_end_node_callback(NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_add(NULL, "v", "p", NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_TRUE(thingif_end_node_thing_id(NULL, "v") == NULL);
    CHECK_RC(thingif_end_node_set_online(NULL, "v", 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_remove(NULL, "v"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_state_update(NULL, "v", obj), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_state_patch(NULL, "v", obj), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_firmware_version_update(NULL, "v", "1.0"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_foreach(NULL, noop_each, NULL), THINGIF_ERR_INVALID);
    CHECK_TRUE(thingif_action_end_node(NULL) == NULL);
    CHECK_TRUE(thingif_action_thing_id(NULL) == NULL);

    /* Log callback levels. */
    CHECK_RC(thingif_set_log_callback(t, noop_log, -1, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_log_callback(t, noop_log, THINGIF_LOG_DEBUG + 1, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_log_callback(t, noop_log, THINGIF_LOG_ERROR, NULL), THINGIF_OK);
    CHECK_RC(thingif_set_log_callback(t, NULL, 0, NULL), THINGIF_OK);
    CHECK_RC(thingif_set_log_callback(t, noop_log, THINGIF_LOG_DEBUG, NULL), THINGIF_OK);

    /* Options: unknown, and each range's edges. */
    CHECK_RC(thingif_set_option(t, 0, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, 999, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_MAX_PAYLOAD, 255), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_MAX_PAYLOAD, 16777217), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_MAX_PAYLOAD, 256), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_MAX_PAYLOAD, 16777216), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_KEEPALIVE_S, 4), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_KEEPALIVE_S, 65536), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_KEEPALIVE_S, 5), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_REQUEST_TIMEOUT_MS, 99), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_REQUEST_TIMEOUT_MS, 600001), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_REQUEST_TIMEOUT_MS, 100), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_RECONNECT_MIN_MS, 9), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_RECONNECT_MIN_MS, 10), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_RECONNECT_MAX_MS, 3600001), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_RECONNECT_MAX_MS, 3600000), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_OUTBOX_MAX, 7), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_OUTBOX_MAX, 100001), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_OUTBOX_MAX, 8), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_INBOX_MAX, 0), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_INBOX_MAX, 100001), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_INBOX_MAX, 1), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_INBOX_MAX, 100000), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_OUTBOX_MAX, 100000), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_LEDGER_SIZE, 15), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_LEDGER_SIZE, 1000001), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_LEDGER_SIZE, 16), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_LEDGER_SIZE, 1000000), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_DURABILITY, 2), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_DURABILITY, -1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_DURABILITY, THINGIF_DURABILITY_NONE), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_DURABILITY, THINGIF_DURABILITY_SYNC), THINGIF_OK);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_MAX_PAYLOAD, -1), THINGIF_ERR_INVALID);

    /* Broker and TLS. */
    CHECK_RC(thingif_set_broker(t, NULL, 1883), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_broker(t, "", 1883), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_broker(t, "127.0.0.1", 0), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_broker(t, "127.0.0.1", 65536), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_broker(t, "127.0.0.1", 1883), THINGIF_OK);
    CHECK_RC(thingif_set_tls(t, NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_tls(t, ca, ca, NULL), THINGIF_ERR_TLS); /* a certificate without its key */
    CHECK_RC(thingif_set_tls(t, ca, NULL, ca), THINGIF_ERR_TLS);
    CHECK_RC(thingif_set_tls(t, "/nonexistent/thingif/ca.pem", NULL, NULL), THINGIF_ERR_TLS);
    CHECK_RC(thingif_set_tls(t, ca, "/nonexistent/thingif/cert.pem", "/nonexistent/thingif/key.pem"), THINGIF_ERR_TLS);
    CHECK_RC(thingif_set_claim_certificate(t, ca, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_claim_certificate(t, NULL, ca), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_claim_certificate(t, "", ""), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_claim_certificate(t, ca, ca), THINGIF_ERR_TLS); /* no claim certificate */
    CHECK_RC(thingif_set_claim_certificate(t, "/nonexistent/thingif/claim.crt", ca), THINGIF_ERR_TLS);
    CHECK_RC(thingif_set_claim_certificate(t, NULL, NULL), THINGIF_OK);

    /* Onboarding arguments (checked before any network use). */
    CHECK_RC(thingif_onboard(t, NULL, "p", NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_onboard(t, "", "p", NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_onboard(t, "v", NULL, NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_onboard(t, "v", "", NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_onboard(t, "v", "p", NULL, NULL, "{not json"), THINGIF_ERR_JSON);
    CHECK_RC(thingif_onboard(t, "v", "p", NULL, NULL, "[1,2]"), THINGIF_ERR_JSON);
    CHECK_RC(thingif_onboard(t, "v", "p", NULL, NULL, "\"text\""), THINGIF_ERR_JSON);
    CHECK_RC(thingif_use_onboarded(t, NULL, "token"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_use_onboarded(t, "", "token"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_use_onboarded(t, "id", NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_use_onboarded(t, "id", ""), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_use_onboarded(t, "a/b", "token"), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_use_onboarded(t, "a+b", "token"), THINGIF_ERR_INVALID);
    CHECK_TRUE(thingif_thing_id(t) == NULL);
    CHECK_RC(thingif_is_connected(t), 0);

    /* Handler registration. */
    CHECK_RC(thingif_on_action(t, "S", -1, "a", noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_action(t, "", 0, "a", noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_action(t, "S", 0, NULL, noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_action(t, "S", 0, "", noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_action(t, "S", 1, "a", noop_action, NULL), THINGIF_OK);
    CHECK_RC(thingif_on_action(t, NULL, 0, "a", noop_action, NULL), THINGIF_OK);
    CHECK_RC(thingif_on_action(t, "S", 1, "a", NULL, NULL), THINGIF_OK);
    CHECK_RC(thingif_on_alias_action(t, NULL, "a", noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_alias_action(t, "", "a", noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_alias_action(t, "A", NULL, noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_alias_action(t, "A", "", noop_action, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_on_alias_action(t, "A", "a", noop_action, NULL), THINGIF_OK);
    CHECK_RC(thingif_on_any_action(t, noop_action, NULL), THINGIF_OK);
    CHECK_RC(thingif_on_any_action(t, NULL, NULL), THINGIF_OK);

    /* State before onboarding. */
    CHECK_RC(thingif_state_update(t, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_state_update(t, arr), THINGIF_ERR_JSON);
    CHECK_RC(thingif_state_update(t, obj), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_RC(thingif_state_patch(t, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_state_patch(t, arr), THINGIF_ERR_JSON);
    CHECK_RC(thingif_state_patch(t, obj), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_RC(thingif_firmware_version_update(t, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_firmware_version_update(t, ""), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_firmware_version_update(t, "1.0"), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_RC(thingif_set_state_provider(t, noop_state, 99, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_state_provider(t, noop_state, 86400001, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_state_provider(t, noop_state, 100, NULL), THINGIF_OK);
    CHECK_RC(thingif_set_state_provider(t, NULL, 0, NULL), THINGIF_OK);
    CHECK_TRUE(obj->refcount == 1); /* borrowed only: the caller's reference is intact */
    json_decref(obj);
    json_decref(arr);

    /* Action sets and timers (they work before onboarding; execute does not). */
    char long_name[70];
    memset(long_name, 'n', 65);
    long_name[65] = '\0';
    CHECK_RC(thingif_actionset_create(t, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_create(t, ""), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_create(t, long_name), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_create(t, "s"), THINGIF_OK);
    CHECK_RC(thingif_actionset_create(t, "s"), THINGIF_ERR_EXISTS);
    CHECK_RC(thingif_actionset_add_action(t, "nope", "S", 1, "a", NULL), THINGIF_ERR_NOT_FOUND);
    CHECK_RC(thingif_actionset_add_action(t, "s", NULL, 1, "a", NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_add_action(t, "s", "S", -1, "a", NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_add_action(t, "s", "S", 1, "", NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_add_action(t, "s", "S", 1, "a", NULL), THINGIF_OK);
    json_t *p = json_pack("{s:i}", "x", 1);
    CHECK_RC(thingif_actionset_add_action(t, "s", "S", 1, "b", p), THINGIF_OK);
    CHECK_TRUE(p->refcount == 1); /* borrowed only */
    json_decref(p);
    CHECK_RC(thingif_actionset_remove_action(t, "s", 2), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_remove_action(t, "s", -1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_remove_action(t, "nope", 0), THINGIF_ERR_NOT_FOUND);
    CHECK_RC(thingif_actionset_remove_action(t, "s", 1), THINGIF_OK);
    CHECK_RC(thingif_actionset_execute(t, "nope"), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_RC(thingif_actionset_execute(t, "s"), THINGIF_ERR_NOT_ONBOARDED);
    const char *no_set[] = {"nope"};
    const char *null_set[] = {NULL};
    long long future = 4102444800000LL; /* 2100-01-01 */
    CHECK_RC(thingif_timer_create(t, NULL, future, THINGIF_RECUR_NONE, 0, "UTC", one_set, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_NONE, 0, NULL, one_set, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_NONE, 0, "UTC", NULL, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_NONE, 0, "UTC", null_set, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_NONE, 0, "UTC", one_set, 0), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_NONE, 0, "UTC", no_set, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, 9, 1, "UTC", one_set, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_MINUTE, 4, "UTC", one_set, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_WEEK, 6, "UTC", one_set, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_NONE, 0, "Nowhere/City", one_set, 1),
             THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_NONE, 0, "../../etc/passwd", one_set, 1),
             THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", 1000, THINGIF_RECUR_NONE, 0, "UTC", one_set, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_WEEK, 5, "UTC", one_set, 1), THINGIF_OK);
    CHECK_RC(thingif_timer_create(t, "tr", future, THINGIF_RECUR_MINUTE, 5, "UTC", one_set, 1), THINGIF_ERR_EXISTS);
    CHECK_RC(thingif_timer_enable(t, NULL, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_enable(t, "tr", 2), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_enable(t, "nope", 1), THINGIF_ERR_NOT_FOUND);
    CHECK_RC(thingif_timer_enable(t, "tr", 1), THINGIF_OK);
    CHECK_RC(thingif_actionset_delete(t, "s"), THINGIF_ERR_STATE); /* the trigger uses it */
    CHECK_RC(thingif_timer_delete(t, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_timer_delete(t, "nope"), THINGIF_ERR_NOT_FOUND);
    CHECK_RC(thingif_timer_delete(t, "tr"), THINGIF_OK);
    CHECK_RC(thingif_actionset_delete(t, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_actionset_delete(t, "nope"), THINGIF_ERR_NOT_FOUND);
    CHECK_RC(thingif_actionset_delete(t, "s"), THINGIF_OK);
    CHECK_RC(thingif_set_clock(t, NULL, NULL), THINGIF_OK);

    /* Gateways: a handle that is not onboarded, then not a gateway. */
    CHECK_RC(thingif_set_layout_position(t, 2), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_layout_position(t, -1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_MAX_END_NODES, 0), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_MAX_END_NODES, 100001), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_set_option(t, THINGIF_OPT_MAX_END_NODES, 10), THINGIF_OK);
    CHECK_RC(thingif_end_node_add(t, "v", "p", NULL, NULL, NULL), THINGIF_ERR_STATE); /* not a gateway */
    CHECK_RC(thingif_end_node_set_online(t, "v", 1), THINGIF_ERR_STATE);
    CHECK_RC(thingif_end_node_remove(t, "v"), THINGIF_ERR_STATE);
    CHECK_RC(thingif_end_node_firmware_version_update(t, "v", "1.0"), THINGIF_ERR_STATE);
    CHECK_TRUE(thingif_end_node_thing_id(t, "v") == NULL);
    CHECK_RC(thingif_set_layout_position(t, THINGIF_LAYOUT_GATEWAY), THINGIF_OK);
    CHECK_RC(thingif_end_node_add(t, NULL, "p", NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_add(t, "", "p", NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_add(t, "v", NULL, NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_add(t, "\xff\xfe", "p", NULL, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_add(t, "v", "p", "\xff", NULL, NULL), THINGIF_ERR_INVALID);
    {
        char long_id[202];
        memset(long_id, 'x', 201);
        long_id[201] = '\0';
        CHECK_RC(thingif_end_node_add(t, long_id, "p", NULL, NULL, NULL), THINGIF_ERR_INVALID);
    }
    CHECK_RC(thingif_end_node_add(t, "v", "p", NULL, NULL, "[1]"), THINGIF_ERR_JSON);
    CHECK_RC(thingif_end_node_add(t, "v", "p", NULL, NULL, "{"), THINGIF_ERR_JSON);
    CHECK_RC(thingif_end_node_add(t, "v", "p", NULL, NULL, NULL), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_TRUE(thingif_end_node_thing_id(t, NULL) == NULL);
    CHECK_TRUE(thingif_end_node_thing_id(t, "v") == NULL);
    CHECK_RC(thingif_end_node_set_online(t, NULL, 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_set_online(t, "v", 1), THINGIF_ERR_NOT_FOUND);
    CHECK_RC(thingif_end_node_remove(t, ""), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_remove(t, "v"), THINGIF_ERR_NOT_ONBOARDED);
    json_t *en_obj = json_object(), *en_arr = json_array();
    CHECK_RC(thingif_end_node_state_update(t, NULL, en_obj), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_state_update(t, "v", NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_state_update(t, "v", en_arr), THINGIF_ERR_JSON);
    CHECK_RC(thingif_end_node_state_update(t, "v", en_obj), THINGIF_ERR_NOT_FOUND);
    CHECK_RC(thingif_end_node_state_patch(t, "v", en_obj), THINGIF_ERR_NOT_FOUND);
    json_decref(en_obj);
    json_decref(en_arr);
    CHECK_RC(thingif_end_node_firmware_version_update(t, "v", ""), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_firmware_version_update(t, "v", "1.0"), THINGIF_ERR_NOT_FOUND);
    CHECK_RC(thingif_end_node_foreach(t, NULL, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_end_node_foreach(t, noop_each, NULL), THINGIF_OK);
    CHECK_RC(thingif_set_end_node_callback(t, NULL, NULL), THINGIF_OK);
    CHECK_RC(thingif_set_layout_position(t, THINGIF_LAYOUT_STANDALONE), THINGIF_OK);

    /* The names of 0.2.0 are the same functions (thingif.h, "Old names"). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    json_t *old_obj = json_object();
    CHECK_RC(thingif_update_state(t, NULL), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_update_state(t, old_obj), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_RC(thingif_patch_state(t, old_obj), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_RC(thingif_update_firmware_version(t, ""), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_update_firmware_version(t, "1.0"), THINGIF_ERR_NOT_ONBOARDED);
    json_decref(old_obj);
    CHECK_RC(thingif_action_set_create(t, "old"), THINGIF_OK);
    CHECK_RC(thingif_actionset_create(t, "old"), THINGIF_ERR_EXISTS);
    CHECK_RC(thingif_action_set_add_action(t, "old", "S", 1, "a", NULL), THINGIF_OK);
    CHECK_RC(thingif_action_set_remove_action(t, "old", 1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_action_set_remove_action(t, "old", 0), THINGIF_OK);
    CHECK_RC(thingif_action_set_execute(t, "old"), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_RC(thingif_action_set_delete(t, "old"), THINGIF_OK);
    CHECK_RC(thingif_actionset_delete(t, "old"), THINGIF_ERR_NOT_FOUND);
#pragma GCC diagnostic pop

    /* The loop before onboarding. */
    CHECK_RC(thingif_loop(t, -1), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_loop(t, 60001), THINGIF_ERR_INVALID);
    CHECK_RC(thingif_loop(t, 0), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_RC(thingif_loop_start(t), THINGIF_ERR_NOT_ONBOARDED);
    CHECK_RC(thingif_loop_stop(t), THINGIF_ERR_STATE);

    CHECK_RC(thingif_destroy(t), THINGIF_OK);

    /* A second handle: a readable CA file is accepted (read only at connect). */
    thingif_t *t2 = thingif_new("app", "key", dir2);
    CHECK_TRUE(t2 != NULL);
    if (t2) {
        CHECK_RC(thingif_set_tls(t2, ca, NULL, NULL), THINGIF_OK);
        CHECK_RC(thingif_set_tls(t2, ca, ca, ca), THINGIF_OK);
        CHECK_RC(thingif_destroy(t2), THINGIF_OK);
    }
    return rep.failures;
}
