// OpenSSL's libcrypto, for the hub's password KDF (PBKDF2-HMAC-SHA256),
// token hashes (SHA-256) and random salts.
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/crypto.h>
