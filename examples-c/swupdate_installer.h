/* SPDX-License-Identifier: Apache-2.0 */

/*
 * swupdate_installer.h - hands a verified update to SWUpdate, the installer
 * a firmware team may already run (docs/UPDATES.md, "A real installer:
 * SWUpdate"). The image libthingif fetched and checked (file mode) is a .swu:
 * this runs
 *
 *   swupdate -H aircon-sim:1.0 -k DIR/public.pem -e stable,copyN -i IMAGE
 *
 * as a child process (no shell), copy1 for slot A and copy2 for slot B, with
 * TMPDIR=DIR/tmp (where swupdate unpacks and makes its sockets), its output
 * in DIR/swupdate.log and its log lines on stdout. The loop polls it; when it
 * exits, done() gets its outcome: ok for exit status 0, else the status and
 * swupdate's first error line. swupdate checks the .swu itself: the CMS
 * signature of sw-description against DIR/public.pem, the hardware
 * revision, each image's sha256.
 */
#ifndef SWUPDATE_INSTALLER_H
#define SWUPDATE_INSTALLER_H

#include <stddef.h>

/* The hardware revision this board gives swupdate (-H); a .swu's
 * hardware-compatibility must list "1.0". */
#define SWUPDATE_HWREVISION "aircon-sim:1.0"

struct swupdate_installer;

/* swupdate ended: ok nonzero when it exited 0; message says why not. */
typedef void (*swupdate_done_fn)(int ok, const char *message, void *ctx);

/* The installer working in DIR (made, with DIR/tmp, when missing). NULL when
 * DIR cannot be used. */
struct swupdate_installer *swupdate_installer_new(const char *dir);
/* Starts swupdate on the .swu at image for slot ('a' or 'b') and returns
 * 0; done is called from swupdate_installer_poll(). -1 when it cannot start
 * (one runs already, no DIR/public.pem, the spawn failed): message, of size
 * bytes, says why. */
int swupdate_installer_start(struct swupdate_installer *s, const char *image, char slot, swupdate_done_fn done,
                             void *ctx, char *message, size_t size);
/* Each loop turn: passes swupdate's output on and, once it has exited,
 * calls done. Never blocks. */
void swupdate_installer_poll(struct swupdate_installer *s);
/* Stops a swupdate still running (SIGTERM, then waits for it) and frees. */
void swupdate_installer_free(struct swupdate_installer *s);

#endif
