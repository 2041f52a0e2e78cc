/* SPDX-License-Identifier: Apache-2.0 */

/*
 * lamps.c - a gateway on libthingif: a bridge for lamps on a radio.
 *
 * The lamps cannot reach the framework themselves. The gateway is one
 * thingif_t (one connection, one identity, one journal) that onboards each
 * lamp as an end node, runs the lamps' commands and reports their results and
 * states. Every lamp is a thing of its own at the framework: its own
 * thingID, owners, state and commands. The lamps take the schema "Lamp-Demo"
 * version 1:
 *
 *   turnPower       {"power": true|false}
 *   setBrightness   {"brightness": 0..100}
 *
 *   state: {"power", "brightness"}
 *
 * The radio is simulated: a thread that answers each request after a delay.
 * A handler only checks its parameters and hands the action to the radio
 * (thingif_action_defer()); the radio thread completes it later
 * (thingif_deferred_complete()) and uploads that lamp's new state. So the
 * library's loop never waits for a lamp.
 *
 * The shape to copy into gateway firmware:
 *   1. thingif_new() + thingif_set_broker() + thingif_set_layout_position(
 *      THINGIF_LAYOUT_GATEWAY) + thingif_set_end_node_callback()
 *   2. thingif_on_action() once per action: the handlers serve every end node,
 *      and thingif_action_end_node() says which one an action is for
 *   3. thingif_onboard() (the gateway itself)
 *   4. thingif_end_node_add() for every device found on the radio (a no-op
 *      for one registered already: THINGIF_ERR_EXISTS), and
 *      thingif_end_node_set_online() as devices come and go
 *   5. the loop; the end-node callback says when a lamp has its thingID
 *      (THINGIF_END_NODE_ADDED), or when an owner added or removed one
 *   6. thingif_destroy() on the way out, after the radio stopped.
 *
 * Console (lines on stdin; a lamp is its number or its vendorThingID):
 *   unplug N    the lamp leaves the radio: it is marked offline, and the
 *               framework holds its commands until it is back
 *   plug N      it is back: online, and the held commands come
 *   remove N    removes the lamp from the gateway (and from the framework)
 *   list        prints every lamp
 *
 * Build: cmake -G Ninja -S . -B build && cmake --build build
 * Run:   build/lamps --help
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <thingif.h>

#define SCHEMA "Lamp-Demo"
#define SCHEMA_VERSION 1
#define LAMPS_MAX 1000   /* --lamps */
#define EXTRA_LAMPS 16   /* room for lamps an owner adds through the framework */
#define VENDOR_ID_MAX 64 /* the longest vendorThingID this gateway keeps */

/* A lamp on the radio. Guarded by gateway.lock: handlers and the end-node
 * callback run on the loop thread, the radio on its own. */
struct lamp {
    char vendor_thing_id[VENDOR_ID_MAX + 1]; /* "" for a free slot */
    int plugged;                             /* the radio reaches it */
    int power;                               /* 0 off, 1 on */
    int brightness;                          /* 0 .. 100 percent */
};

enum lamp_action { TURN_POWER, SET_BRIGHTNESS };

/* A request for the radio: one deferred action. */
struct radio_job {
    thingif_deferred_t *deferred;
    char vendor_thing_id[VENDOR_ID_MAX + 1];
    enum lamp_action action;
    int value;
    struct radio_job *next;
};

struct gateway {
    thingif_t *t;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct lamp *lamps;
    int capacity;
    struct radio_job *head, *tail; /* the radio's queue, oldest first */
    int radio_delay_ms;
    const char *lamp_prefix; /* the lamps' vendorThingIDs: prefix + 4 digits */
    int stopping;
};

