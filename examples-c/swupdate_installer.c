/* SPDX-License-Identifier: Apache-2.0 */

/*
 * swupdate_installer.c - the installer of swupdate_installer.h: swupdate as
 * a child process, started with posix_spawnp (fork and exec, no shell: every
 * argument is one argv entry as it is), its stdout and stderr on a pipe the
 * loop reads without blocking.
 */
#define _POSIX_C_SOURCE 200809L

#include "swupdate_installer.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define LINE_BYTES 512
#define REASON_BYTES 200
/* After swupdate has exited, how long a process it left may hold the pipe
 * open before its output is taken as complete. */
#define DRAIN_MS 2000

struct swupdate_installer {
    char dir[400];
    pid_t pid;              /* the running swupdate, or 0 */
    int exited;             /* it was reaped; its output is being drained */
    int status;             /* its wait status then */
    struct timespec reaped; /* when (CLOCK_MONOTONIC) */
    int out;                /* the read end of its stdout and stderr, or -1 */
    FILE *log;              /* DIR/swupdate.log */
    swupdate_done_fn done;
    void *ctx;
    char line[LINE_BYTES]; /* the line being read */
    size_t len;
    char first_error[REASON_BYTES]; /* swupdate's first error line: the cause */
    char last[REASON_BYTES];        /* its last line */
};

struct swupdate_installer *swupdate_installer_new(const char *dir)
{
    struct swupdate_installer *s;
    char tmp[420];

    if (dir == NULL || strlen(dir) >= sizeof s->dir - 20)
        return NULL;
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(tmp, sizeof tmp, "%s/tmp", dir);
    if ((mkdir(dir, 0700) != 0 && errno != EEXIST) || (mkdir(tmp, 0700) != 0 && errno != EEXIST)) {
        free(s);
        return NULL;
    }
    s->out = -1;
    return s;
}

/* Copies text into out (size bytes), control bytes as '?'. */
static void copy_printable(char *out, size_t size, const char *text)
{
    size_t i;

    for (i = 0; i + 1 < size && text[i] != '\0'; i++)
        out[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
    out[i] = '\0';
}

/* One line of swupdate's output: to the log, to stdout unless a trace, and
 * kept as the reason when it is the first error. */
static void take_line(struct swupdate_installer *s, char *line)
{
    const char *why;

    copy_printable(line, strlen(line) + 1, line);
    if (s->log != NULL)
        fprintf(s->log, "%s\n", line);
    if (line[0] == '\0')
        return;
    if (line[0] == '[' && strncmp(line, "[TRACE]", 7) != 0) {
        printf("board: swupdate: %s\n", line);
        fflush(stdout);
    }
    /* Its banner is no reason. */
    if (strncmp(line, "SWUpdate v", 10) != 0 && strncmp(line, "Licensed under", 14) != 0)
        copy_printable(s->last, sizeof s->last, line);
    if (strncmp(line, "[ERROR]", 7) == 0 && s->first_error[0] == '\0') {
        /* "[ERROR] : SWUPDATE failed [0] ERROR : HASH mismatch : …" */
        why = strstr(line, "] ERROR : ");
        why = why != NULL ? why + 10 : line;
        copy_printable(s->first_error, sizeof s->first_error, why);
    }
}

/* Reads what the pipe holds now; 1 at its end (or on an error), else 0. */
static int read_output(struct swupdate_installer *s)
{
    char buf[4096];
    ssize_t n, i;

    for (;;) {
        n = read(s->out, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : 1;
        if (n == 0)
            return 1;
        for (i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                s->line[s->len] = '\0';
                take_line(s, s->line);
                s->len = 0;
            } else if (s->len + 1 < sizeof s->line) {
                s->line[s->len++] = buf[i]; /* a longer line is cut */
            }
        }
    }
}

int swupdate_installer_start(struct swupdate_installer *s, const char *image, char slot, swupdate_done_fn done,
                             void *ctx, char *message, size_t size)
{
    char key[420], tmpdir[430], logpath[420];
    const char *selection = slot == 'a' ? "stable,copy1" : "stable,copy2";
    char *argv[] = {"swupdate",        "-H", SWUPDATE_HWREVISION, "-k", key, "-e",
                    (char *)selection, "-i", (char *)image,       NULL};
    char **envp;
    size_t n = 0, i, j = 0;
    int fds[2], rc;
    posix_spawn_file_actions_t actions;

    if (s->pid > 0) {
        snprintf(message, size, "swupdate runs already");
        return -1;
    }
    if (image == NULL || (slot != 'a' && slot != 'b') || done == NULL) {
        snprintf(message, size, "no image or no slot to install into");
        return -1;
    }
    snprintf(key, sizeof key, "%s/public.pem", s->dir);
    snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s/tmp", s->dir);
    snprintf(logpath, sizeof logpath, "%s/swupdate.log", s->dir);
    if (access(key, R_OK) != 0) {
        snprintf(message, size, "no certificate to check the update with: %s: %s", key, strerror(errno));
        return -1;
    }
    /* The environment as it is, TMPDIR set to swupdate's own folder: it
     * unpacks there and removes what it unpacked. */
    while (environ != NULL && environ[n] != NULL)
        n++;
    envp = calloc(n + 2, sizeof *envp);
    if (envp == NULL) {
        snprintf(message, size, "out of memory");
        return -1;
    }
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "TMPDIR=", 7) != 0)
            envp[j++] = environ[i];
    envp[j] = tmpdir;
    if (pipe(fds) != 0) {
        snprintf(message, size, "pipe: %s", strerror(errno));
        free(envp);
        return -1;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    rc = posix_spawnp(&s->pid, "swupdate", &actions, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    free(envp);
    close(fds[1]);
    if (rc != 0) {
        s->pid = 0;
        close(fds[0]);
        snprintf(message, size, "cannot start swupdate: %s", strerror(rc));
        return -1;
    }
    s->out = fds[0];
    s->log = fopen(logpath, "w");
    s->done = done;
    s->ctx = ctx;
    s->len = 0;
    s->first_error[0] = s->last[0] = '\0';
    printf("board: swupdate -H %s -k %s -e %s -i %s (pid %ld)\n", SWUPDATE_HWREVISION, key, selection, image,
           (long)s->pid);
    fflush(stdout);
    return 0;
}

static long ms_since(const struct timespec *then)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)(now.tv_sec - then->tv_sec) * 1000 + (now.tv_nsec - then->tv_nsec) / 1000000;
}

