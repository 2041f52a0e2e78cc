/* SPDX-License-Identifier: Apache-2.0 */

// OpenSSL's libcrypto, for the hub's password KDF (PBKDF2-HMAC-SHA256),
// token hashes (SHA-256), random salts, and the things' CRL (X509_CRL).
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/crypto.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Makes the things' certificate revocation list (docs/SECURITY.md): an X.509 v2
 * CRL signed by the CA whose PEM certificate and unencrypted PEM private key
 * are `ca_pem` and `key_pem` (NUL-terminated), issuer = the CA's subject,
 * lastUpdate `this_update` and nextUpdate `next_update` (seconds since the
 * epoch), the extensions authorityKeyIdentifier (`key_id`, `key_id_len`
 * bytes: the CA's key identifier, as in the certificates it signs) and
 * cRLNumber `crl_number`, and `count` revoked entries: entry i has the
 * serial of `serial_lens[i]` big-endian bytes that follow the previous
 * ones in `serials`, and the revocationDate `revoked_at[i]` (seconds).
 * Entries are sorted by serial; the signature is ECDSA or RSA with SHA-256.
 *
 * Returns the PEM text (malloc'd, NUL-terminated; the caller frees it), or
 * NULL when anything fails (a key that is not the certificate's, no memory).
 * One C call, so only PEM text crosses into Swift and every OpenSSL object
 * is freed here. */
static inline char *thingif_crl_pem(const char *ca_pem, const char *key_pem, const unsigned char *key_id,
                                    size_t key_id_len, const unsigned char *serials, const size_t *serial_lens,
                                    const int64_t *revoked_at, size_t count, int64_t this_update, int64_t next_update,
                                    int64_t crl_number)
{
    char *out = NULL;
    BIO *in = NULL, *mem = NULL;
    X509 *ca = NULL;
    EVP_PKEY *key = NULL;
    X509_CRL *crl = NULL;
    ASN1_TIME *t = NULL;
    ASN1_INTEGER *number = NULL;
    AUTHORITY_KEYID *akid = NULL;
    size_t off = 0;
    char *data = NULL;
    long len = 0;

    if ((in = BIO_new_mem_buf(ca_pem, -1)) == NULL)
        goto done;
    ca = PEM_read_bio_X509(in, NULL, NULL, NULL);
    BIO_free(in);
    if (ca == NULL || (in = BIO_new_mem_buf(key_pem, -1)) == NULL)
        goto done;
    /* An empty passphrase: never a prompt on the terminal. */
    key = PEM_read_bio_PrivateKey(in, NULL, NULL, (void *)"");
    BIO_free(in);
    if (key == NULL || X509_check_private_key(ca, key) != 1)
        goto done;
    if ((crl = X509_CRL_new()) == NULL || X509_CRL_set_version(crl, 1) != 1 /* v2 */
        || X509_CRL_set_issuer_name(crl, X509_get_subject_name(ca)) != 1 || (t = ASN1_TIME_new()) == NULL ||
        ASN1_TIME_set(t, (time_t)this_update) == NULL || X509_CRL_set1_lastUpdate(crl, t) != 1 ||
        ASN1_TIME_set(t, (time_t)next_update) == NULL || X509_CRL_set1_nextUpdate(crl, t) != 1)
        goto done;
    for (size_t i = 0; i < count; i++) {
        X509_REVOKED *r = X509_REVOKED_new();
        ASN1_INTEGER *serial = NULL;
        BIGNUM *bn = BN_bin2bn(serials + off, (int)serial_lens[i], NULL);
        off += serial_lens[i];
        int ok = r != NULL && bn != NULL && (serial = BN_to_ASN1_INTEGER(bn, NULL)) != NULL &&
                 X509_REVOKED_set_serialNumber(r, serial) == 1 && ASN1_TIME_set(t, (time_t)revoked_at[i]) != NULL &&
                 X509_REVOKED_set_revocationDate(r, t) == 1 && X509_CRL_add0_revoked(crl, r) == 1;
        ASN1_INTEGER_free(serial);
        BN_free(bn);
        if (!ok) {
            X509_REVOKED_free(r);
            goto done;
        }
    }
    if (X509_CRL_sort(crl) != 1 || (akid = AUTHORITY_KEYID_new()) == NULL ||
        (akid->keyid = ASN1_OCTET_STRING_new()) == NULL ||
        ASN1_OCTET_STRING_set(akid->keyid, key_id, (int)key_id_len) != 1 ||
        X509_CRL_add1_ext_i2d(crl, NID_authority_key_identifier, akid, 0, 0) != 1 ||
        (number = ASN1_INTEGER_new()) == NULL || ASN1_INTEGER_set_int64(number, crl_number) != 1 ||
        X509_CRL_add1_ext_i2d(crl, NID_crl_number, number, 0, 0) != 1 || X509_CRL_sign(crl, key, EVP_sha256()) <= 0 ||
        (mem = BIO_new(BIO_s_mem())) == NULL || PEM_write_bio_X509_CRL(mem, crl) != 1)
        goto done;
    len = BIO_get_mem_data(mem, &data);
    if (len > 0 && (out = malloc((size_t)len + 1)) != NULL) {
        memcpy(out, data, (size_t)len);
        out[len] = 0;
    }
done:
    BIO_free(mem);
    AUTHORITY_KEYID_free(akid);
    ASN1_INTEGER_free(number);
    ASN1_TIME_free(t);
    X509_CRL_free(crl);
    EVP_PKEY_free(key);
    X509_free(ca);
    return out;
}
