/* SPDX-License-Identifier: Apache-2.0 */

/*
 * latency.h - what bench/loadgen.c and bench/driver.c share: the clock and
 * the round-trip statistics of a run (per command: sent_at, done_at; 0 for
 * one with no results).
 */
#ifndef THINGIF_BENCH_LATENCY_H
#define THINGIF_BENCH_LATENCY_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The p-th percentile of n sorted values. */
static double pct(const double *sorted, int n, double p)
{
    int i = (int)(p / 100.0 * n + 0.5) - 1;
    if (n == 0)
        return 0;
    return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* Fills lat with the sorted round trips (times `unit`) of the commands that
 * finished, sets *t_last to the last finish; returns how many finished. */
static int round_trips(const double *sent_at, const double *done_at, int n, double unit, double *lat, double *t_last)
{
    int i, ok = 0;
    for (i = 0; i < n; i++) {
        if (done_at[i] == 0)
            continue;
        lat[ok++] = (done_at[i] - sent_at[i]) * unit;
        if (done_at[i] > *t_last)
            *t_last = done_at[i];
    }
    qsort(lat, (size_t)ok, sizeof *lat, cmp_double);
    return ok;
}

/* The index i of an action-results request's command "TAG-i" (topic
 * …/commands/TAG-i/action-results), or -1 for any other topic. */
static long command_index(const char *topic, const char *tag, long n)
{
    const char *c = strstr(topic, "/commands/"), *end;
    size_t taglen = strlen(tag);
    char *stop;
    long idx;

    if (!c || !strstr(topic, "/action-results"))
        return -1;
    c += strlen("/commands/");
    end = strchr(c, '/');
    if (!end || strncmp(c, tag, taglen) != 0 || c[taglen] != '-')
        return -1;
    idx = strtol(c + taglen + 1, &stop, 10);
    return stop == end && idx >= 0 && idx < n ? idx : -1;
}

#endif