struct options {
    const char *host;
    int port;
    const char *app_id;
    const char *app_key;
    const char *vendor_thing_id;
    const char *password;
    const char *storage;
    const char *cafile;
    const char *certfile;
    const char *keyfile;
    int lamps;
    const char *lamp_prefix;
    const char *lamp_password;
    int radio_delay_ms;
    int verbose;
};

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* One line on stdout per event, flushed so that a pipe sees it at once. */
static void say(const char *fmt, ...)
{
    va_list ap;

    flockfile(stdout);
    fputs("lamps: ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
    funlockfile(stdout);
}

/* ---- the lamps (call with gateway.lock held) ---- */

static struct lamp *find_lamp(struct gateway *gw, const char *vendor_thing_id)
{
    size_t prefix;
    char *end;
    long n;
    int i;

    if (vendor_thing_id == NULL)
        return NULL;
    /* A lamp the radio found (prefix + its number) usually sits in the slot
     * of its number: no search per action, however many lamps there are. */
    prefix = strlen(gw->lamp_prefix);
    if (strncmp(vendor_thing_id, gw->lamp_prefix, prefix) == 0) {
        n = strtol(vendor_thing_id + prefix, &end, 10);
        if (end != vendor_thing_id + prefix && *end == '\0' && n >= 0 && n < gw->capacity &&
            strcmp(gw->lamps[n].vendor_thing_id, vendor_thing_id) == 0)
            return &gw->lamps[n];
    }
    for (i = 0; i < gw->capacity; i++)
        if (strcmp(gw->lamps[i].vendor_thing_id, vendor_thing_id) == 0)
            return &gw->lamps[i];
    return NULL;
}

/* The lamp of that vendorThingID, or a free slot for it (off, 50 %, on the
 * radio); NULL when the name is too long or every slot is taken. */
static struct lamp *take_lamp(struct gateway *gw, const char *vendor_thing_id)
{
    struct lamp *lamp = find_lamp(gw, vendor_thing_id);
    int i;

    if (lamp != NULL || strlen(vendor_thing_id) > VENDOR_ID_MAX)
        return lamp;
    for (i = 0; i < gw->capacity; i++) {
        lamp = &gw->lamps[i];
        if (lamp->vendor_thing_id[0] == '\0') {
            strcpy(lamp->vendor_thing_id, vendor_thing_id);
            lamp->plugged = 1;
            lamp->power = 0;
            lamp->brightness = 50;
            return lamp;
        }
    }
    return NULL;
}

/* A lamp named on the console: its number (LAMP-0002 is 2) or its vendorThingID. */
static struct lamp *console_lamp(struct gateway *gw, const char *name)
{
    char vendor_thing_id[VENDOR_ID_MAX + 1];
    char *end;
    long n;

    errno = 0;
    n = strtol(name, &end, 10);
    if (errno == 0 && end != name && *end == '\0' && n >= 0 && n < LAMPS_MAX) {
        snprintf(vendor_thing_id, sizeof vendor_thing_id, "%s%04ld", gw->lamp_prefix, n);
        return find_lamp(gw, vendor_thing_id);
    }
    return find_lamp(gw, name);
}

/* The lamp's state, for an upload. */
static json_t *lamp_state(const struct lamp *lamp)
{
    return json_pack("{s:b, s:i}", "power", lamp->power, "brightness", lamp->brightness);
}

/* Uploads a lamp's whole state (a copy taken under the lock, sent outside it). */
static void upload_lamp(struct gateway *gw, const char *vendor_thing_id)
{
    struct lamp *lamp;
    json_t *state = NULL;
    int rc;

    pthread_mutex_lock(&gw->lock);
    lamp = find_lamp(gw, vendor_thing_id);
    if (lamp != NULL)
        state = lamp_state(lamp);
    pthread_mutex_unlock(&gw->lock);
    if (state == NULL)
        return;
    rc = thingif_end_node_state_update(gw->t, vendor_thing_id, state); /* borrows state */
    json_decref(state);
    if (rc != THINGIF_OK)
        say("%s: state upload failed: %s", vendor_thing_id, thingif_strerror(rc));
}

/* ---- the radio: a thread that answers after a delay ---- */

static void sleep_ms(int ms)
{
    struct timespec pause = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

    while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
        ;
}

/* Takes one request, "sends" it to its lamp and completes the action: the
 * command's results go out once its last action completes. Then the lamp's
 * new state goes up as a patch of what changed. */
static void radio_serve(struct gateway *gw, struct radio_job *job)
{
    struct lamp *lamp;
    json_t *patch = NULL;
    char error[160] = "";
    int rc;

    if (gw->radio_delay_ms > 0)
        sleep_ms(gw->radio_delay_ms);
    pthread_mutex_lock(&gw->lock);
    lamp = find_lamp(gw, job->vendor_thing_id);
    if (lamp == NULL || !lamp->plugged) {
        snprintf(error, sizeof error, "%s does not answer on the radio", job->vendor_thing_id);
    } else if (job->action == TURN_POWER) {
        lamp->power = job->value;
        patch = json_pack("{s:b}", "power", lamp->power);
    } else {
        lamp->brightness = job->value;
        patch = json_pack("{s:i}", "brightness", lamp->brightness);
    }
    pthread_mutex_unlock(&gw->lock);

    rc = thingif_deferred_complete(job->deferred, error[0] != '\0' ? error : NULL, NULL);
    if (rc != THINGIF_OK)
        say("%s: the result could not be recorded: %s", job->vendor_thing_id, thingif_strerror(rc));
    if (error[0] != '\0') {
        say("%s: %s", job->vendor_thing_id, error);
    } else if (patch != NULL) {
        rc = thingif_end_node_state_patch(gw->t, job->vendor_thing_id, patch); /* borrows patch */
        if (rc != THINGIF_OK)
            say("%s: state upload failed: %s", job->vendor_thing_id, thingif_strerror(rc));
        else if (job->action == TURN_POWER)
            say("%s: power %s", job->vendor_thing_id, job->value ? "on" : "off");
        else
            say("%s: brightness %d", job->vendor_thing_id, job->value);
    }
    json_decref(patch);
    free(job);
}

static void *radio_thread(void *arg)
{
    struct gateway *gw = arg;

    pthread_mutex_lock(&gw->lock);
    for (;;) {
        struct radio_job *job;

        while (gw->head == NULL && !gw->stopping)
            pthread_cond_wait(&gw->wake, &gw->lock);
        if (gw->head == NULL)
            break; /* stopping, and nothing left to answer */
        job = gw->head;
        gw->head = job->next;
        if (gw->head == NULL)
            gw->tail = NULL;
        pthread_mutex_unlock(&gw->lock);
        radio_serve(gw, job);
        pthread_mutex_lock(&gw->lock);
    }
    pthread_mutex_unlock(&gw->lock);
    return NULL;
}

/* ---- action handlers: on the loop thread, for every lamp ---- */

static void refuse(thingif_action_t *action, const char *message)
{
    const char *lamp = thingif_action_end_node(action);

    if (thingif_action_fail(action, message) != THINGIF_OK)
        say("%s: the failure could not be recorded", thingif_action_name(action));
    say("%s %s refused: %s", lamp != NULL ? lamp : "gateway", thingif_action_name(action), message);
}

/* Hands the action to the radio. The handler returns at once; the radio
 * thread completes the action. */
static void to_radio(thingif_action_t *action, struct gateway *gw, enum lamp_action what, int value)
{
    const char *vendor_thing_id = thingif_action_end_node(action);
    struct radio_job *job;
    int known;

    if (vendor_thing_id == NULL) {
        refuse(action, "the gateway has no lamp of its own: send Lamp-Demo commands to a lamp's thingID");
        return;
    }
    pthread_mutex_lock(&gw->lock);
    known = find_lamp(gw, vendor_thing_id) != NULL;
    pthread_mutex_unlock(&gw->lock);
    if (!known) {
        refuse(action, "no such lamp on this gateway's radio");
        return;
    }
    job = calloc(1, sizeof *job);
    if (job == NULL) {
        refuse(action, "out of memory");
        return;
    }
    snprintf(job->vendor_thing_id, sizeof job->vendor_thing_id, "%s", vendor_thing_id);
    job->action = what;
    job->value = value;
    job->deferred = thingif_action_defer(action); /* ours until thingif_deferred_complete() */
    if (job->deferred == NULL) {
        free(job);
        refuse(action, "out of memory");
        return;
    }
    pthread_mutex_lock(&gw->lock);
    if (gw->tail != NULL)
        gw->tail->next = job;
    else
        gw->head = job;
    gw->tail = job;
    pthread_cond_signal(&gw->wake);
    pthread_mutex_unlock(&gw->lock);
}

static void on_turn_power(thingif_action_t *action, void *userdata)
{
    json_t *params = thingif_action_params(action);
    json_error_t error;
    int power;

    if (json_unpack_ex(params, &error, 0, "{s:b}", "power", &power) != 0) {
        if (json_is_object(params) && json_object_get(params, "power") != NULL)
            refuse(action, "power must be true or false");
        else
            refuse(action, "power is missing (true or false)");
        return;
    }
    to_radio(action, userdata, TURN_POWER, power ? 1 : 0);
}

static void on_set_brightness(thingif_action_t *action, void *userdata)
{
    json_t *params = thingif_action_params(action);
    json_error_t error;
    json_int_t brightness;

    if (json_unpack_ex(params, &error, 0, "{s:I}", "brightness", &brightness) != 0) {
        if (json_is_object(params) && json_object_get(params, "brightness") != NULL)
            refuse(action, "brightness must be an integer");
        else
            refuse(action, "brightness is missing (an integer 0..100)");
        return;
    }
    if (brightness < 0 || brightness > 100) {
        refuse(action, "brightness is out of range 0..100");
        return;
    }
    to_radio(action, userdata, SET_BRIGHTNESS, (int)brightness);
}

/* ---- membership: the end-node callback, on the loop thread ---- */

static void on_end_node(thingif_t *t, int event, const char *vendor_thing_id, const char *thing_id, const char *detail,
                        void *userdata)
{
    struct gateway *gw = userdata;
    struct lamp *lamp;
    int plugged = 0;

    switch (event) {
    case THINGIF_END_NODE_ADDED:
    case THINGIF_END_NODE_CHANGED:
        /* Ours (it has its thingID now), or one an owner added through the
         * framework: the radio finds it. */
        pthread_mutex_lock(&gw->lock);
        lamp = take_lamp(gw, vendor_thing_id);
        if (lamp != NULL)
            plugged = lamp->plugged;
        pthread_mutex_unlock(&gw->lock);
        say("%s %s as %s", vendor_thing_id, event == THINGIF_END_NODE_ADDED ? "added" : "changed", thing_id);
        if (lamp == NULL) {
            say("%s: no room for it on this gateway", vendor_thing_id);
            return;
        }
        if (thingif_end_node_set_online(t, vendor_thing_id, plugged) != THINGIF_OK)
            say("%s: its status could not be set", vendor_thing_id);
        upload_lamp(gw, vendor_thing_id);
        break;
    case THINGIF_END_NODE_REFUSED:
    case THINGIF_END_NODE_REMOVED:
        pthread_mutex_lock(&gw->lock);
        lamp = find_lamp(gw, vendor_thing_id);
        if (lamp != NULL)
            lamp->vendor_thing_id[0] = '\0';
        pthread_mutex_unlock(&gw->lock);
        if (event == THINGIF_END_NODE_REFUSED)
            say("%s refused: %s", vendor_thing_id, detail != NULL ? detail : "");
        else
            say("%s removed (was %s)", vendor_thing_id, thing_id != NULL ? thing_id : "not onboarded");
        break;
    }
}

/* ---- the console ---- */

static void print_lamp(const char *vendor_thing_id, const char *thing_id, int online, void *userdata)
{
    (void)userdata;
    say("  %s  %s  %s", vendor_thing_id, thing_id != NULL ? thing_id : "(onboarding)", online ? "online" : "offline");
}

/* Runs one console line. */
static void console(struct gateway *gw, char *line)
{
    char *verb = strtok(line, " \t\r\n");
    char *name = strtok(NULL, " \t\r\n");
    struct lamp *lamp = NULL;
    char vendor_thing_id[VENDOR_ID_MAX + 1] = "";
    int rc;

    if (verb == NULL)
        return;
    if (strcmp(verb, "list") == 0) {
        if (thingif_end_node_foreach(gw->t, print_lamp, NULL) != THINGIF_OK)
            say("list failed");
        return;
    }
    if (strcmp(verb, "plug") != 0 && strcmp(verb, "unplug") != 0 && strcmp(verb, "remove") != 0) {
        say("commands: plug N, unplug N, remove N, list (N: a lamp's number or vendorThingID)");
        return;
    }
    pthread_mutex_lock(&gw->lock);
    if (name != NULL)
        lamp = console_lamp(gw, name);
    if (lamp != NULL) {
        strcpy(vendor_thing_id, lamp->vendor_thing_id);
        if (strcmp(verb, "remove") != 0)
            lamp->plugged = strcmp(verb, "plug") == 0;
    }
    pthread_mutex_unlock(&gw->lock);
    if (lamp == NULL) {
        say("%s: no such lamp: %s", verb, name != NULL ? name : "(none given)");
        return;
    }
    if (strcmp(verb, "remove") == 0)
        rc = thingif_end_node_remove(gw->t, vendor_thing_id);
    else
        rc = thingif_end_node_set_online(gw->t, vendor_thing_id, strcmp(verb, "plug") == 0);
    say("%s %s: %s", verb, vendor_thing_id, thingif_strerror(rc));
}

/* Reads what stdin has now, without waiting, and runs each whole line.
 * Returns 0 once stdin is closed (no more console). */
static int poll_console(struct gateway *gw)
{
    static char line[256];
    static size_t used;
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    ssize_t n;
    char *nl;

    if (poll(&p, 1, 0) <= 0)
        return 1;
    n = read(STDIN_FILENO, line + used, sizeof line - 1 - used);
    if (n <= 0)
        return n < 0 && errno == EINTR;
    used += (size_t)n;
    line[used] = '\0';
    while ((nl = strchr(line, '\n')) != NULL) {
        size_t rest;

        *nl = '\0';
        console(gw, line);
        rest = used - (size_t)(nl + 1 - line);
        memmove(line, nl + 1, rest + 1);
        used = rest;
    }
    if (used == sizeof line - 1) {
        say("console: a line longer than %zu bytes was dropped", sizeof line - 2);
        used = 0;
    }
    return 1;
}

/* ---- start-up ---- */

static void on_log(int level, const char *message, void *userdata)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    (void)userdata;
    fprintf(stderr, "lamps: thingif %s: %s\n", level >= 0 && level <= THINGIF_LOG_DEBUG ? names[level] : "?", message);
}

