/* SPDX-License-Identifier: Apache-2.0 */

/*
 * updates.c - what the build option THINGIF_UPDATES gives (CMake's
 * -DTHINGIF_UPDATES=ON, the default, or OFF): with it the installer's calls
 * check their arguments and do their work; without it every update call is
 * still exported and answers THINGIF_ERR_UNSUPPORTED (include/thingif.h,
 * group "Firmware updates"). No broker: a handle that is not onboarded.
 *
 * usage: updates STORAGE_DIR BUILT   (BUILT 1 or 0: what the build says)
 */
#include "thingif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void expect(int got, int want, const char *what)
{
    if (got != want) {
        fprintf(stderr, "updates: %s gave %d (%s), expected %d (%s)\n", what, got, thingif_strerror(got), want,
                thingif_strerror(want));
        failures++;
    }
}

static int offer(thingif_t *t, const thingif_update_info *info, char *message, size_t size, void *ud)
{
    (void)t, (void)info, (void)message, (void)size, (void)ud;
    return THINGIF_UPDATE_REFUSE;
}
static int install(thingif_t *t, const thingif_update_info *info, void *ud)
{
    (void)t, (void)info, (void)ud;
    return 1;
}
static void reboot(thingif_t *t, void *ud)
{
    (void)t, (void)ud;
}
static int commit(thingif_t *t, void *ud)
{
    (void)t, (void)ud;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: updates STORAGE_DIR BUILT\n");
        return 2;
    }
    int built = strcmp(argv[2], "1") == 0;
    thingif_t *t = thingif_new("app", "key", argv[1]);
    if (!t) {
        fprintf(stderr, "updates: thingif_new failed\n");
        return 1;
    }
    char trust[4096];
    snprintf(trust, sizeof trust, "%s/trust.json", argv[1]);
    FILE *f = fopen(trust, "w");
    if (!f) {
        fprintf(stderr, "updates: cannot write %s\n", trust);
        return 1;
    }
    /* A key of its form: the trust file is read at thingif_set_installer. */
    fputs("{\"keys\":[{\"kid\":\"fw-1\",\"publicKey\":\"-----BEGIN PUBLIC KEY-----\\n"
          "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAExC7Y3LPOK6xYq2hTb3FedWGDvuRn\\n"
          "T3UP9PUlV6aS8IiEVcUITXXVV3SWD3aVME2CXC/uElQc7Wd9neskcfG9KQ==\\n"
          "-----END PUBLIC KEY-----\\n\"}]}",
          f);
    fclose(f);
    thingif_installer ops = {offer, NULL, NULL, install, reboot, commit, reboot};
    thingif_update_config config = {"AirConditioner", "1.0.0", trust, 0};
    int status = -1;
    int unsupported = built ? THINGIF_ERR_STATE : THINGIF_ERR_UNSUPPORTED;
    expect(thingif_update_status(t, &status, NULL, NULL), unsupported, "thingif_update_status before an installer");
    expect(thingif_set_installer(t, NULL, &config, NULL), built ? THINGIF_ERR_INVALID : THINGIF_ERR_UNSUPPORTED,
           "thingif_set_installer(NULL)");
    int rc = thingif_set_installer(t, &ops, &config, NULL);
    expect(rc, built ? THINGIF_OK : THINGIF_ERR_UNSUPPORTED, "thingif_set_installer");
    if (built && rc != THINGIF_OK)
        fprintf(stderr, "updates: (the trust file's key may not parse: %s)\n", trust);
    expect(thingif_update_status(t, &status, NULL, NULL), built ? THINGIF_OK : THINGIF_ERR_UNSUPPORTED,
           "thingif_update_status");
    if (built)
        expect(status, THINGIF_UPDATE_NONE, "the status of no job");
    expect(thingif_update_confirm(t), unsupported, "thingif_update_confirm without a trial");
    expect(thingif_update_installed(t, 1, NULL), unsupported, "thingif_update_installed without an install");
    expect(thingif_destroy(t), THINGIF_OK, "thingif_destroy");
    if (failures == 0)
        printf("updates: %s as built (THINGIF_UPDATES=%s)\n", built ? "update calls work" : "update calls refused",
               built ? "ON" : "OFF");
    return failures ? 1 : 0;
}
