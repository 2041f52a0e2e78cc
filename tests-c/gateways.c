/* SPDX-License-Identifier: Apache-2.0 */

/*
 * gateways.c - what the build option THINGIF_GATEWAYS gives (CMake's
 * -DTHINGIF_GATEWAYS=ON, the default, or OFF): with it a handle becomes a
 * gateway and its end-node calls do their work; without it every gateway
 * call is still exported and answers THINGIF_ERR_UNSUPPORTED, which is how
 * firmware tells such a build (include/thingif.h, group "Gateways and end
 * nodes"). No broker: a handle that is not onboarded.
 *
 * usage: gateways STORAGE_DIR BUILT   (BUILT 1 or 0: what the build says)
 */
#include "thingif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void expect(int got, int want, const char *what)
{
    if (got != want) {
        fprintf(stderr, "gateways: %s gave %d (%s), expected %d (%s)\n", what, got, thingif_strerror(got), want,
                thingif_strerror(want));
        failures++;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gateways STORAGE_DIR BUILT\n");
        return 2;
    }
    int built = strcmp(argv[2], "1") == 0;
    thingif_t *t = thingif_new("app", "key", argv[1]);
    if (!t) {
        fprintf(stderr, "gateways: thingif_new failed\n");
        return 1;
    }
    expect(thingif_set_layout_position(t, THINGIF_LAYOUT_STANDALONE), THINGIF_OK, "layout STANDALONE");
    expect(thingif_set_layout_position(t, THINGIF_LAYOUT_GATEWAY), built ? THINGIF_OK : THINGIF_ERR_UNSUPPORTED,
           "layout GATEWAY");
    expect(thingif_end_node_add(t, "LAMP-1", "pw", NULL, NULL, NULL),
           built ? THINGIF_ERR_NOT_ONBOARDED : THINGIF_ERR_UNSUPPORTED, "thingif_end_node_add");
    expect(thingif_end_node_set_online(t, "LAMP-1", 1), built ? THINGIF_ERR_NOT_FOUND : THINGIF_ERR_UNSUPPORTED,
           "thingif_end_node_set_online");
    expect(thingif_end_node_thing_id(t, "LAMP-1") == NULL, 1, "thingif_end_node_thing_id is NULL");
    expect(thingif_end_node_add(t, NULL, "pw", NULL, NULL, NULL), THINGIF_ERR_INVALID, "thingif_end_node_add(NULL)");
    expect(thingif_destroy(t), THINGIF_OK, "thingif_destroy");
    if (failures == 0)
        printf("gateways: %s as built (THINGIF_GATEWAYS=%s)\n", built ? "gateway calls work" : "gateway calls refused",
               built ? "ON" : "OFF");
    return failures ? 1 : 0;
}