/* Onboards the gateway, tried again while the network is not there yet (as
 * aircon.c does, with a pause that doubles up to a minute). */
static int onboard(thingif_t *t, const struct options *o)
{
    unsigned pause_s = 1;

    for (;;) {
        unsigned tick;
        int rc = thingif_onboard(t, o->vendor_thing_id, o->password, "LampGateway", "1.0.0", NULL);

        if ((rc != THINGIF_ERR_CONNECT && rc != THINGIF_ERR_TIMEOUT) || stop_requested)
            return rc;
        say("onboarding: %s; trying again in %u s", thingif_strerror(rc), pause_s);
        for (tick = 0; tick < pause_s * 5 && !stop_requested; tick++)
            sleep_ms(200);
        pause_s = pause_s >= 30 ? 60 : pause_s * 2;
    }
}

/* Puts every lamp the gateway knows from earlier runs (its registry in the
 * storage folder, owner-added ones included) on the radio. */
static void known_lamp(const char *vendor_thing_id, const char *thing_id, int online, void *userdata)
{
    struct gateway *gw = userdata;

    (void)thing_id;
    (void)online;
    pthread_mutex_lock(&gw->lock);
    (void)take_lamp(gw, vendor_thing_id);
    pthread_mutex_unlock(&gw->lock);
}

