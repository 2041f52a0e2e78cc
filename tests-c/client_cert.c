/* SPDX-License-Identifier: Apache-2.0 */

/* The thing's own TLS key and certificate files (docs/SECURITY.md), from C and on
 * every architecture (under qemu-user in a cross build), with no broker:
 *
 *  1. TLS set without a client certificate: thingif_onboard makes
 *     storage_dir/thing-key.pem (mode 0600, an EC P-256 key) before it
 *     connects; nothing listens on the port, so onboarding fails after it.
 *  2. A second onboarding reuses the key (the same bytes).
 *  3. identity.json as an onboarding with a signed certificate leaves it
 *     (the certificate made here with libcrypto for that key): onboarding
 *     from storage writes thing-cert.pem (0600, the same text), and a loop
 *     turn goes through the certificate path of the thing's connection
 *     (its broker port is closed: no connection, no crash).
 *  4. thing-key.pem gone: the loop logs why and does not connect, and
 *     onboarding from storage returns THINGIF_ERR_TLS.
 *  5. A claim certificate (fleet provisioning by claim): a handle without
 *     an app key; thingif_set_claim_certificate refuses a certificate
 *     whose CN is no claim name and a missing file, takes one of
 *     claim.APP.BATCH, and onboarding goes through the claim path of the
 *     bootstrap connection (the port is closed: it fails to connect).
 *
 * usage: client_cert PARENT_DIR   (a new storage folder is made in it;
 *                                  exit 0: pass, 1: fail) */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <thingif.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "client_cert: FAIL line %d: %s: ", __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static char logs[16384];

static void on_log(int level, const char *message, void *userdata)
{
    (void)level;
    (void)userdata;
    size_t used = strlen(logs);
    snprintf(logs + used, sizeof logs - used, "%s\n", message);
}

/* A whole small file as a malloc'ed string, or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 65536);
    size_t n = buf ? fread(buf, 1, 65535, f) : 0;
    fclose(f);
    if (buf && n == 0) {
        free(buf);
        buf = NULL;
    }
    return buf;
}

static unsigned file_mode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned)(st.st_mode & 0777) : 0;
}

/* A self-signed certificate (PEM) for the key in key_pem, CN = cn. */
static char *certificate_for(const char *key_pem, const char *cn)
{
    char *out = NULL;
    BIO *in = BIO_new_mem_buf(key_pem, -1);
    EVP_PKEY *key = in ? PEM_read_bio_PrivateKey(in, NULL, NULL, NULL) : NULL;
    X509 *cert = X509_new();
    BIO *pem = BIO_new(BIO_s_mem());
    if (key && cert && pem && X509_set_version(cert, 2) == 1 &&
        ASN1_INTEGER_set(X509_get_serialNumber(cert), 31) == 1 && X509_gmtime_adj(X509_getm_notBefore(cert), 0) &&
        X509_gmtime_adj(X509_getm_notAfter(cert), 86400) &&
        X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                   0) == 1 &&
        X509_set_issuer_name(cert, X509_get_subject_name(cert)) == 1 && X509_set_pubkey(cert, key) == 1 &&
        X509_sign(cert, key, EVP_sha256()) > 0 && PEM_write_bio_X509(pem, cert) == 1) {
        char *data = NULL;
        long n = BIO_get_mem_data(pem, &data);
        out = calloc(1, (size_t)n + 1);
        if (out)
            memcpy(out, data, (size_t)n);
    }
    BIO_free(pem);
    X509_free(cert);
    EVP_PKEY_free(key);
    BIO_free(in);
    return out;
}

