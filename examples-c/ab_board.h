/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ab_board.h - a simulated A/B board for the update examples: two slot
 * files, a boot environment with an attempt counter, and a bootloader that
 * falls back to the good slot when the new one has booted too often without
 * being marked good. "Reboot" is the program exiting with AB_BOARD_REBOOT
 * (the demo starts it again). Its installer hands libthingif's file-mode
 * image to the other slot (include/thingif.h, group "Firmware updates").
 */
#ifndef AB_BOARD_H
#define AB_BOARD_H

#include <thingif.h>

/* The exit status that means "reboot me". */
#define AB_BOARD_REBOOT 3

struct ab_board;

/* The bootloader: reads DIR/bootenv, counts a trial boot, falls back after
 * 3, and picks the slot to run. factory_version is slot A's version before
 * any update. NULL when DIR cannot be used. */
struct ab_board *ab_board_boot(const char *dir, const char *factory_version);
/* The version the booted slot holds. */
const char *ab_board_version(const struct ab_board *b);
/* Writes the verified image (file mode, at image_path) into slot ('a' or
 * 'b') with another installer than the board's copy, and returns 0 once it
 * has started, nonzero when it cannot start; the outcome goes to
 * ab_board_installed(). */
typedef int (*ab_board_install_fn)(struct ab_board *b, const char *image_path, char slot, void *ctx);
/* Before ab_board_set_installer: the board's slots are written by install. */
void ab_board_use_installer(struct ab_board *b, ab_board_install_fn install, void *ctx);
/* install's outcome, from the thread that learnt it: the slot's version is
 * recorded when ok, then libthingif told (thingif_update_installed). */
int ab_board_installed(struct ab_board *b, int ok, const char *message);
/* thingif_set_installer with the board's installer. */
int ab_board_set_installer(struct ab_board *b, thingif_t *t, const char *thing_type, const char *trust_file);
/* Each loop turn: in a trial boot, once connected, the self-test (an image
 * that starts with "SELFTEST-FAIL" fails it) and its verdict. */
void ab_board_check(struct ab_board *b, thingif_t *t);
/* A reboot was asked for: the caller stops and exits AB_BOARD_REBOOT. */
int ab_board_reboot_requested(const struct ab_board *b);
void ab_board_free(struct ab_board *b);

#endif