/* Registers the lamps found on the radio: LAMP-0000 .. (--lamp-prefix). One the
 * gateway registered in an earlier run answers THINGIF_ERR_EXISTS: kept. */
static int add_lamps(struct gateway *gw, const struct options *o)
{
    int i;

    if (thingif_end_node_foreach(gw->t, known_lamp, gw) != THINGIF_OK)
        return THINGIF_ERR_INVALID;
    for (i = 0; i < o->lamps; i++) {
        char vendor_thing_id[VENDOR_ID_MAX + 1];
        int rc;

        snprintf(vendor_thing_id, sizeof vendor_thing_id, "%s%04d", o->lamp_prefix, i);
        pthread_mutex_lock(&gw->lock);
        rc = take_lamp(gw, vendor_thing_id) != NULL;
        pthread_mutex_unlock(&gw->lock);
        if (!rc)
            return THINGIF_ERR_TOO_MANY;
        rc = thingif_end_node_add(gw->t, vendor_thing_id, o->lamp_password, "Lamp", "1.0.0", NULL);
        if (rc == THINGIF_ERR_EXISTS) {
            const char *thing_id = thingif_end_node_thing_id(gw->t, vendor_thing_id);

            say("%s known as %s", vendor_thing_id, thing_id != NULL ? thing_id : "(onboarding)");
        } else if (rc != THINGIF_OK) {
            fprintf(stderr, "lamps: %s could not be added: %s\n", vendor_thing_id, thingif_strerror(rc));
            return rc;
        }
    }
    /* The radio reaches every lamp now. A lamp waiting for its thingID gets
     * its status once it is ADDED. */
    for (i = 0; i < gw->capacity; i++) {
        char vendor_thing_id[VENDOR_ID_MAX + 1];

        pthread_mutex_lock(&gw->lock);
        strcpy(vendor_thing_id, gw->lamps[i].vendor_thing_id);
        pthread_mutex_unlock(&gw->lock);
        if (vendor_thing_id[0] != '\0' && thingif_end_node_set_online(gw->t, vendor_thing_id, 1) != THINGIF_OK)
            say("%s: its status could not be set", vendor_thing_id);
    }
    return THINGIF_OK;
}

