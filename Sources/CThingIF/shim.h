/* SPDX-License-Identifier: Apache-2.0 */

/* One C module for Swift: libmosquitto, jansson, libcrypto (crypto.h) and
 * the public header, so that json_t and the thingif types exist once.
 *
 * POSIX comes through this module too, never through `import Glibc`: the
 * Glibc overlay does not exist in Embedded Swift, so the core spells every
 * system call the same way in both modes. A macro (errno) or a variadic
 * function (open) cannot be imported by Embedded Swift; the tiny wrappers
 * below stand in for them, and read/write get wrappers so that a method of
 * the same name (Storage.read) does not shadow them. */
/* 64-bit file offsets and time_t on 32-bit glibc (armhf): without them,
 * open() refuses files past 2 GiB (EOVERFLOW/EFBIG) and clock_gettime()
 * fails in 2038. glibc then redirects open, stat and clock_gettime to
 * their 64-bit versions, which Swift calls through the same asm labels C
 * would. Only this module sees them: the public header thingif.h uses
 * neither off_t nor time_t. Only on 32-bit (ILP32) targets: on 64-bit ones
 * the sizes are already 64 bits, yet the macro renames types in the headers
 * (struct flock's l_start becomes __off64_t), and a Swift target that
 * imports this module and Glibc (the tests) then fails on two different
 * definitions of one struct. */
#if defined(__SIZEOF_LONG__) && __SIZEOF_LONG__ == 4
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif
#ifndef _TIME_BITS
#define _TIME_BITS 64
#endif
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <jansson.h>
#include "../../include/thingif.h"
/* OpenSSL's libcrypto: the thing's own TLS key and CSR (docs/SECURITY.md). */
#include "crypto.h"

static inline int thingif_sys_errno(void)
{
    return errno;
}

static inline int thingif_sys_open(const char *path, int flags, mode_t mode)
{
    return open(path, flags, mode);
}

static inline ssize_t thingif_sys_read(int fd, void *buf, size_t count)
{
    return read(fd, buf, count);
}

static inline ssize_t thingif_sys_write(int fd, const void *buf, size_t count)
{
    return write(fd, buf, count);
}

/* S_IFMT and friends are macros whose type differs between the Glibc overlay
 * (mode_t) and a plain import (int); the predicates have one type. */
static inline int thingif_sys_is_dir(mode_t mode)
{
    return S_ISDIR(mode);
}

static inline int thingif_sys_is_reg(mode_t mode)
{
    return S_ISREG(mode);
}

/* 1 when fd has bytes to read now (poll with no wait), else 0. */
static inline int thingif_sys_readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    return fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

/* The library's version: THINGIF_VERSION_STRING of the header, the one
 * place it is written (static storage, for thingif_version()). */
static inline const char *thingif_sys_version(void)
{
    return THINGIF_VERSION_STRING;
}
