/* SPDX-License-Identifier: Apache-2.0 */

/* The thing's own TLS client key and its certificate signing request
 * (docs/SECURITY.md), with OpenSSL's libcrypto, which libmosquitto already loads
 * wherever TLS is used. Included by shim.h; Swift sees EVP_PKEY * as an
 * OpaquePointer, but no key crosses into Swift: it sees PEM bytes only
 * (Sources/ThingIF/Device/ClientCertificate.swift).
 *
 * The functions Swift calls leave OpenSSL's per-thread error queue empty, so that a
 * failure here never shows up later in libmosquitto's TLS error lines.
 * Strings returned are malloc'ed and NUL-terminated: release them with
 * thingif_crypto_free_text(), which wipes them first (a key is secret). */
#ifndef THINGIF_CRYPTO_H
#define THINGIF_CRYPTO_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

/* Never ask for a pass phrase (OpenSSL's default callback reads the
 * terminal): an encrypted key file is simply not usable. */
static inline int thingif_crypto_no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* 1 when key is an EC key on P-256, else 0: "prime256v1" is the group
 * of no other key type. */
static inline int thingif_crypto_key_is_p256(EVP_PKEY *key)
{
    char group[32];
    size_t len = 0;
    return key != NULL && EVP_PKEY_get_group_name(key, group, sizeof group, &len) == 1 &&
           strcmp(group, "prime256v1") == 0;
}

/* Wipes and frees a string of these functions (NULL: nothing). The empty
 * asm that reads the memory keeps the compiler from dropping the memset. */
static inline void thingif_crypto_free_text(char *text)
{
    if (text) {
        memset(text, 0, strlen(text));
        __asm__ __volatile__("" : : "r"(text) : "memory");
        free(text);
    }
}

/* The private key in len bytes of PEM, when it is an unencrypted EC P-256
 * key; else NULL. */
static inline EVP_PKEY *thingif_crypto_key_load(const void *pem, size_t len)
{
    EVP_PKEY *key = NULL;
    BIO *bio = pem && len <= INT_MAX ? BIO_new_mem_buf(pem, (int)len) : NULL;
    if (bio)
        key = PEM_read_bio_PrivateKey(bio, NULL, thingif_crypto_no_passphrase, NULL);
    BIO_free(bio);
    if (key && !thingif_crypto_key_is_p256(key)) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    return key;
}

/* What a memory BIO holds, as a malloc'ed C string; NULL when empty. */
static inline char *thingif_crypto_bio_text(BIO *bio)
{
    char *data = NULL;
    long n = BIO_get_mem_data(bio, &data);
    char *out = n > 0 && data ? malloc((size_t)n + 1) : NULL;
    if (out) {
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
    }
    return out;
}

/* A PKCS#10 request (PEM) for the key in key_pem (key_len bytes), subject
 * CN = common_name (UTF-8, at most 64 characters, X.520's bound), signed by
 * the key with SHA-256; NULL on failure. When key_pem is NULL or holds no
 * unencrypted EC P-256 key, a new key is made and its PEM (PKCS#8,
 * unencrypted) goes to *new_key for the caller to store; else *new_key is
 * NULL. Both strings are released with thingif_crypto_free_text(). */
static inline char *thingif_crypto_csr(const void *key_pem, size_t key_len, const char *common_name, char **new_key)
{
    char *out = NULL;
    EVP_PKEY *key = thingif_crypto_key_load(key_pem, key_len);
    X509_REQ *req = X509_REQ_new();
    /* Secure memory BIOs: wiped when freed. */
    BIO *bio = BIO_new(BIO_s_secmem());
    BIO *key_bio = NULL;
    *new_key = NULL;
    if (!key) {
        key = EVP_EC_gen("P-256");
        key_bio = BIO_new(BIO_s_secmem());
        if (key && key_bio && PEM_write_bio_PrivateKey(key_bio, key, NULL, NULL, 0, NULL, NULL) == 1)
            *new_key = thingif_crypto_bio_text(key_bio);
        if (!*new_key) {
            EVP_PKEY_free(key);
            key = NULL;
        }
    }
    /* A new request has version 0 (PKCS#10 v1), the only one. */
    if (key && req && bio &&
        X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(req), "CN", MBSTRING_UTF8,
                                   (const unsigned char *)common_name, -1, -1, 0) == 1 &&
        X509_REQ_set_pubkey(req, key) == 1 && X509_REQ_sign(req, key, EVP_sha256()) > 0 &&
        PEM_write_bio_X509_REQ(bio, req) == 1)
        out = thingif_crypto_bio_text(bio);
    if (!out) {
        thingif_crypto_free_text(*new_key);
        *new_key = NULL;
    }
    BIO_free(key_bio);
    BIO_free(bio);
    X509_REQ_free(req);
    EVP_PKEY_free(key);
    ERR_clear_error();
    return out;
}

/* Whether cert_pem (cert_len bytes) holds an X.509 certificate for the key
 * in key_pem (key_len bytes; NULL for none): 1 yes; 0 it is for another
 * key; -1 it is no PEM certificate; -2 key_pem holds no unencrypted EC
 * P-256 key. */