/* Uploads the state of every lamp that has its thingID (on the first
 * connection of a run: the lamps start off, at 50 %). */
static void upload_all(struct gateway *gw)
{
    int i;

    for (i = 0; i < gw->capacity; i++) {
        char vendor_thing_id[VENDOR_ID_MAX + 1];

        pthread_mutex_lock(&gw->lock);
        strcpy(vendor_thing_id, gw->lamps[i].vendor_thing_id);
        pthread_mutex_unlock(&gw->lock);
        if (vendor_thing_id[0] != '\0' && thingif_end_node_thing_id(gw->t, vendor_thing_id) != NULL)
            upload_lamp(gw, vendor_thing_id);
    }
}

/* ---- command line ---- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: lamps [options]\n"
            "A gateway for simulated lamps (schema Lamp-Demo: turnPower, setBrightness):\n"
            "one connection to the framework for all of them. Console on stdin:\n"
            "plug N, unplug N, remove N, list.\n"
            "\n"
            "  --host H                broker host (default 127.0.0.1)\n"
            "  --port P                broker port (default 1883)\n"
            "  --cafile FILE           use TLS, verifying the broker with this CA\n"
            "  --certfile FILE --keyfile FILE\n"
            "                          mutual TLS: present this certificate and key\n"
            "  --app-id ID             application ID (default demoApp)\n"
            "  --app-key KEY           application key (default demoKey)\n"
            "  --vendor-thing-id ID    the gateway's vendor thing ID (default GW-0001)\n"
            "  --password PW           its thing password (default demo-pass)\n"
            "  --storage DIR           where the identity and the lamps are kept\n"
            "                          (default ./lamps-data)\n"
            "  --lamps N               lamps on the radio, LAMP-0000 .. (default 4, at most %d)\n"
            "  --lamp-prefix P         the lamps' vendorThingIDs: P0000 .. (default LAMP-,\n"
            "                          at most 32 bytes)\n"
            "  --lamp-password PW      the lamps' password (default lamp-pass)\n"
            "  --radio-delay-ms MS     how long the radio takes to answer (default 50)\n"
            "  --verbose               log library debug lines to stderr\n"
            "  --help                  show this text\n"
            "It runs until SIGINT or SIGTERM.\n",
            LAMPS_MAX);
}

static int parse_long(const char *text, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Returns 0 to run, 1 for --help, -1 for a bad command line (message printed). */
static int parse_args(int argc, char **argv, struct options *o)
{
    int i;

    for (i = 1; i < argc; i++) {
        const char *flag = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        long n;

        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0)
            return 1;
        if (strcmp(flag, "--verbose") == 0) {
            o->verbose = 1;
            continue;
        }
        if (value == NULL) {
            fprintf(stderr, "lamps: unknown option or missing value: %s\n", flag);
            return -1;
        }
        i++;
        if (strcmp(flag, "--host") == 0)
            o->host = value;
        else if (strcmp(flag, "--app-id") == 0)
            o->app_id = value;
        else if (strcmp(flag, "--app-key") == 0)
            o->app_key = value;
        else if (strcmp(flag, "--vendor-thing-id") == 0)
            o->vendor_thing_id = value;
        else if (strcmp(flag, "--password") == 0)
            o->password = value;
        else if (strcmp(flag, "--storage") == 0)
            o->storage = value;
        else if (strcmp(flag, "--cafile") == 0)
            o->cafile = value;
        else if (strcmp(flag, "--certfile") == 0)
            o->certfile = value;
        else if (strcmp(flag, "--keyfile") == 0)
            o->keyfile = value;
        else if (strcmp(flag, "--lamp-password") == 0)
            o->lamp_password = value;
        else if (strcmp(flag, "--lamp-prefix") == 0) {
            if (value[0] == '\0' || strlen(value) > 32) {
                fprintf(stderr, "lamps: --lamp-prefix needs 1 .. 32 bytes\n");
                return -1;
            }
            o->lamp_prefix = value;
        } else if (strcmp(flag, "--port") == 0 || strcmp(flag, "--lamps") == 0 ||
                   strcmp(flag, "--radio-delay-ms") == 0) {
            long hi = strcmp(flag, "--port") == 0 ? 65535 : strcmp(flag, "--lamps") == 0 ? LAMPS_MAX : 60000;
            long lo = strcmp(flag, "--radio-delay-ms") == 0 ? 0 : 1;

            if (parse_long(value, lo, hi, &n) != 0) {
                fprintf(stderr, "lamps: %s needs a number %ld..%ld, not %s\n", flag, lo, hi, value);
                return -1;
            }
            if (strcmp(flag, "--port") == 0)
                o->port = (int)n;
            else if (strcmp(flag, "--lamps") == 0)
                o->lamps = (int)n;
            else
                o->radio_delay_ms = (int)n;
        } else {
            fprintf(stderr, "lamps: unknown option %s\n", flag);
            return -1;
        }
    }
    return 0;
}

