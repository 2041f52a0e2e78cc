/* SPDX-License-Identifier: Apache-2.0 */

/*
 * bench/update_fleet.c - many devices in one process taking a rollout
 * (bench/rollout): one libthingif handle each, with its own storage
 * directory, broker connection and loop thread (thingif_loop_start), and an
 * installer that keeps nothing: the library checks every block against the
 * signed hashes before the sink sees it, which is what is measured here.
 *
 *   update_fleet --port P --things FILE --storage DIR --trust FILE
 *                [--thing-type T] [--bad-version V] [--bad-every K] [--first I]
 *
 * FILE holds one "thingID accessToken" line a device. A device's install
 * succeeds at once; its reboot is the handle destroyed and made again on the
 * same storage directory, running the installed version (or, after a
 * rollback, the previous one); its trial is confirmed, except that a device
 * whose index (counted from I, the fleet's first) is a multiple of K
 * rejects version V (its self-test fails) and so rolls back. libmosquitto's
 * loop waits in select(), so a process holds fewer than 1,024 descriptors,
 * and a handle holds five once it has had a job (its socket, libmosquitto's
 * socket pair, the outbox and the update journal): bench/rollout runs 150
 * devices a process. Prints "fleet: ready N" once every device is connected,
 * then a line per reboot, and runs until SIGTERM or SIGINT.
 */

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include "thingif.h"

#define MAX_DEVICES 4096

struct device {
    thingif_t *t;
    int index;
    char thing_id[96];
    char token[160];
    char dir[512];
    char running[65];
    char previous[65];
    char installed[65];
    atomic_int reboot;      /* set by the installer's reboot or rollback callback */
    atomic_int rolled_back; /* the reboot goes back to `previous` */
    int trial_told;         /* this boot's trial was confirmed or rejected */
};

static struct device devices[MAX_DEVICES];
static int count;
static const char *bad_version = "";
static int bad_every;
static int first;
static const char *thing_type = "AirConditioner";
static const char *trust;
static int port;
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void copy(char *to, size_t size, const char *from)
{
    snprintf(to, size, "%s", from != NULL ? from : "");
}

static int on_offer(thingif_t *t, const thingif_update_info *info, char *message, size_t size, void *userdata)
{
    (void)t, (void)info, (void)message, (void)size, (void)userdata;
    return THINGIF_UPDATE_ACCEPT;
}

static int on_write(thingif_t *t, uint64_t offset, const void *bytes, size_t length, void *userdata)
{
    (void)t, (void)offset, (void)bytes, (void)length, (void)userdata;
    return 0;
}

static int on_flush(thingif_t *t, void *userdata)
{
    (void)t, (void)userdata;
    return 0;
}

static int on_install(thingif_t *t, const thingif_update_info *info, void *userdata)
{
    struct device *d = userdata;
    copy(d->installed, sizeof d->installed, info->version);
    return thingif_update_installed(t, 1, NULL) == THINGIF_OK ? 0 : 1;
}

static void on_reboot(thingif_t *t, void *userdata)
{
    struct device *d = userdata;
    (void)t;
    atomic_store(&d->rolled_back, 0);
    atomic_store(&d->reboot, 1);
}

static int on_commit(thingif_t *t, void *userdata)
{
    struct device *d = userdata;
    (void)t;
    copy(d->previous, sizeof d->previous, d->running);
    return 0;
}

static void on_rollback(thingif_t *t, void *userdata)
{
    struct device *d = userdata;
    (void)t;
    atomic_store(&d->rolled_back, 1);
    atomic_store(&d->reboot, 1);
}

static const thingif_installer installer = {
    .offer = on_offer,
    .write = on_write,
    .flush = on_flush,
    .install = on_install,
    .reboot = on_reboot,
    .commit = on_commit,
    .rollback = on_rollback,
};

/* One boot: a new handle on the device's storage, running d->running. */
static int boot(struct device *d)
{
    thingif_update_config config = {.thing_type = thing_type, .running_version = d->running, .trust_file = trust};
    int rc;

    d->t = thingif_new("demoApp", "demoKey", d->dir);
    if (d->t == NULL)
        return THINGIF_ERR_STORAGE;
    rc = thingif_set_broker(d->t, "127.0.0.1", port);
    if (rc == THINGIF_OK)
        rc = thingif_set_installer(d->t, &installer, &config, d);
    if (rc == THINGIF_OK)
        rc = thingif_use_onboarded(d->t, d->thing_id, d->token);
    if (rc == THINGIF_OK)
        rc = thingif_loop_start(d->t);
    d->trial_told = 0;
    return rc;
}

