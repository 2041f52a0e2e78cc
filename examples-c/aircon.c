/* SPDX-License-Identifier: Apache-2.0 */

/*
 * aircon.c - the AirConditioner-Demo appliance on libthingif.
 *
 * A small air conditioner that takes commands of the schema
 * "AirConditioner-Demo" version 1 and reports its state:
 *
 *   turnPower             {"power": true|false}
 *   setPresetTemperature  {"presetTemperature": 16..30}
 *   setFanSpeed           {"fanSpeed": 0..10}
 *
 *   state: {"power", "presetTemperature", "fanSpeed",
 *           "currentTemperature", "currentHumidity"}
 *
 * The shape to copy into firmware:
 *   1. thingif_new() + thingif_set_broker()
 *   2. thingif_on_action() for every action, before the loop runs
 *   3. thingif_onboard() (or thingif_use_onboarded() for an identity the app
 *      handed over), tried again while the network is not there yet
 *   4. the loop: this program calls thingif_loop() on its own thread, so
 *      handlers run right here and need no locks. A program with a main loop
 *      of its own would call thingif_loop_start() once instead and guard the
 *      device state with a mutex, since handlers then run on the library's
 *      thread.
 *   5. thingif_destroy() on the way out.
 *
 * With --board, it also takes firmware updates (examples-c/ab_board.c): the
 * installer is set before the loop, each turn the board checks its trial
 * boot, and a reboot the board asks for ends the program with status 3.
 * With --swupdate too, the board's slots are written by SWUpdate
 * (examples-c/swupdate_installer.c): the image is a .swu that swupdate
 * checks and installs into the other slot.
 *
 * Build: cmake -G Ninja -S . -B build && cmake --build build
 * Run:   build/aircon --help
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <thingif.h>

#include "ab_board.h"
#include "swupdate_installer.h"

#define SCHEMA "AirConditioner-Demo"
#define SCHEMA_VERSION 1

#define TEMP_MIN 16
#define TEMP_MAX 30
#define FAN_MIN 0
#define FAN_MAX 10

/* The appliance. Handlers change it; the main loop uploads it. */
struct aircon {
    int power;               /* 0 off, 1 on */
    int preset_temperature;  /* TEMP_MIN .. TEMP_MAX, degrees Celsius */
    int fan_speed;           /* FAN_MIN .. FAN_MAX */
    int current_temperature; /* what the sensors read */
    int current_humidity;    /* percent */
    int dirty;               /* the state changed and is not uploaded yet */
};

struct options {
    const char *host;
    int port;
    const char *app_id;
    const char *app_key;
    const char *vendor_thing_id;
    const char *password;
    const char *thing_type;
    const char *firmware_version;
    const char *storage;
    const char *thing_id; /* with token: use an identity the app onboarded */
    const char *token;
    const char *cafile;   /* TLS: the CA that signed the broker's certificate */
    const char *certfile; /* mutual TLS: this appliance's certificate … */
    const char *keyfile;  /* … and its key */
    const char *board;    /* firmware updates: a simulated A/B board in this folder … */
    const char *trust;    /* … and the release keys' trust file */
    const char *swupdate; /* … its slots written by swupdate, working in this folder */
    int verbose;          /* library debug lines too */
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