/* Sets up the handle: broker, TLS, the gateway layout, room for the lamps,
 * the callbacks. Returns a thingif status. */
static int configure(struct gateway *gw, const struct options *o)
{
    thingif_t *t = gw->t;
    int rc = thingif_set_log_callback(t, on_log, o->verbose ? THINGIF_LOG_DEBUG : THINGIF_LOG_INFO, NULL);

    if (rc == THINGIF_OK)
        rc = thingif_set_broker(t, o->host, o->port);
    if (rc == THINGIF_OK && o->cafile != NULL)
        rc = thingif_set_tls(t, o->cafile, o->certfile, o->keyfile);
    if (rc == THINGIF_OK)
        rc = thingif_set_layout_position(t, THINGIF_LAYOUT_GATEWAY);
    /* Every lamp's onboarding waits in the outbox until the framework
     * answers: make room for all of them beside the results. */
    if (rc == THINGIF_OK)
        rc = thingif_set_option(t, THINGIF_OPT_MAX_END_NODES, gw->capacity);
    if (rc == THINGIF_OK && gw->capacity > 128)
        rc = thingif_set_option(t, THINGIF_OPT_OUTBOX_MAX, 256 + 2L * gw->capacity);
    if (rc == THINGIF_OK)
        rc = thingif_set_end_node_callback(t, on_end_node, gw);
    if (rc == THINGIF_OK)
        rc = thingif_on_action(t, SCHEMA, SCHEMA_VERSION, "turnPower", on_turn_power, gw);
    if (rc == THINGIF_OK)
        rc = thingif_on_action(t, SCHEMA, SCHEMA_VERSION, "setBrightness", on_set_brightness, gw);
    return rc;
}

