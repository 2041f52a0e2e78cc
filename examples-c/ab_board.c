/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ab_board.c - the simulated A/B board of ab_board.h. Its folder holds
 *
 *   bootenv        "active=a\ntry=b\nattempts=1\n": the good slot, the slot
 *                  on trial (or "-") and its boots so far
 *   slot-a.img     the images (slot A's missing: the factory image)
 *   slot-b.img
 *   slot-a.version the version each slot holds
 *   slot-b.version
 *
 * Every file is replaced atomically (a temporary file, fsync, rename), so a
 * power cut leaves the old file or the new one, as a real boot environment.
 * The slots are written by the board's own copy, or by another installer
 * (ab_board_use_installer: swupdate_installer.c with aircon --swupdate).
 */
#define _POSIX_C_SOURCE 200809L

#include "ab_board.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TRIAL_BOOTS 3
#define SLOT_BYTES (64L * 1024 * 1024)

struct ab_board {
    char dir[512];
    char active; /* the good slot, 'a' or 'b' */
    char trial;  /* the slot on trial, or 0 */
    int attempts;
    char booted; /* the slot running now */
    char version[65];
    int reboot;
    int checked;                 /* the self-test ran this boot */
    ab_board_install_fn install; /* another installer writes the slots, or NULL */
    void *install_ctx;
    thingif_t *t;     /* the handle an install runs for */
    char installing;  /* the slot it writes */
    char pending[65]; /* the version it brings */
};

static void path_of(const struct ab_board *b, char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", b->dir, name);
}

/* Replaces DIR/name with text, atomically. 0 or -1. */
static int write_file(const struct ab_board *b, const char *name, const void *bytes, size_t len)
{
    char path[600], tmp[610];
    int fd;

    path_of(b, path, sizeof path, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    if (write(fd, bytes, len) != (ssize_t)len || fsync(fd) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return rename(tmp, path);
}

static int save_env(const struct ab_board *b)
{
    char text[64];
    int n = snprintf(text, sizeof text, "active=%c\ntry=%c\nattempts=%d\n", b->active, b->trial ? b->trial : '-',
                     b->attempts);
    return write_file(b, "bootenv", text, (size_t)n);
}

static void read_version(struct ab_board *b, char slot, const char *factory)
{
    char path[600], name[32];
    FILE *f;

    snprintf(name, sizeof name, "slot-%c.version", slot);
    path_of(b, path, sizeof path, name);
    f = fopen(path, "r");
    if (f == NULL || fgets(b->version, sizeof b->version, f) == NULL)
        snprintf(b->version, sizeof b->version, "%s", factory);
    if (f)
        fclose(f);
    b->version[strcspn(b->version, "\r\n")] = '\0';
}

struct ab_board *ab_board_boot(const char *dir, const char *factory_version)
{
    struct ab_board *b = calloc(1, sizeof *b);
    char path[600], line[64];
    FILE *f;

    if (b == NULL)
        return NULL;
    snprintf(b->dir, sizeof b->dir, "%s", dir);
    b->active = 'a';
    path_of(b, path, sizeof path, "bootenv");
    f = fopen(path, "r");
    if (f != NULL) {
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "active=", 7) == 0 && (line[7] == 'a' || line[7] == 'b'))
                b->active = line[7];
            else if (strncmp(line, "try=", 4) == 0)
                b->trial = (line[4] == 'a' || line[4] == 'b') ? line[4] : 0;
            else if (strncmp(line, "attempts=", 9) == 0)
                b->attempts = atoi(line + 9);
        }
        fclose(f);
    }
    /* The bootloader: a slot on trial gets MAX_TRIAL_BOOTS boots, then the
     * good one runs again. */
    if (b->trial) {
        b->attempts++;
        if (b->attempts > MAX_TRIAL_BOOTS) {
            printf("board: slot %c booted %d times without being marked good: back to slot %c\n", b->trial,
                   b->attempts - 1, b->active);
            b->trial = 0;
            b->attempts = 0;
        }
        if (save_env(b) != 0) {
            free(b);
            return NULL;
        }
    }
    b->booted = b->trial ? b->trial : b->active;
    read_version(b, b->booted, factory_version);
    printf("board: booted slot %c (%s)%s\n", b->booted, b->version, b->trial ? ", on trial" : "");
    fflush(stdout);
    return b;
}

const char *ab_board_version(const struct ab_board *b)
{
    return b->version;
}

int ab_board_reboot_requested(const struct ab_board *b)
{
    return b->reboot;
}

void ab_board_free(struct ab_board *b)
{
    free(b);
}

static char other(char slot)
{
    return slot == 'a' ? 'b' : 'a';
}

static int on_offer(thingif_t *t, const thingif_update_info *info, char *message, size_t size, void *userdata)
{
    (void)t, (void)userdata;
    if (info->size > (uint64_t)SLOT_BYTES) {
        snprintf(message, size, "the image (%llu bytes) does not fit a slot of %ld", (unsigned long long)info->size,
                 SLOT_BYTES);
        return THINGIF_UPDATE_REFUSE;
    }
    printf("board: offered %s %s (%llu bytes): accepted\n", info->update_id, info->version,
           (unsigned long long)info->size);
    fflush(stdout);
    return THINGIF_UPDATE_ACCEPT;
}