static int shut(struct device *d)
{
    int rc = thingif_loop_stop(d->t);
    if (thingif_destroy(d->t) != THINGIF_OK)
        rc = THINGIF_ERR_STATE;
    d->t = NULL;
    return rc;
}

static int read_things(const char *path, const char *storage)
{
    FILE *f = fopen(path, "r");
    char id[96], token[160];

    if (f == NULL || (mkdir(storage, 0700) != 0 && errno != EEXIST)) {
        if (f != NULL)
            fclose(f);
        return -1;
    }
    while (count < MAX_DEVICES && fscanf(f, "%95s %159s", id, token) == 2) {
        struct device *d = &devices[count];
        d->index = count;
        copy(d->thing_id, sizeof d->thing_id, id);
        copy(d->token, sizeof d->token, token);
        snprintf(d->dir, sizeof d->dir, "%s/d%04d", storage, count);
        copy(d->running, sizeof d->running, "1.0.0");
        copy(d->previous, sizeof d->previous, "1.0.0");
        if (mkdir(d->dir, 0700) != 0) {
            fclose(f);
            return -1;
        }
        count++;
    }
    fclose(f);
    return count;
}

/* Descriptors the process holds (a handle's socket, wake-up pipe, files). */
static int open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    int n = 0;

    if (dir == NULL)
        return -1;
    while (readdir(dir) != NULL)
        n++;
    closedir(dir);
    return n - 3; /* ".", ".." and the listing's own */
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    const char *things = NULL, *storage = NULL;
    struct sigaction sa = {.sa_handler = on_signal};
    int ready = 0, status = 0;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--things") == 0)
            things = argv[i + 1];
        else if (strcmp(argv[i], "--storage") == 0)
            storage = argv[i + 1];
        else if (strcmp(argv[i], "--trust") == 0)
            trust = argv[i + 1];
        else if (strcmp(argv[i], "--thing-type") == 0)
            thing_type = argv[i + 1];
        else if (strcmp(argv[i], "--bad-version") == 0)
            bad_version = argv[i + 1];
        else if (strcmp(argv[i], "--bad-every") == 0)
            bad_every = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--first") == 0)
            first = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "update_fleet: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (port <= 0 || things == NULL || storage == NULL || trust == NULL) {
        fprintf(stderr, "usage: update_fleet --port P --things FILE --storage DIR --trust FILE "
                        "[--thing-type T] [--bad-version V] [--bad-every K]\n");
        return 2;
    }
    if (read_things(things, storage) <= 0) {
        fprintf(stderr, "update_fleet: no devices from %s (or %s is not writable)\n", things, storage);
        return 1;
    }
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    for (int i = 0; i < count; i++) {
        int rc = boot(&devices[i]);
        if (rc != THINGIF_OK) {
            fprintf(stderr, "update_fleet: device %d (%s): %s\n", i, devices[i].thing_id, thingif_strerror(rc));
            return 1;
        }
    }

    while (!stop_requested) {
        int connected = 0;

        for (int i = 0; i < count; i++) {
            struct device *d = &devices[i];
            int st;

            if (atomic_exchange(&d->reboot, 0)) {
                int back = atomic_load(&d->rolled_back);
                if (shut(d) != THINGIF_OK)
                    status = 1;
                if (!back)
                    copy(d->running, sizeof d->running, d->installed);
                else
                    copy(d->running, sizeof d->running, d->previous);
                printf("fleet: reboot %d %s fds=%d\n", i, d->running, open_fds());
                if (boot(d) != THINGIF_OK) {
                    fprintf(stderr, "update_fleet: device %d did not boot again\n", i);
                    status = 1;
                    stop_requested = 1;
                    break;
                }
                continue;
            }
            connected += thingif_is_connected(d->t);
            if (!d->trial_told && thingif_update_status(d->t, &st, NULL, NULL) == THINGIF_OK &&
                st == THINGIF_UPDATE_TRIAL) {
                int bad = bad_every > 0 && (first + i) % bad_every == 0 && strcmp(d->running, bad_version) == 0;
                int rc = bad ? thingif_update_reject(d->t, "self-test failed") : thingif_update_confirm(d->t);
                if (rc == THINGIF_OK)
                    d->trial_told = 1;
            }
        }
        if (!ready && connected == count) {
            ready = 1;
            printf("fleet: ready %d fds=%d\n", count, open_fds());
        }
        fflush(stdout);
        nap_ms(20);
    }
    printf("fleet: stopping fds=%d\n", open_fds());
    for (int i = 0; i < count; i++)
        if (devices[i].t != NULL && shut(&devices[i]) != THINGIF_OK)
            status = 1;
    return status;
}