/* Stops the radio; the actions it still holds fail (the lamps were not
 * reached), so no command waits for a gateway that stopped. */
static void stop_radio(struct gateway *gw, pthread_t radio)
{
    struct radio_job *job;

    pthread_mutex_lock(&gw->lock);
    gw->stopping = 1;
    job = gw->head;
    gw->head = gw->tail = NULL;
    pthread_cond_signal(&gw->wake);
    pthread_mutex_unlock(&gw->lock);
    pthread_join(radio, NULL);
    while (job != NULL) {
        struct radio_job *next = job->next;

        if (thingif_deferred_complete(job->deferred, "the gateway stopped before the lamp answered", NULL) !=
            THINGIF_OK)
            say("%s: the result could not be recorded", job->vendor_thing_id);
        free(job);
        job = next;
    }
}

int main(int argc, char **argv)
{
    struct options o = {
        .host = "127.0.0.1",
        .port = 1883,
        .app_id = "demoApp",
        .app_key = "demoKey",
        .vendor_thing_id = "GW-0001",
        .password = "demo-pass",
        .storage = "./lamps-data",
        .lamps = 4,
        .lamp_prefix = "LAMP-",
        .lamp_password = "lamp-pass",
        .radio_delay_ms = 50,
    };
    struct gateway gw = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};
    struct sigaction sa = {.sa_handler = on_signal};
    pthread_t radio;
    int rc, status = 0, was_connected = 0, uploaded = 0, console_open = 1;

    switch (parse_args(argc, argv, &o)) {
    case 1: usage(stdout); return 0;
    case -1: usage(stderr); return 2;
    }
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    gw.capacity = o.lamps + EXTRA_LAMPS;
    gw.radio_delay_ms = o.radio_delay_ms;
    gw.lamp_prefix = o.lamp_prefix;
    gw.lamps = calloc((size_t)gw.capacity, sizeof *gw.lamps);
    gw.t = gw.lamps != NULL ? thingif_new(o.app_id, o.app_key, o.storage) : NULL;
    if (gw.t == NULL) {
        fprintf(stderr, "lamps: cannot create the gateway (out of memory, or is %s not writable?)\n", o.storage);
        free(gw.lamps);
        return 1;
    }
    rc = configure(&gw, &o);
    if (rc == THINGIF_OK)
        rc = onboard(gw.t, &o);
    if (rc == THINGIF_OK)
        say("onboarded as %s (a gateway); connecting to %s:%d", thingif_thing_id(gw.t), o.host, o.port);
    if (rc == THINGIF_OK)
        rc = add_lamps(&gw, &o);
    if (rc != THINGIF_OK || pthread_create(&radio, NULL, radio_thread, &gw) != 0) {
        if (!stop_requested)
            fprintf(stderr, "lamps: start failed: %s\n", rc != THINGIF_OK ? thingif_strerror(rc) : "no radio thread");
        status = stop_requested ? 0 : 1;
        if (thingif_destroy(gw.t) != THINGIF_OK)
            status = 1;
        free(gw.lamps);
        return status;
    }

    /* The caller-driven loop, as in aircon.c: handlers and the end-node
     * callback run on this thread; the radio completes actions on its own. */
    while (!stop_requested) {
        int connected;

        rc = thingif_loop(gw.t, 200);
        if (rc != THINGIF_OK && rc != THINGIF_ERR_NO_CONN) {
            fprintf(stderr, "lamps: loop stopped: %s\n", thingif_strerror(rc));
            status = 1;
            break;
        }
        connected = thingif_is_connected(gw.t);
        if (connected != was_connected)
            say(connected ? "connected" : "disconnected; reconnecting");
        was_connected = connected;
        if (connected && !uploaded) {
            upload_all(&gw);
            uploaded = 1;
        }
        if (console_open)
            console_open = poll_console(&gw);
    }

    say("stopping");
    stop_radio(&gw, radio);
    if (thingif_destroy(gw.t) != THINGIF_OK)
        status = 1;
    free(gw.lamps);
    return status;
}