static inline int thingif_crypto_pair_check(const void *cert_pem, size_t cert_len, const void *key_pem, size_t key_len)
{
    int rc = -2;
    EVP_PKEY *key = thingif_crypto_key_load(key_pem, key_len);
    BIO *bio = key && cert_len <= INT_MAX ? BIO_new_mem_buf(cert_pem, (int)cert_len) : NULL;
    X509 *cert = bio ? PEM_read_bio_X509(bio, NULL, thingif_crypto_no_passphrase, NULL) : NULL;
    if (key)
        rc = !cert ? -1 : X509_check_private_key(cert, key) == 1 ? 1 : 0;
    X509_free(cert);
    BIO_free(bio);
    EVP_PKEY_free(key);
    ERR_clear_error();
    return rc;
}

/* The subject CN of the first PEM certificate in the file at path when it
 * begins with prefix (at most 64 bytes), as a string to release with
 * thingif_crypto_free_text(); NULL when the file cannot be read, holds no
 * certificate, or the CN is missing, longer or not so. For a claim
 * certificate (fleet provisioning): its CN names its topics. */
static inline char *thingif_crypto_cert_cn(const char *path, const char *prefix)
{
    char cn[65];
    int n = -1;
    FILE *f = fopen(path, "r");
    X509 *cert = f ? PEM_read_X509(f, NULL, thingif_crypto_no_passphrase, NULL) : NULL;
    if (cert)
        n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, (int)sizeof cn);
    if (f)
        fclose(f);
    X509_free(cert);
    ERR_clear_error();
    char *out = n > 0 && n < (int)sizeof cn && strncmp(cn, prefix, strlen(prefix)) == 0 ? malloc((size_t)n + 1) : NULL;
    if (out)
        memcpy(out, cn, (size_t)n + 1);
    return out;
}

/* Firmware updates (docs/UPDATES.md): the manifest's signatures and the
 * image's hashes. No key here is secret: a trust file holds public keys. */

/* SHA-256 of len bytes at data into out (32 bytes): 1, or 0 on failure. */
static inline int thingif_crypto_sha256(const void *data, size_t len, unsigned char *out)
{
    unsigned int n = 0;
    int ok = EVP_Digest(data ? data : "", len, out, &n, EVP_sha256(), NULL) == 1 && n == 32;
    ERR_clear_error();
    return ok;
}

/* Whether sig (sig_len bytes, an ECDSA signature in DER, as OpenSSL and
 * `openssl dgst -sign` write it) is one of msg (msg_len bytes) with SHA-256 by the
 * public key in pem (pem_len bytes, a PEM "PUBLIC KEY"): 1 yes; 0 no; -1
 * pem holds no EC P-256 public key. */
static inline int thingif_crypto_verify_es256(const void *pem, size_t pem_len, const void *msg, size_t msg_len,
                                              const void *sig, size_t sig_len)
{
    int rc = -1;
    BIO *bio = pem && pem_len <= INT_MAX ? BIO_new_mem_buf(pem, (int)pem_len) : NULL;
    EVP_PKEY *key = bio ? PEM_read_bio_PUBKEY(bio, NULL, thingif_crypto_no_passphrase, NULL) : NULL;
    EVP_MD_CTX *ctx = key && thingif_crypto_key_is_p256(key) ? EVP_MD_CTX_new() : NULL;
    if (ctx) {
        rc = EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
             EVP_DigestVerify(ctx, sig, sig_len, msg ? msg : "", msg_len) == 1;
    }
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    BIO_free(bio);
    ERR_clear_error();
    return rc;
}

/* Decodes len bytes of standard base64 (RFC 4648 §4, padded, no line
 * breaks) into out, which holds at least len / 4 * 3 bytes: the decoded
 * length, or -1 when the text is not such base64. */
static inline int thingif_crypto_base64_decode(const void *text, size_t len, unsigned char *out)
{
    const unsigned char *t = text;
    if (len % 4 != 0 || len > INT_MAX)
        return -1;
    if (len == 0)
        return 0;
    int n = EVP_DecodeBlock(out, t, (int)len);
    ERR_clear_error();
    if (n < 0)
        return -1;
    /* EVP_DecodeBlock counts the padding as zero bytes; it also takes
     * padding anywhere and leading or trailing blanks: refuse those. */
    size_t pad = t[len - 1] == '=' ? (t[len - 2] == '=' ? 2 : 1) : 0;
    for (size_t i = 0; i < len - pad; i++) {
        unsigned char c = t[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/'))
            return -1;
    }
    return n - (int)pad;
}

/* Encodes len bytes as standard padded base64 into out, which holds at
 * least (len + 2) / 3 * 4 + 1 bytes (the text and a NUL): the text's length. */
static inline int thingif_crypto_base64_encode(const void *data, size_t len, unsigned char *out)
{
    if (len > INT_MAX / 4 * 3 - 3)
        return -1;
    return EVP_EncodeBlock(out, data ? data : (const void *)"", (int)len);
}

#endif