void ab_board_use_installer(struct ab_board *b, ab_board_install_fn install, void *ctx)
{
    b->install = install;
    b->install_ctx = ctx;
}

int ab_board_installed(struct ab_board *b, int ok, const char *message)
{
    char name[32];

    if (b->t == NULL)
        return 1;
    snprintf(name, sizeof name, "slot-%c.version", b->installing);
    if (ok && write_file(b, name, b->pending, strlen(b->pending)) != 0) {
        ok = 0;
        message = "cannot record the slot's version";
    }
    if (ok) {
        printf("board: %s written to slot %c\n", b->pending, b->installing);
        fflush(stdout);
    }
    return thingif_update_installed(b->t, ok, ok ? NULL : message) == THINGIF_OK ? 0 : 1;
}

/* Copies the verified image into the other slot, then says it is done; or
 * starts the other installer. */
static int on_install(thingif_t *t, const thingif_update_info *info, void *userdata)
{
    struct ab_board *b = userdata;
    char slot = other(b->booted), name[32], buf[65536];
    FILE *in;
    int fd, ok = 1;
    size_t n;
    char path[600], tmp[610];

    b->t = t;
    b->installing = slot;
    snprintf(b->pending, sizeof b->pending, "%s", info->version);
    if (b->install != NULL)
        return b->install(b, info->image_path, slot, b->install_ctx);
    in = fopen(info->image_path, "rb");
    if (in == NULL)
        return 1;
    snprintf(name, sizeof name, "slot-%c.img", slot);
    path_of(b, path, sizeof path, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        fclose(in);
        return 1;
    }
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = write(fd, buf, n) == (ssize_t)n;
    ok = ok && !ferror(in) && fsync(fd) == 0;
    close(fd);
    fclose(in);
    ok = ok && rename(tmp, path) == 0;
    /* A real installer would return now and tell the outcome later, from
     * its own thread; this one is done already. */
    return ab_board_installed(b, ok, "cannot write the slot");
}

static void on_reboot(thingif_t *t, void *userdata)
{
    struct ab_board *b = userdata;
    (void)t;
    b->trial = other(b->booted);
    b->attempts = 0;
    if (save_env(b) != 0)
        fprintf(stderr, "board: cannot write the boot environment\n");
    printf("board: rebooting into slot %c\n", b->trial);
    fflush(stdout);
    b->reboot = 1;
}

static int on_commit(thingif_t *t, void *userdata)
{
    struct ab_board *b = userdata;
    (void)t;
    b->active = b->booted;
    b->trial = 0;
    b->attempts = 0;
    if (save_env(b) != 0)
        return 1;
    printf("board: slot %c (%s) marked good\n", b->active, b->version);
    fflush(stdout);
    return 0;
}

static void on_rollback(thingif_t *t, void *userdata)
{
    struct ab_board *b = userdata;
    (void)t;
    b->trial = 0;
    b->attempts = 0;
    if (save_env(b) != 0)
        fprintf(stderr, "board: cannot write the boot environment\n");
    printf("board: rolling back to slot %c\n", b->active);
    fflush(stdout);
    b->reboot = 1;
}

int ab_board_set_installer(struct ab_board *b, thingif_t *t, const char *thing_type, const char *trust_file)
{
    thingif_installer ops = {
        .offer = on_offer, .install = on_install, .reboot = on_reboot, .commit = on_commit, .rollback = on_rollback};
    thingif_update_config config = {.thing_type = thing_type,
                                    .running_version = b->version,
                                    .trust_file = trust_file,
                                    .max_trial_boots = MAX_TRIAL_BOOTS};
    return thingif_set_installer(t, &ops, &config, b);
}

void ab_board_check(struct ab_board *b, thingif_t *t)
{
    int status = 0;
    char path[600], name[32], head[16] = {0};
    FILE *f;

    if (b->checked || !thingif_is_connected(t) || thingif_update_status(t, &status, NULL, NULL) != THINGIF_OK ||
        status != THINGIF_UPDATE_TRIAL)
        return;
    b->checked = 1;
    snprintf(name, sizeof name, "slot-%c.img", b->booted);
    path_of(b, path, sizeof path, name);
    f = fopen(path, "rb");
    if (f != NULL) {
        if (fread(head, 1, 13, f) != 13)
            head[0] = '\0';
        fclose(f);
    }
    if (strncmp(head, "SELFTEST-FAIL", 13) == 0) {
        printf("board: self-test of %s failed\n", b->version);
        fflush(stdout);
        if (thingif_update_reject(t, "the self-test failed") != THINGIF_OK)
            fprintf(stderr, "board: thingif_update_reject refused\n");
    } else {
        printf("board: self-test of %s passed; confirming\n", b->version);
        fflush(stdout);
        if (thingif_update_confirm(t) != THINGIF_OK)
            fprintf(stderr, "board: thingif_update_confirm refused\n");
    }
}