static thingif_t *open_thing(const char *storage, const char *cafile)
{
    thingif_t *t = thingif_new("appcert", "keycert", storage);
    if (!t)
        return NULL;
    logs[0] = '\0';
    /* A closed local port: every connection attempt fails at once. */
    if (thingif_set_log_callback(t, on_log, THINGIF_LOG_DEBUG, NULL) != THINGIF_OK ||
        thingif_set_broker(t, "127.0.0.1", 1) != THINGIF_OK || thingif_set_tls(t, cafile, NULL, NULL) != THINGIF_OK ||
        thingif_set_option(t, THINGIF_OPT_REQUEST_TIMEOUT_MS, 2000) != THINGIF_OK) {
        if (thingif_destroy(t) != THINGIF_OK)
            fprintf(stderr, "client_cert: thingif_destroy failed\n");
        return NULL;
    }
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: client_cert PARENT_DIR\n");
        return 2;
    }
    char storage[4096], cafile[4200], key_path[4200], cert_path[4200], identity_path[4200];
    mkdir(argv[1], 0700);
    snprintf(storage, sizeof storage, "%s/client-cert.XXXXXX", argv[1]);
    if (!mkdtemp(storage)) {
        perror("client_cert: mkdtemp");
        return 2;
    }
    printf("client_cert: storage %s\n", storage);
    snprintf(cafile, sizeof cafile, "%s/ca.pem", argv[1]);
    snprintf(key_path, sizeof key_path, "%s/thing-key.pem", storage);
    snprintf(cert_path, sizeof cert_path, "%s/thing-cert.pem", storage);
    snprintf(identity_path, sizeof identity_path, "%s/identity.json", storage);
    FILE *f = fopen(cafile, "w"); /* read by libmosquitto only at a TLS handshake, which never comes */
    if (!f || fputs("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n", f) < 0 || fclose(f) != 0) {
        perror("client_cert: ca.pem");
        return 2;
    }

    /* 1. The key is made before the bootstrap connection fails. */
    thingif_t *t = open_thing(storage, cafile);
    if (!t) {
        fprintf(stderr, "client_cert: FAIL: cannot make a handle on %s\n", storage);
        return 1;
    }
    int rc = thingif_onboard(t, "AC-CERT", "password-1", NULL, NULL, NULL);
    CHECK(rc == THINGIF_ERR_CONNECT || rc == THINGIF_ERR_TLS, "onboarding: %s", thingif_strerror(rc));
    CHECK(file_mode(key_path) == 0600, "thing-key.pem mode %o", file_mode(key_path));
    char *key = slurp(key_path);
    CHECK(key && strstr(key, "-----BEGIN PRIVATE KEY-----"), "thing-key.pem: %s", key ? key : "(none)");
    BIO *bio = key ? BIO_new_mem_buf(key, -1) : NULL;
    EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    char group[32] = "";
    size_t group_len = 0;
    CHECK(pkey && EVP_PKEY_get_group_name(pkey, group, sizeof group, &group_len) == 1 &&
              strcmp(group, "prime256v1") == 0,
          "thing-key.pem is no P-256 key (%s)", group);
    EVP_PKEY_free(pkey);
    BIO_free(bio);
    CHECK(strstr(logs, "made a new TLS client key (EC P-256)"), "logs:\n%s", logs);

    /* 2. Reused. */
    rc = thingif_onboard(t, "AC-CERT", "password-1", NULL, NULL, NULL);
    CHECK(rc != THINGIF_OK, "onboarding without a broker: %s", thingif_strerror(rc));
    char *again = slurp(key_path);
    CHECK(key && again && strcmp(key, again) == 0, "thing-key.pem was replaced");
    free(again);
    CHECK(thingif_destroy(t) == THINGIF_OK, "destroy");

    /* 3. A stored onboarding with a certificate for that key. */
    char *cert = key ? certificate_for(key, "topic-cert") : NULL;
    CHECK(cert != NULL, "cannot make a certificate");
    json_t *identity =
        json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:i, s:s}}", "appID", "appcert",
                  "vendorThingID", "AC-CERT", "thingID", "th.cert", "accessToken", "token", "mqttEndpoint",
                  "installationID", "inst-cert", "host", "127.0.0.1", "portTCP", 0, "portSSL", 1, "username", "",
                  "password", "", "mqttTopic", "topic-cert", "ttl", 3600, "clientCertificate", cert ? cert : "");
    CHECK(identity && json_dump_file(identity, identity_path, 0) == 0, "cannot write identity.json");
    json_decref(identity);
    t = open_thing(storage, cafile);
    if (!t) {
        fprintf(stderr, "client_cert: FAIL: cannot make a handle on %s\n", storage);
        return 1;
    }
    rc = thingif_onboard(t, "AC-CERT", "password-1", NULL, NULL, NULL);
    CHECK(rc == THINGIF_OK, "onboarding from storage: %s\nlogs:\n%s", thingif_strerror(rc), logs);
    CHECK(file_mode(cert_path) == 0600, "thing-cert.pem mode %o", file_mode(cert_path));
    char *written = slurp(cert_path);
    CHECK(cert && written && strcmp(cert, written) == 0, "thing-cert.pem differs from the certificate");
    free(written);
    rc = thingif_loop(t, 0);
    CHECK(rc == THINGIF_ERR_NO_CONN, "loop: %s", thingif_strerror(rc));
    CHECK(strstr(logs, "authenticates with the client certificate"), "logs:\n%s", logs);
    CHECK(thingif_destroy(t) == THINGIF_OK, "destroy");

    /* 4. The key gone: the loop says why and never connects; onboarding
     * from storage refuses. */
    unlink(key_path);
    t = open_thing(storage, cafile);
    if (!t) {
        fprintf(stderr, "client_cert: FAIL: cannot make a handle on %s\n", storage);
        return 1;
    }
    rc = thingif_use_onboarded(t, "th.cert", "token"); /* the stored identity, no check of its files */
    CHECK(rc == THINGIF_OK, "use_onboarded: %s", thingif_strerror(rc));
    rc = thingif_loop(t, 0);
    CHECK(rc == THINGIF_ERR_NO_CONN, "loop: %s", thingif_strerror(rc));
    CHECK(strstr(logs, "is missing or holds no EC P-256 key: the thing cannot connect"), "logs:\n%s", logs);
    CHECK(!strstr(logs, "connecting to"), "the thing tried to connect:\n%s", logs);
    rc = thingif_onboard(t, "AC-CERT", "password-1", NULL, NULL, NULL);
    CHECK(rc == THINGIF_ERR_TLS, "onboarding without the key: %s", thingif_strerror(rc));
    CHECK(strstr(logs, "Delete ") && strstr(logs, "identity.json and onboard again"), "logs:\n%s", logs);
    CHECK(thingif_destroy(t) == THINGIF_OK, "destroy");

    /* 5. A claim certificate, no app key. */
    char claim_cert[4200], claim_key[4200], thing_cert[4200];
    snprintf(claim_cert, sizeof claim_cert, "%s/claim.crt", argv[1]);
    snprintf(claim_key, sizeof claim_key, "%s/claim.key", argv[1]);
    snprintf(thing_cert, sizeof thing_cert, "%s/not-claim.crt", argv[1]);
    char *claim = key ? certificate_for(key, "claim.appcert.line-7") : NULL;
    FILE *cf = fopen(claim_cert, "w"), *kf = fopen(claim_key, "w"), *tf = fopen(thing_cert, "w");
    CHECK(claim && cert && key && cf && kf && tf && fputs(claim, cf) >= 0 && fputs(key, kf) >= 0 &&
              fputs(cert, tf) >= 0,
          "cannot write the claim files");
    if (cf)
        fclose(cf);
    if (kf)
        fclose(kf);
    if (tf)
        fclose(tf);
    t = thingif_new("appcert", NULL, storage);
    CHECK(t != NULL, "thingif_new without an app key");
    if (t) {
        logs[0] = '\0';
        CHECK(thingif_set_log_callback(t, on_log, THINGIF_LOG_DEBUG, NULL) == THINGIF_OK, "log callback");
        CHECK(thingif_set_claim_certificate(NULL, claim_cert, claim_key) == THINGIF_ERR_INVALID, "NULL handle");
        CHECK(thingif_set_claim_certificate(t, claim_cert, NULL) == THINGIF_ERR_INVALID, "no key");
        CHECK(thingif_set_claim_certificate(t, thing_cert, claim_key) == THINGIF_ERR_TLS, "a thing's CN");
        CHECK(strstr(logs, "no readable claim certificate"), "logs:\n%s", logs);
        CHECK(thingif_set_claim_certificate(t, claim_cert, "/nonexistent/claim.key") == THINGIF_ERR_TLS,
              "a missing key");
        CHECK(thingif_set_claim_certificate(t, claim_cert, claim_key) == THINGIF_OK, "a claim: %s", logs);
        CHECK(thingif_set_broker(t, "127.0.0.1", 1) == THINGIF_OK, "broker");
        /* Without TLS the claim cannot be used. */
        unlink(identity_path);
        rc = thingif_onboard(t, "AC-CLAIM", "password-1", NULL, NULL, NULL);
        CHECK(rc == THINGIF_ERR_TLS && strstr(logs, "a claim certificate needs TLS"), "no TLS: %s\nlogs:\n%s",
              thingif_strerror(rc), logs);
        CHECK(thingif_set_tls(t, cafile, NULL, NULL) == THINGIF_OK, "tls");
        CHECK(thingif_set_option(t, THINGIF_OPT_REQUEST_TIMEOUT_MS, 2000) == THINGIF_OK, "timeout");
        rc = thingif_onboard(t, "AC-CLAIM", "password-1", NULL, NULL, NULL);
        CHECK(rc == THINGIF_ERR_CONNECT || rc == THINGIF_ERR_TLS, "claim onboarding: %s", thingif_strerror(rc));
        CHECK(thingif_set_claim_certificate(t, NULL, NULL) == THINGIF_OK, "clearing the claim");
        CHECK(thingif_destroy(t) == THINGIF_OK, "destroy");
    }
    free(claim);

    free(cert);
    free(key);
    if (failures) {
        fprintf(stderr, "client_cert: %d failures\n", failures);
        return 1;
    }
    printf("client_cert: ok\n");
    return 0;
}
