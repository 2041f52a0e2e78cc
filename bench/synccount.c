/* SPDX-License-Identifier: Apache-2.0 */

/*
 * synccount.c - an LD_PRELOAD library for bench/compare.sh: counts a
 * process's fsync and fdatasync calls, the bytes it writes to regular
 * files and its heap allocations, in a small file the runner reads while
 * the process runs.
 *
 * THINGIF_SYNCCOUNT_FILE names the file: four native longs (syncs, bytes
 * written to regular files, write calls to them, malloc/calloc/realloc
 * calls), updated with atomics through a shared mapping.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static _Atomic long *counters; /* [0] syncs, [1] bytes, [2] writes, [3] allocations */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static _Atomic unsigned char fd_kind[4096]; /* 0 unknown, 1 regular file, 2 other */

__attribute__((constructor)) static void synccount_init(void)
{
    const char *path = getenv("THINGIF_SYNCCOUNT_FILE");
    int fd;
    void *p;

    if (!path)
        return;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    if (ftruncate(fd, 4 * sizeof(long)) == 0) {
        p = mmap(NULL, 4 * sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED)
            counters = p;
    }
    close(fd);
}

static int is_regular(int fd)
{
    struct stat st;
    unsigned char k;

    if (fd < 0 || fd >= 4096)
        return 0;
    k = atomic_load(&fd_kind[fd]);
    if (k == 0) {
        k = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? 1 : 2;
        atomic_store(&fd_kind[fd], k);
    }
    return k == 1;
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (counters)
        atomic_fetch_add(&counters[0], 1);
    return real(fd);
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (counters)
        atomic_fetch_add(&counters[0], 1);
    return real(fd);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    ssize_t rc;
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    rc = real(fd, buf, n);
    if (counters && rc > 0 && is_regular(fd)) {
        atomic_fetch_add(&counters[1], rc);
        atomic_fetch_add(&counters[2], 1);
    }
    return rc;
}

int close(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "close");
    if (fd >= 0 && fd < 4096)
        atomic_store(&fd_kind[fd], 0);
    return real(fd);
}

void *malloc(size_t n)
{
    if (counters)
        atomic_fetch_add(&counters[3], 1);
    return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
    if (counters)
        atomic_fetch_add(&counters[3], 1);
    return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
    if (counters)
        atomic_fetch_add(&counters[3], 1);
    return __libc_realloc(p, n);
}