void swupdate_installer_poll(struct swupdate_installer *s)
{
    char message[300];
    int ok, status, ended;
    pid_t r;

    if (s == NULL || s->pid <= 0)
        return;
    ended = read_output(s);
    if (!s->exited) {
        r = waitpid(s->pid, &s->status, WNOHANG);
        if (r == 0 || (r < 0 && errno == EINTR))
            return;
        if (r < 0)
            s->status = -1; /* lost: not our child any more */
        s->exited = 1;
        clock_gettime(CLOCK_MONOTONIC, &s->reaped);
        ended = read_output(s);
    }
    /* It has exited: its output is complete at the pipe's end, or once a
     * process it left running has held the pipe for DRAIN_MS (one of its
     * helpers may write the last line after it exited). */
    if (!ended && ms_since(&s->reaped) < DRAIN_MS)
        return;
    if (s->len > 0) {
        s->line[s->len] = '\0';
        take_line(s, s->line);
        s->len = 0;
    }
    close(s->out);
    s->out = -1;
    if (s->log != NULL)
        fclose(s->log);
    s->log = NULL;
    s->pid = 0;
    s->exited = 0;
    status = s->status;
    ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok)
        snprintf(message, sizeof message, "swupdate exited 0");
    else if (status != -1 && WIFEXITED(status))
        snprintf(message, sizeof message, "swupdate exited %d: %s", WEXITSTATUS(status),
                 s->first_error[0] ? s->first_error
                 : s->last[0]      ? s->last
                                   : "no output");
    else if (status != -1 && WIFSIGNALED(status))
        snprintf(message, sizeof message, "swupdate was killed by signal %d", WTERMSIG(status));
    else
        snprintf(message, sizeof message, "swupdate was lost");
    printf("board: %s\n", message);
    fflush(stdout);
    s->done(ok, message, s->ctx);
}

void swupdate_installer_free(struct swupdate_installer *s)
{
    if (s == NULL)
        return;
    if (s->pid > 0 && !s->exited) {
        kill(s->pid, SIGTERM);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (s->out >= 0)
        close(s->out);
    if (s->log != NULL)
        fclose(s->log);
    free(s);
}
