/* SPDX-License-Identifier: Apache-2.0 */

/* 32-bit correctness of the device library's times, run on every
 * architecture (on armv7 under qemu-arm, where `int` and Swift's `Int` are
 * 32 bits): a daily timer trigger in 2040, past the 32-bit time_t limit of
 * 2038 and past 2^31 milliseconds by far, in America/Los_Angeles (a zone
 * west of UTC: negative offsets in its TZif file, and a daylight-saving
 * change after the file's last transition, from its POSIX TZ footer).
 *
 * It creates the trigger, destroys the handle, makes a new one on the same
 * storage (the trigger is read back from its JSON file), then moves the
 * injected clock over three days: the trigger must fire exactly at 07:00
 * local time each day, before and after the change to PDT on 2040-03-11,
 * and not one millisecond earlier. No broker is needed: timers fire
 * offline (the broker address is a closed local port).
 *
 * usage: wide_time PARENT_DIR   (a new storage folder is made in it;
 *                                exit 0: pass, 1: fail) */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <thingif.h>

static long long clock_ms;
static int fired;

static long long fake_clock(void *userdata)
{
    (void)userdata;
    return __atomic_load_n(&clock_ms, __ATOMIC_SEQ_CST);
}

static void on_power(thingif_action_t *action, void *userdata)
{
    (void)action;
    (void)userdata;
    fired++;
}

static int failures;
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "wide_time: FAIL line %d: %s: ", __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static thingif_t *open_thing(const char *storage)
{
    thingif_t *t = thingif_new("app2038", "key2038", storage);
    if (!t)
        return NULL;
    /* The identity seeded in storage: no network is used, and the loop's
     * connection attempts to port 1 fail at once; timers fire offline. */
    if (thingif_use_onboarded(t, "th.wide-time", "token-2040") != THINGIF_OK ||
        thingif_on_action(t, "AirConditioner-Demo", 1, "turnPower", on_power, NULL) != THINGIF_OK ||
        thingif_set_clock(t, fake_clock, NULL) != THINGIF_OK) {
        if (thingif_destroy(t) != THINGIF_OK)
            fprintf(stderr, "wide_time: thingif_destroy failed\n");
        return NULL;
    }
    return t;
}

/* One loop turn at the given clock; returns how many actions ran. */
static int step(thingif_t *t, long long ms)
{
    int before = fired;
    __atomic_store_n(&clock_ms, ms, __ATOMIC_SEQ_CST);
    int rc = thingif_loop(t, 0);
    CHECK(rc == THINGIF_OK || rc == THINGIF_ERR_NO_CONN, "thingif_loop: %s", thingif_strerror(rc));
    return fired - before;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: wide_time PARENT_DIR\n");
        return 2;
    }
    char storage[4096];
    mkdir(argv[1], 0700);
    snprintf(storage, sizeof storage, "%s/wide-time.XXXXXX", argv[1]);
    if (!mkdtemp(storage)) {
        perror("wide_time: mkdtemp");
        return 2;
    }
    printf("wide_time: storage %s\n", storage);
    /* A thing onboarded earlier (storage_dir/identity.json, as the library
     * writes it), with its broker on a closed local port. */
    char path[4200];
    snprintf(path, sizeof path, "%s/identity.json", storage);
    FILE *f = fopen(path, "w");
    if (!f ||
        fputs("{\"appID\":\"app2038\",\"thingID\":\"th.wide-time\",\"accessToken\":\"token-2040\","
              "\"mqttEndpoint\":{\"installationID\":\"inst-2040\",\"host\":\"127.0.0.1\",\"portTCP\":1,"
              "\"portSSL\":0,\"username\":\"th.wide-time\",\"password\":\"pw\",\"mqttTopic\":\"wide-time-2040\","
              "\"ttl\":2147483647}}\n",
              f) < 0 ||
        fclose(f) != 0) {
        perror("wide_time: identity.json");
        return 2;
    }
    /* Every value here is above 2^31 (ms) and the dates are after 2038-01-19. */
    const long long day = 86400000LL, hour = 3600000LL;
    const long long jan1_2040 = 2208988800000LL;                  /* 2040-01-01T00:00:00Z */
    const long long mar9_noon = jan1_2040 + 68 * day + 12 * hour; /* 2040-03-09T12:00Z */
    const long long expected[3] = {
        jan1_2040 + 69 * day + 15 * hour, /* 2040-03-10 07:00 PST = 15:00Z */
        jan1_2040 + 70 * day + 14 * hour, /* 2040-03-11 07:00 PDT = 14:00Z (DST began 02:00 local) */
        jan1_2040 + 71 * day + 14 * hour, /* 2040-03-12 07:00 PDT */
    };
    CHECK(sizeof(long long) == 8, "long long is %u bytes", (unsigned)sizeof(long long));
    printf("wide_time: %u-bit pointers, %u-bit long\n", (unsigned)(8 * sizeof(void *)), (unsigned)(8 * sizeof(long)));

    clock_ms = mar9_noon;
    thingif_t *t = open_thing(storage);
    if (!t) {
        fprintf(stderr, "wide_time: FAIL: cannot make a handle on %s\n", storage);
        return 1;
    }
    json_t *params = json_pack("{s:b}", "power", 1);
    const char *sets[] = {"wake"};
    CHECK(thingif_actionset_create(t, "wake") == THINGIF_OK, "action set");
    CHECK(thingif_actionset_add_action(t, "wake", "AirConditioner-Demo", 1, "turnPower", params) == THINGIF_OK,
          "add action");
    json_decref(params);
    int rc = thingif_timer_create(t, "wake", expected[0], THINGIF_RECUR_DAY, 1, "America/Los_Angeles", sets, 1);
    CHECK(rc == THINGIF_OK, "thingif_timer_create: %s", thingif_strerror(rc));
    rc = thingif_timer_enable(t, "wake", 1);
    CHECK(rc == THINGIF_OK, "thingif_timer_enable: %s", thingif_strerror(rc));
    CHECK(thingif_destroy(t) == THINGIF_OK, "destroy");

    /* Read back from storage. */
    t = open_thing(storage);
    if (!t) {
        fprintf(stderr, "wide_time: FAIL: cannot reopen %s\n", storage);
        return 1;
    }
    CHECK(step(t, mar9_noon) == 0, "fired at 2040-03-09 noon");
    for (int i = 0; i < 3; i++) {
        int early = step(t, expected[i] - 1);
        CHECK(early == 0, "day %d: fired %d ms early (at %lld)", i, 1, expected[i] - 1);
        int on_time = step(t, expected[i]);
        CHECK(on_time == 1, "day %d: %d actions at %lld, expected 1", i, on_time, expected[i]);
        if (on_time == 1)
            printf("wide_time: fired at %lld (2040-03-%02d)\n", expected[i], 10 + i);
    }
    CHECK(thingif_destroy(t) == THINGIF_OK, "destroy");
    if (failures == 0)
        printf("wide_time: ok\n");
    return failures == 0 ? 0 : 1;
}