    fputs("aircon: ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

/* swupdate ended (swupdate_installer_poll, on the loop's thread): the board
 * records the slot and tells libthingif. */
static void on_swupdate_done(int ok, const char *message, void *board)
{
    if (ab_board_installed(board, ok, message) != 0)
        fprintf(stderr, "aircon: thingif_update_installed refused\n");
}

/* The board's install step with --swupdate: the verified .swu to swupdate. */
static int start_swupdate(struct ab_board *b, const char *image_path, char slot, void *installer)
{
    char message[256];

    if (swupdate_installer_start(installer, image_path, slot, on_swupdate_done, b, message, sizeof message) == 0)
        return 0;
    /* It could not start: the job fails with the reason. */
    fprintf(stderr, "aircon: %s\n", message);
    return ab_board_installed(b, 0, message) == 0 ? 0 : 1;
}

/* Frees the handle on a failed start; the exit status of main. */
static int give_up(thingif_t *t)
{
    if (thingif_destroy(t) != THINGIF_OK)
        fprintf(stderr, "aircon: the handle could not be freed\n");
    return 1;
}

/*
 * Onboards, or takes the identity the app handed over. A broker that cannot
 * be reached (THINGIF_ERR_CONNECT) or a framework that does not answer in
 * time (THINGIF_ERR_TIMEOUT) is tried again after a pause that doubles up to
 * a minute, until SIGINT or SIGTERM: an appliance switched on before its
 * network is up, or on a slow link, needs no restart. Any other error (a
 * wrong password, a bad TLS file) is returned at once.
 */
static int onboard(thingif_t *t, const struct options *o)
{
    unsigned pause_s = 1;

    for (;;) {
        int rc;
        unsigned tick;

        if (o->thing_id != NULL)
            rc = thingif_use_onboarded(t, o->thing_id, o->token);
        else
            rc = thingif_onboard(t, o->vendor_thing_id, o->password, o->thing_type, o->firmware_version, NULL);
        if ((rc != THINGIF_ERR_CONNECT && rc != THINGIF_ERR_TIMEOUT) || stop_requested)
            return rc;
        say("onboarding: %s; trying again in %u s", thingif_strerror(rc), pause_s);
        /* In steps of 200 ms, so that SIGINT or SIGTERM ends the pause soon. */
        for (tick = 0; tick < pause_s * 5; tick++) {
            const struct timespec step = {.tv_nsec = 200 * 1000 * 1000};

            if (stop_requested)
                return rc;
            (void)nanosleep(&step, NULL);
        }
        pause_s = pause_s >= 30 ? 60 : pause_s * 2;
    }
}

/* Fails the action with a message and prints it. */
static void refuse(thingif_action_t *action, const char *message)
{
    if (thingif_action_fail(action, message) != THINGIF_OK)
        say("%s: the failure could not be recorded", thingif_action_name(action));
    say("%s refused: %s", thingif_action_name(action), message);
}

/*
 * Reads the integer parameter `name` and checks that it lies in lo..hi.
 * On a missing field, a wrong type or a value out of range it fails the
 * action with a message for a person and returns -1.
 */
static int int_param(thingif_action_t *action, const char *name, int lo, int hi, int *out)
{
    json_t *params = thingif_action_params(action);
    json_error_t error;
    json_int_t value;
    char message[200];

    if (json_unpack_ex(params, &error, 0, "{s:I}", name, &value) != 0) {
        if (json_is_object(params) && json_object_get(params, name) != NULL)
            snprintf(message, sizeof message, "%s must be an integer", name);
        else
            snprintf(message, sizeof message, "%s is missing (an integer %d..%d)", name, lo, hi);
        refuse(action, message);
        return -1;
    }
    if (value < lo || value > hi) {
        snprintf(message, sizeof message, "%s %" JSON_INTEGER_FORMAT " is out of range %d..%d", name, value, lo, hi);
        refuse(action, message);
        return -1;
    }
    *out = (int)value;
    return 0;
}

/* ---- action handlers: they run inside thingif_loop(), on this thread ----
 *
 * Each one checks its parameters, changes the appliance and marks it dirty;
 * the main loop then uploads the new state and prints it. A refusal fails
 * the action with a message, which becomes the action's result. */

static void on_turn_power(thingif_action_t *action, void *userdata)
{
    struct aircon *ac = userdata;
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
    ac->power = power ? 1 : 0;
    ac->dirty = 1;
}

static void on_set_preset_temperature(thingif_action_t *action, void *userdata)
{
    struct aircon *ac = userdata;
    int previous = ac->preset_temperature;
    int temperature;

    if (int_param(action, "presetTemperature", TEMP_MIN, TEMP_MAX, &temperature) != 0)
        return;
    ac->preset_temperature = temperature;
    ac->dirty = 1;
    /* The result carries data too; thingif_action_attach_data steals the reference. */
    if (thingif_action_attach_data(action, json_pack("{s:i}", "previousPresetTemperature", previous)) != THINGIF_OK)
        say("setPresetTemperature: the result's data could not be attached");
}

static void on_set_fan_speed(thingif_action_t *action, void *userdata)
{
    struct aircon *ac = userdata;
    int speed;

    if (int_param(action, "fanSpeed", FAN_MIN, FAN_MAX, &speed) != 0)
        return;
    ac->fan_speed = speed;
    ac->dirty = 1;
}

/* ---- state ---- */

/* Stands in for real sensors: the room drifts one degree towards the preset
 * temperature while the power is on. */
static void read_sensors(struct aircon *ac)
{
    if (!ac->power)
        return;
    if (ac->current_temperature > ac->preset_temperature)
        ac->current_temperature--;
    else if (ac->current_temperature < ac->preset_temperature)
        ac->current_temperature++;
}

static void upload_state(thingif_t *t, struct aircon *ac)
{
    json_t *state;
    int rc;

    read_sensors(ac);
    state = json_pack("{s:b, s:i, s:i, s:i, s:i}", "power", ac->power, "presetTemperature", ac->preset_temperature,
                      "fanSpeed", ac->fan_speed, "currentTemperature", ac->current_temperature, "currentHumidity",
                      ac->current_humidity);
    if (state == NULL) {
        fprintf(stderr, "aircon: out of memory\n");
        return;
    }
    rc = thingif_state_update(t, state); /* borrows state: we still own it */
    json_decref(state);
    if (rc != THINGIF_OK) {
        fprintf(stderr, "aircon: state upload failed: %s\n", thingif_strerror(rc));
        return;
    }
    ac->dirty = 0;
    say("state uploaded: power=%s presetTemperature=%d fanSpeed=%d currentTemperature=%d currentHumidity=%d",
        ac->power ? "on" : "off", ac->preset_temperature, ac->fan_speed, ac->current_temperature, ac->current_humidity);
}

/* ---- logging ---- */

static void on_log(int level, const char *message, void *userdata)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    (void)userdata;
    fprintf(stderr, "aircon: thingif %s: %s\n", level >= 0 && level <= THINGIF_LOG_DEBUG ? names[level] : "?", message);
}

/* ---- command line ---- */

static void usage(FILE *out)
{
    fprintf(out, "usage: aircon [options]\n"
                 "The AirConditioner-Demo appliance: takes turnPower, setPresetTemperature and\n"
                 "setFanSpeed commands over MQTT and uploads its state.\n"
                 "\n"
                 "  --host H                broker host (default 127.0.0.1)\n"
                 "  --port P                broker port (default 1883)\n"
                 "  --cafile FILE           use TLS, verifying the broker with this CA\n"
                 "  --certfile FILE --keyfile FILE\n"
                 "                          mutual TLS: present this certificate and key\n"
                 "  --app-id ID             application ID (default demoApp)\n"
                 "  --app-key KEY           application key (default demoKey)\n"
                 "  --vendor-thing-id ID    this appliance's vendor thing ID (default AC-0001)\n"
                 "  --password PW           its thing password (default demo-pass)\n"
                 "  --thing-type TYPE       thing type (default AirConditioner)\n"
                 "  --firmware-version V    firmware version (default 1.0.0)\n"
                 "  --storage DIR           where the identity is kept (default ./aircon-data)\n"
                 "  --thing-id ID --token T use an identity the app onboarded instead of\n"
                 "                          onboarding with the vendor thing ID\n"
                 "  --board DIR --trust FILE\n"
                 "                          take firmware updates into a simulated A/B board in\n"
                 "                          DIR (examples-c/ab_board.c), signed by a key of FILE;\n"
                 "                          the firmware version is then the booted slot's\n"
                 "  --swupdate DIR          with --board: install each update with swupdate\n"
                 "                          (examples-c/swupdate_installer.c): the image is a .swu\n"
                 "                          signed for DIR/public.pem; DIR is swupdate's work folder\n"
                 "  --verbose               log library debug lines to stderr\n"
                 "  --help                  show this text\n"
                 "It runs until SIGINT or SIGTERM; with --board it exits 3 to be rebooted.\n");
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
            fprintf(stderr, "aircon: unknown option or missing value: %s\n", flag);
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
        else if (strcmp(flag, "--thing-type") == 0)
            o->thing_type = value;
        else if (strcmp(flag, "--firmware-version") == 0)
            o->firmware_version = value;
        else if (strcmp(flag, "--storage") == 0)
            o->storage = value;
        else if (strcmp(flag, "--thing-id") == 0)
            o->thing_id = value;
        else if (strcmp(flag, "--token") == 0)
            o->token = value;
        else if (strcmp(flag, "--cafile") == 0)
            o->cafile = value;
        else if (strcmp(flag, "--certfile") == 0)
            o->certfile = value;
        else if (strcmp(flag, "--keyfile") == 0)
            o->keyfile = value;
        else if (strcmp(flag, "--board") == 0)
            o->board = value;
        else if (strcmp(flag, "--trust") == 0)
            o->trust = value;
        else if (strcmp(flag, "--swupdate") == 0)
            o->swupdate = value;
        else if (strcmp(flag, "--port") == 0) {
            if (parse_long(value, 1, 65535, &n) != 0) {
                fprintf(stderr, "aircon: --port needs a number 1..65535, not %s\n", value);
                return -1;
            }
            o->port = (int)n;
        } else {
            fprintf(stderr, "aircon: unknown option %s\n", flag);
            return -1;
        }
    }
    if ((o->thing_id == NULL) != (o->token == NULL)) {
        fprintf(stderr, "aircon: --thing-id and --token go together\n");
        return -1;
    }
    if ((o->board == NULL) != (o->trust == NULL)) {
        fprintf(stderr, "aircon: --board and --trust go together\n");
        return -1;
    }
    if (o->swupdate != NULL && o->board == NULL) {
        fprintf(stderr, "aircon: --swupdate needs --board\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o = {
        .host = "127.0.0.1",
        .port = 1883,
        .app_id = "demoApp",
        .app_key = "demoKey",
        .vendor_thing_id = "AC-0001",
        .password = "demo-pass",
        .thing_type = "AirConditioner",
        .firmware_version = "1.0.0",
        .storage = "./aircon-data",
    };
    /* Off, preset to 22 degrees, fan speed 3, in a room at 28 degrees and 55 % humidity. */
    struct aircon ac = {
        .preset_temperature = 22,
        .fan_speed = 3,
        .current_temperature = 28,
        .current_humidity = 55,
    };
    struct sigaction sa = {.sa_handler = on_signal};
    thingif_t *t;
    struct ab_board *board = NULL;
    struct swupdate_installer *swupdate = NULL;
    int rc, was_connected = 0, status = 0;

    switch (parse_args(argc, argv, &o)) {
    case 1: usage(stdout); return 0;
    case -1: usage(stderr); return 2;
    }

    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (o.board != NULL) {
        /* The bootloader runs first: it picks the slot, whose version this
         * firmware then runs. */
        board = ab_board_boot(o.board, o.firmware_version);
        if (board == NULL) {
            fprintf(stderr, "aircon: cannot use the board folder %s\n", o.board);
            return 1;
        }
        o.firmware_version = ab_board_version(board);
    }
    if (o.swupdate != NULL) {
        swupdate = swupdate_installer_new(o.swupdate);
        if (swupdate == NULL) {
            fprintf(stderr, "aircon: cannot use the swupdate folder %s\n", o.swupdate);
            ab_board_free(board);
            return 1;
        }
        ab_board_use_installer(board, start_swupdate, swupdate);
    }

    t = thingif_new(o.app_id, o.app_key, o.storage);
    if (t == NULL) {
        fprintf(stderr, "aircon: cannot create the thing (is %s writable?)\n", o.storage);
        return 1;
    }
    /* Every call that returns a status is checked (the header marks them
     * THINGIF_NODISCARD): a setting that did not take is an error here. */
    rc = thingif_set_log_callback(t, on_log, o.verbose ? THINGIF_LOG_DEBUG : THINGIF_LOG_INFO, NULL);
    if (rc == THINGIF_OK)
        rc = thingif_set_broker(t, o.host, o.port);
    if (rc != THINGIF_OK) {
        fprintf(stderr, "aircon: broker %s:%d: %s\n", o.host, o.port, thingif_strerror(rc));
        return give_up(t);
    }
    if (o.cafile != NULL) {
        /* Every connection then uses TLS; a TLS setup that fails is an error,
         * never a plain-text connection. */
        int rc = thingif_set_tls(t, o.cafile, o.certfile, o.keyfile);
        if (rc != THINGIF_OK) {
            fprintf(stderr, "aircon: TLS: %s\n", thingif_strerror(rc));
            return give_up(t);
        }
    }
    /* Register every handler before the loop runs, so no command finds none.
     * Each call only while the ones before it succeeded: a status is a code,
     * not a bit mask, so one refusal is reported as itself. */
    if (rc == THINGIF_OK)
        rc = thingif_on_action(t, SCHEMA, SCHEMA_VERSION, "turnPower", on_turn_power, &ac);
    if (rc == THINGIF_OK)
        rc = thingif_on_action(t, SCHEMA, SCHEMA_VERSION, "setPresetTemperature", on_set_preset_temperature, &ac);
    if (rc == THINGIF_OK)
        rc = thingif_on_action(t, SCHEMA, SCHEMA_VERSION, "setFanSpeed", on_set_fan_speed, &ac);
    if (rc != THINGIF_OK) {
        fprintf(stderr, "aircon: a handler was refused: %s\n", thingif_strerror(rc));
        return give_up(t);
    }
    /* Updates: the installer, at every start, before the loop. */
    if (board != NULL && (rc = ab_board_set_installer(board, t, o.thing_type, o.trust)) != THINGIF_OK) {
        fprintf(stderr, "aircon: the installer was refused: %s\n", thingif_strerror(rc));
        swupdate_installer_free(swupdate);
        ab_board_free(board);
        return give_up(t);
    }

    rc = onboard(t, &o);
    if (rc != THINGIF_OK) {
        if (stop_requested) {
            say("stopping");
            return thingif_destroy(t) == THINGIF_OK ? 0 : 1;
        }
        fprintf(stderr, "aircon: onboarding failed: %s\n", thingif_strerror(rc));
        return give_up(t);
    }
    say("onboarded as %s; connecting to %s:%d", thingif_thing_id(t), o.host, o.port);

    /*
     * The caller-driven loop: each thingif_loop() call runs the network for
     * up to 200 ms and calls the handlers above on this thread. After each
     * turn the state is uploaded if a handler changed it, and once on every
     * (re)connect. (With thingif_loop_start() the library runs this loop on
     * a thread of its own instead.)
     */
    while (!stop_requested) {
        int connected;

        rc = thingif_loop(t, 200);
        if (rc != THINGIF_OK && rc != THINGIF_ERR_NO_CONN) {
            fprintf(stderr, "aircon: loop stopped: %s\n", thingif_strerror(rc));
            status = 1;
            break;
        }
        connected = thingif_is_connected(t);
        if (connected && !was_connected) {
            say("connected");
            ac.dirty = 1;
        } else if (!connected && was_connected) {
            say("disconnected; reconnecting");
        }
        was_connected = connected;
        if (ac.dirty && connected)
            upload_state(t, &ac);
        swupdate_installer_poll(swupdate);
        if (board != NULL) {
            ab_board_check(board, t);
            if (ab_board_reboot_requested(board)) {
                status = AB_BOARD_REBOOT;
                break;
            }
        }
    }

    say(status == AB_BOARD_REBOOT ? "rebooting" : "stopping");
    if (thingif_destroy(t) != THINGIF_OK)
        status = 1;
    swupdate_installer_free(swupdate);
    ab_board_free(board);
    return status;
}
