/* SPDX-License-Identifier: Apache-2.0 */

/**
 * @file thingif.h
 * @brief thingif.h - the thing side of a Thing Interaction Framework.
 *
 * libthingif lets C firmware onboard to a Thing Interaction Framework, take
 * commands from the cloud over MQTT 5, run their actions through handlers it
 * registers, report one result per action, and upload its state.
 *
 * This header is the whole public contract and the manual. Every function
 * below says who owns each pointer and for how long, which thread calls
 * back, and what may be called from inside a callback. docs/THREADING.md
 * has the thread model in one page; docs/PROTOCOL.md has the wire format.
 *
 * A typical program:
 *
 * @code{.c}
 *     thingif_t *t = thingif_new("myApp", "myAppKey", "/var/lib/aircon");
 *     rc = thingif_set_broker(t, "127.0.0.1", 1883);
 *     if (rc == THINGIF_OK)
 *         rc = thingif_on_action(t, "AirConditioner-Demo", 1, "turnPower", on_power, &dev);
 *     if (rc == THINGIF_OK)
 *         rc = thingif_onboard(t, "AC-0001", "secret", "AirConditioner", "1.0", NULL);
 *     if (rc == THINGIF_OK)
 *         rc = thingif_loop_start(t);   // or: while (thingif_loop(t, 1000) ...)
 *     if (rc != THINGIF_OK) fprintf(stderr, "%s\n", thingif_strerror(rc));
 *     ...
 *     rc = thingif_destroy(t);
 * @endcode
 *
 * @par Conventions
 *  - Every function that can fail returns an int from enum thingif_status:
 *    THINGIF_OK (0) on success, a positive THINGIF_ERR_* otherwise.
 *    thingif_strerror() turns it into text. Such functions are
 *    THINGIF_NODISCARD: the compiler warns when a result is dropped.
 *  - Strings passed in are copied before the call returns unless a function
 *    says otherwise; the caller keeps ownership.
 *  - Strings returned are owned by the library; the function says how long
 *    they stay valid. Never free them.
 *  - json_t values follow jansson's words: "borrowed" means the library keeps
 *    ownership and the value is valid only for the time stated; "steals"
 *    means the library takes over the caller's reference, also on failure.
 *  - A NULL thingif_t * or thingif_action_t * is never dereferenced: functions
 *    return THINGIF_ERR_INVALID (or NULL / 0 for getters).
 */
#ifndef THINGIF_H
#define THINGIF_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define THINGIF_VERSION_MAJOR 0        /**< the major version of this header */
#define THINGIF_VERSION_MINOR 4        /**< the minor version of this header */
#define THINGIF_VERSION_PATCH 0        /**< the patch version of this header */
#define THINGIF_VERSION_STRING "0.4.0" /**< "MAJOR.MINOR.PATCH"; compare thingif_version() */
/** The ABI's number: the library's SONAME is libthingif.so.THINGIF_ABI_VERSION
 * and its symbols carry the version node THINGIF_<n>.0. It goes up at every
 * change that breaks a program linked against an earlier library (a
 * function removed or renamed, a signature or a struct changed); the minor
 * version alone goes up for additions. */
#define THINGIF_ABI_VERSION 2

/** Marks a function whose result must be read: every call that returns a
 * status (enum thingif_status) carries it, so the compiler warns when
 * firmware drops a failure on the floor (-Wunused-result, on by default in
 * GCC and Clang). It is [[nodiscard]] in C23 and C++17, where a (void) cast
 * says that ignoring it is meant; before those it is GCC's and Clang's
 * warn_unused_result, which GCC does not let a (void) cast silence: test
 * the result instead (`if (thingif_x(...) != THINGIF_OK) ...`). A build
 * that wants none of it defines THINGIF_NODISCARD empty (-DTHINGIF_NODISCARD=)
 * before including this header. */
#ifndef THINGIF_NODISCARD
#if defined(__cplusplus) && __cplusplus >= 201703L
#define THINGIF_NODISCARD [[nodiscard]]
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ > 201710L
#define THINGIF_NODISCARD [[nodiscard]]
#elif defined(__GNUC__) || defined(__clang__)
#define THINGIF_NODISCARD __attribute__((warn_unused_result))
#else
#define THINGIF_NODISCARD
#endif
#endif

/** Marks an old name kept so that programs built against an earlier header
 * still compile and link (the symbol stays exported: no ABI change); the
 * compiler's warning names the new function. See "Changes" below. */
#if defined(__GNUC__) || defined(__clang__)
#define THINGIF_DEPRECATED(use) __attribute__((deprecated("use " use)))
#else
#define THINGIF_DEPRECATED(use)
#endif

/**
 * @par Changes
 *  - next: firmware updates (the "update" group): thingif_set_installer,
 *    thingif_update_*. Additions only.
 *  - next: THINGIF_ERR_UNSUPPORTED. A call of a feature the build leaves out
 *    (the gateway group with -DTHINGIF_GATEWAYS=OFF) answers it, where it
 *    answered THINGIF_ERR_STATE, the code of "a loop runs".
 *  - 0.4.0: gateways (the "gateway" group): thingif_set_layout_position,
 *    thingif_end_node_*, thingif_action_end_node, thingif_action_thing_id,
 *    THINGIF_ERR_TOO_MANY, THINGIF_OPT_MAX_END_NODES. Additions only.
 *  - 0.3.0: every status-returning call is THINGIF_NODISCARD. Names follow
 *    one rule, thingif_<noun>_<verb> (as jansson's json_object_set), with
 *    thingif_set_<what> for the handle's settings and thingif_on_* for
 *    handler registration. Renamed, the old names kept as deprecated
 *    aliases of the same function: thingif_update_state ->
 *    thingif_state_update, thingif_patch_state -> thingif_state_patch,
 *    thingif_update_firmware_version -> thingif_firmware_version_update,
 *    thingif_action_set_{create,add_action,remove_action,delete,execute} ->
 *    thingif_actionset_{create,add_action,remove_action,delete,execute}
 *    (an action set is a thing of its own, not a setter on an action).
 *  - 0.2.0: ABI 2 (libthingif.so.2).
 */

/** The handle for one thing. Opaque; create with thingif_new(). */
typedef struct thingif thingif_t;

/** One action of a command, as a handler sees it. Opaque; valid only inside
 * the handler call that received it. */
typedef struct thingif_action thingif_action_t;

/** An action whose result comes later; see thingif_action_defer(). */
typedef struct thingif_deferred thingif_deferred_t;

/** Status codes. Functions return them as int (the width of a C enum is
 * implementation-defined). */
enum thingif_status {
    THINGIF_OK = 0,                /**< success */
    THINGIF_ERR_INVALID = 1,       /**< an argument is NULL, empty, malformed or out of range */
    THINGIF_ERR_NOMEM = 2,         /**< out of memory */
    THINGIF_ERR_STATE = 3,         /**< not allowed in the handle's current state (e.g. a loop runs) */
    THINGIF_ERR_NOT_ONBOARDED = 4, /**< no identity yet: call thingif_onboard() or thingif_use_onboarded() */
    THINGIF_ERR_IN_CALLBACK = 5,   /**< not allowed from inside a thingif callback on the same handle */
    THINGIF_ERR_CONNECT = 6,       /**< the broker could not be reached or refused the connection */
    THINGIF_ERR_NO_CONN = 7,       /**< not connected to the broker right now (the loop reconnects) */
    THINGIF_ERR_TIMEOUT = 8,       /**< the framework did not answer in time (THINGIF_OPT_REQUEST_TIMEOUT_MS) */
    THINGIF_ERR_REJECTED = 9,      /**< the framework answered with an error status (4xx, 5xx) */
    THINGIF_ERR_PROTOCOL = 10,     /**< the framework's answer was malformed */
    THINGIF_ERR_STORAGE = 11,      /**< the storage directory could not be created, read or written */
    THINGIF_ERR_JSON = 12,         /**< a JSON argument is not valid JSON or not of the kind required */
    THINGIF_ERR_TLS = 13,          /**< TLS files could not be used, or the TLS handshake failed */
    THINGIF_ERR_MQTT = 14,         /**< libmosquitto reported an error not covered above */
    THINGIF_ERR_FULL = 15,         /**< the outbox is full of unanswered requests; the upload was refused */
    THINGIF_ERR_EXISTS = 16,       /**< an action set, timer trigger or end node of that name exists already */
    THINGIF_ERR_NOT_FOUND = 17,    /**< no action set, timer trigger or end node of that name */
    THINGIF_ERR_TOO_MANY = 18,     /**< the gateway holds THINGIF_OPT_MAX_END_NODES end nodes already (since 0.4.0) */
    THINGIF_ERR_UNSUPPORTED = 19 /**< this build of the library leaves that feature out (e.g. -DTHINGIF_GATEWAYS=OFF) */
};

/** Log levels, most severe first. */
enum thingif_log_level {
    THINGIF_LOG_ERROR = 0,   /**< something failed */
    THINGIF_LOG_WARNING = 1, /**< something unexpected that the library handled */
    THINGIF_LOG_INFO = 2,    /**< a change worth knowing: onboarded, connected, disconnected */
    THINGIF_LOG_DEBUG = 3    /**< detail for finding a problem */
};

/** Options for thingif_set_option(). */
enum thingif_option {
    /** Largest message accepted, in bytes, on every topic the thing reads
     * (commands, the framework's replies, the remote configuration). A larger
     * message is dropped before it is parsed, with an error log line naming
     * its topic and size; a dropped command whose commandID its first 1024
     * bytes give is reported to the framework with every action failed
     * (docs/PROTOCOL.md 5.1), else it gets no result. Default 65536 (the
     * framework refuses larger commands); range 256 .. 16777216. */
    THINGIF_OPT_MAX_PAYLOAD = 1,
    /** MQTT keepalive in seconds. Default 60; range 5 .. 65535. */
    THINGIF_OPT_KEEPALIVE_S = 2,
    /** How long to wait for the framework's answer to a request, in
     * milliseconds. Default 10000; range 100 .. 600000. */
    THINGIF_OPT_REQUEST_TIMEOUT_MS = 3,
    /** Smallest and largest wait before a reconnect, in milliseconds.
     * Defaults 500 and 30000; range 10 .. 3600000. */
    THINGIF_OPT_RECONNECT_MIN_MS = 4,
    THINGIF_OPT_RECONNECT_MAX_MS = 5, /**< the largest wait; see THINGIF_OPT_RECONNECT_MIN_MS */
    /** How many requests (results, state, firmware version) the outbox
     * holds while they wait for the framework's answer before state uploads
     * are dropped or refused. Default 256; range 8 .. 100000. Results are
     * never dropped and may exceed it. See thingif_state_update(). */
    THINGIF_OPT_OUTBOX_MAX = 6,
    /** How many of the newest command IDs the ledger remembers, so that a
     * redelivered command is not run again. Default 1000; range 16 .. 1000000.
     * The ledger also remembers the commands the framework cancelled before
     * this thing took them (a cancel message on the command topic,
     * docs/PROTOCOL.md 9.1; handled by the loop thread, no callback): such
     * a command is never run, also after a restart; every action gets a
     * failed result with the error message "cancelled: …" and the data
     * {"reason":"CANCELLED"}, and no handler is called. A cancel that comes
     * after the command's handlers started is ignored. */
    THINGIF_OPT_LEDGER_SIZE = 7,
    /** How many received messages the thing holds before its loop handles
     * them. At this bound the loop handles the held messages before it
     * reads the socket again, so a slow handler slows the reading and the
     * broker holds the rest (MQTT flow control): no message is dropped.
     * Default 64; range 1 .. 100000. See docs/FAILURE_MODEL.md. */
    THINGIF_OPT_INBOX_MAX = 8,
    /** What the ledger and the outbox ask of the storage: an enum
     * thingif_durability value. Default THINGIF_DURABILITY_SYNC. See
     * docs/FAILURE_MODEL.md. */
    THINGIF_OPT_DURABILITY = 9,
    /** How far, in milliseconds, the thing's clock may be ahead of the
     * framework's before a command that carries an expiry ("expiresAt",
     * docs/PROTOCOL.md 9.1) counts as expired on arrival. An expired command
     * is not run: every action gets a failed result with the error message
     * "expired: …" and the data {"reason":"EXPIRED","expiresAt":…,
     * "thingTime":…}. A thing whose clock reads before 2020 (not set yet)
     * runs every command. The clock is thingif_set_clock()'s, else the
     * system's. Default 60000; range 0 .. 86400000. */
    THINGIF_OPT_EXPIRY_SKEW_MS = 10,
    /** The most end nodes a gateway registers with thingif_end_node_add()
     * (THINGIF_ERR_TOO_MANY beyond). End nodes an owner adds through the
     * framework are kept whatever this says (the framework has its own limit
     * per gateway). The ledger (THINGIF_OPT_LEDGER_SIZE), the outbox and the
     * inbox are shared by the gateway and all its end nodes. Default 100;
     * range 1 .. 100000. Since 0.4.0. */
    THINGIF_OPT_MAX_END_NODES = 11
};

/** Values of THINGIF_OPT_DURABILITY. */
enum thingif_durability {
    /** Each batch of commands the loop takes is synced (fdatasync) before
     * its first handler runs, and its results before they are published:
     * two syncs per loop pass, however many commands it holds. A state or
     * firmware upload is synced before its call returns. A power loss
     * neither runs a command twice nor loses a result. */
    THINGIF_DURABILITY_SYNC = 0,
    /** Nothing is synced: for storage that is volatile (tmpfs) or must not
     * wear. The files are still written, so a crash of the process alone
     * (not of the device) keeps every promise; after a power loss a
     * command can run again, and results and uploads can be lost. */
    THINGIF_DURABILITY_NONE = 1
};

/**
 * Returns the library's version as "MAJOR.MINOR.PATCH", for example "0.4.0".
 * The string is static: valid for the life of the process.
 * @par Thread
 * any; the string is static.
 */
const char *thingif_version(void);

/**
 * Returns a one-line English description of a status code. Unknown codes
 * give "unknown status". The string is static: valid for the life of the
 * process; never NULL.
 * @par Thread
 * any; the string is static.
 */
const char *thingif_strerror(int status);

/**
 * Receives one log line.
 *
 * @param level an enum thingif_log_level value.
 * @param message the line, without a trailing newline. Borrowed: valid only
 *              during the call; copy it to keep it.
 * @param userdata the pointer given to thingif_set_log_callback().
 *
 * @par Thread
 * whichever thread runs the library code that logs: the loop thread
 * for network events, the caller's thread for API calls. Keep it short and
 * thread-safe. From inside it, call no thingif function on the same handle.
 */
typedef void (*thingif_log_cb)(int level, const char *message, void *userdata);

/**
 * Creates a handle for one thing.
 *
 * @param app_id the framework application's ID. Copied. Not NULL or empty.
 * @param app_key the application's key, used on the bootstrap connection.
 *                 Copied. May be NULL or empty: a thing that onboards with
 *                 a claim certificate (thingif_set_claim_certificate())
 *                 needs none, and its firmware should carry none.
 * @param storage_dir a directory the library owns for this thing: it keeps the
 *                 onboarding result there (files of mode 0600) so that a
 *                 restart does not onboard again. Created (mode 0700) if it
 *                 does not exist. Copied. Not NULL or empty. Two live
 *                 handles must not share one storage_dir.
 *
 * @return A new handle, owned by the caller until thingif_destroy(); NULL when an
 *   argument is NULL or empty, the storage directory cannot be created, or
 *   memory runs out. The broker defaults to 127.0.0.1:1883.
 *
 * @par Thread
 * any. The handle may then be used from any thread; see each
 * function for what it allows.
 */
thingif_t *thingif_new(const char *app_id, const char *app_key, const char *storage_dir);

/**
 * Stops the loop thread if it runs, disconnects (the broker publishes the
 * thing's "offline" status), and frees the handle and everything it owns.
 * Requests not yet answered stay in the outbox in storage_dir and go out
 * after the next start; deferred actions not yet completed are reported as
 * interrupted then.
 *
 * @param t the handle, or NULL (then nothing happens and THINGIF_OK is returned).
 *
 * @retval THINGIF_OK done; t is invalid from now on.
 * @retval THINGIF_ERR_IN_CALLBACK called from inside a callback of this handle;
 *                               nothing was done. Return from the callback
 *                               and destroy the handle from another place.
 *
 * @par Thread
 * any thread but the loop thread while it is inside a callback. No
 * other call on t may run at the same time or come after it.
 */
THINGIF_NODISCARD int thingif_destroy(thingif_t *t);

/**
 * Routes the library's log lines to a callback. Without one, lines of level
 * THINGIF_LOG_WARNING and more severe go to stderr with a "thingif: " prefix.
 *
 * @param t the handle.
 * @param cb the callback, or NULL to return to the stderr default.
 * @param max_level the least severe level delivered (THINGIF_LOG_ERROR ..
 *               THINGIF_LOG_DEBUG).
 * @param userdata passed to cb unchanged; the caller owns it and keeps it
 *               valid while cb is set.
 *
 * @return THINGIF_OK, or THINGIF_ERR_INVALID for a NULL handle or a level
 * out of range.
 *
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_set_log_callback(thingif_t *t, thingif_log_cb cb, int max_level, void *userdata);

/**
 * Sets one enum thingif_option value.
 *
 * @return THINGIF_OK, or THINGIF_ERR_INVALID for an unknown option or a
 * value out of its range (the old value stays).
 *
 * @par Thread
 * any. Keepalive takes effect on the next connection; the others
 * at once.
 */
THINGIF_NODISCARD int thingif_set_option(thingif_t *t, int option, long value);

/**
 * Sets the broker used for the bootstrap connection (onboarding). After
 * onboarding the thing connects to the host and port that the framework's
 * mqttEndpoint names; when that host is empty, to this broker.
 *
 * @param t the handle.
 * @param host host name or address. Copied. Not NULL or empty.
 * @param port 1 .. 65535.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, or THINGIF_ERR_STATE while a loop
 * runs (the thread of thingif_loop_start(), or a thread inside thingif_loop()).
 *
 * @par Thread
 * any, before thingif_onboard() / thingif_use_onboarded().
 */
THINGIF_NODISCARD int thingif_set_broker(thingif_t *t, const char *host, int port);

/**
 * Makes every connection of the handle use TLS: the bootstrap connection of
 * thingif_onboard() / thingif_use_onboarded() and the thing's own
 * connection. Once set, the handle never connects in plain text: a TLS
 * setup or handshake failure makes onboarding return THINGIF_ERR_TLS, and
 * on the running connection gives an error log line and a retry after the
 * reconnect backoff. With TLS the thing connects to the mqttEndpoint's
 * portSSL when the framework gives one (> 0), else to the port of
 * thingif_set_broker(); never to portTCP. The server certificate is
 * verified against cafile, host name included. A connection made before
 * this call is dropped; the next one uses TLS.
 * The files are checked for readability now and read by libmosquitto at
 * connect time.
 *
 * A certificate of the thing's own: with certfile NULL, thingif_onboard()
 * and thingif_use_onboarded() ask the framework for a client certificate
 * for this thing (see there).
 * The library then keeps an EC P-256 key of its own in
 * storage_dir/thing-key.pem and, once the framework signed one, the
 * certificate in storage_dir/thing-cert.pem (both mode 0600, written
 * atomically: a temporary file, fsync, rename). When the stored onboarding
 * has such a certificate, the thing's own connection authenticates with it
 * and thing-key.pem (cafile verifies the broker), connects to the
 * mqttEndpoint's portSSL and sends no password; this holds even when
 * certfile/keyfile are given (those are then used for the bootstrap
 * connection only). The bootstrap connection always uses app_id/app_key
 * and certfile/keyfile as given. With certfile/keyfile given, or without
 * TLS, no key is made and no certificate is asked for. thing-key.pem is
 * an unencrypted PKCS#8 PEM file: keep storage_dir private. If the key is
 * gone or does not fit the certificate when the loop connects (or TLS is
 * not set), the loop logs an error and retries after the reconnect
 * backoff; it never connects with a password instead.
 *
 * @param t the handle.
 * @param cafile PEM file of trusted CAs. Copied. Not NULL.
 * @param certfile client certificate (PEM) for mutual TLS, or NULL for none
 *                 (then the thing asks for a certificate of its own when it
 *                 onboards itself or takes a handed-over identity). Copied.
 * @param keyfile its private key (PEM), or NULL; given exactly when certfile is.
 *
 * @return THINGIF_OK; THINGIF_ERR_INVALID for a NULL handle, a NULL or empty
 * cafile, or a path that is not UTF-8; THINGIF_ERR_TLS (with an error log
 * line) when a file cannot be read or only one of certfile/keyfile is given
 * (TLS is then not set); THINGIF_ERR_STATE while a loop runs.
 *
 * @par Thread
 * any, before thingif_onboard() / thingif_use_onboarded().
 */
THINGIF_NODISCARD int thingif_set_tls(thingif_t *t, const char *cafile, const char *certfile, const char *keyfile);

/**
 * Fleet provisioning by claim: thingif_onboard() authenticates its
 * bootstrap connection with this claim certificate instead of app_id /
 * app_key, so the firmware needs no app key. An operator makes one claim
 * certificate per batch of devices with the framework's claims CA
 * (`thingif-hub claim-certificate`, subject CN = claim.APPID.BATCH); the
 * broker lets its holder send an onboarding only under its own CN and
 * client ID (topic c/CN/CLIENTID/onboardings) and read only the answer to
 * it (c/CN/CLIENTID/resp), and the framework takes it only for its app and
 * only with a certificate signing request. The thing then gets a
 * certificate of its own (see thingif_set_tls() and thingif_onboard()) and
 * uses the claim certificate no more.
 *
 * Needs thingif_set_tls() with certfile NULL (the thing's own key and CSR;
 * cafile verifies the broker) before thingif_onboard(), and
 * thingif_set_broker() pointed at the broker's claim listener (the port
 * that takes claim certificates; not the things' certificate listener,
 * which takes no claim). The thing's own connection then goes to the
 * endpoint's portSSL from the answer. The bootstrap connection uses a
 * random client ID, as without a claim. Only
 * thingif_onboard() uses it: thingif_use_onboarded() keeps the app
 * credentials. The CN is read now; the files are read again by
 * libmosquitto at connect time. The key may be of any type the broker
 * takes; keep it as private as storage_dir.
 *
 * @param t the handle.
 * @param certfile the claim certificate (PEM). Copied. NULL together with
 *                 keyfile removes the claim certificate.
 * @param keyfile its private key (PEM, unencrypted). Copied.
 *
 * @return THINGIF_OK; THINGIF_ERR_INVALID for a NULL handle, an empty path
 * or only one of the two given; THINGIF_ERR_TLS (with an error log line)
 * when a file cannot be read or the certificate's CN does not begin with
 * "claim." or cannot stand as a topic level (at most 64 bytes, no / + #;
 * the framework checks the rest of claim.APPID.BATCH); the claim is then
 * not set;
 * THINGIF_ERR_STATE while a loop runs.
 *
 * @par Thread
 * any, before thingif_onboard().
 */
THINGIF_NODISCARD int thingif_set_claim_certificate(thingif_t *t, const char *certfile, const char *keyfile);

/**
 * Onboards the thing by itself with its vendorThingID and password (Kii's
 * "onboarding by the thing"), over a short bootstrap MQTT connection that
 * uses app_id / app_key as credentials. The framework answers with a
 * thingID, an access token and an MQTT endpoint; the library stores them in
 * storage_dir and uses them for every later connection. When storage_dir
 * already holds an onboarding of the same vendorThingID for the same app,
 * no network is used and THINGIF_OK is returned at once.
 *
 * This call blocks for up to THINGIF_OPT_REQUEST_TIMEOUT_MS in all (connect,
 * subscribe, answer), plus the TCP connect, which the operating system
 * bounds. It does not connect the thing itself: thingif_loop() or
 * thingif_loop_start() do that.
 * Register handlers before the loop runs, so no command finds none.
 *
 * A client certificate of the thing's own: when thingif_set_tls() was
 * called with certfile NULL, the request also carries a PKCS#10
 * certificate signing request (PEM, subject CN = vendor_thing_id, signed
 * with SHA-256) for the thing's EC P-256 key. The key is read from
 * storage_dir/thing-key.pem, or made and written there (mode 0600,
 * atomically) when that file is missing or holds no unencrypted P-256
 * key; it never leaves the device. A vendor_thing_id longer than 64
 * characters (the most a CN holds) gets no CSR, with a warning. A
 * framework with a CA for things answers with a certificate in the
 * mqttEndpoint (clientCertificate, an empty password, portSSL the
 * broker's certificate listener): the library checks that it is for
 * thing-key.pem, writes it to storage_dir/thing-cert.pem (0600,
 * atomically) and keeps it in identity.json; the thing's own connection
 * then uses it instead of a password (see thingif_set_tls()). A framework
 * that signs nothing answers as without a CSR: the thing gets a password
 * as before (an info log line says so) and keeps thing-key.pem for a
 * later onboarding. Without TLS, or with a certfile of the user's own, no
 * CSR is sent and no file is made.
 * When a stored onboarding is used, thing-cert.pem is written again from
 * identity.json if it is missing or differs. If its endpoint has a
 * certificate but thing-key.pem is missing or holds another key, the
 * thing cannot connect (it has no password, and never falls back to one):
 * THINGIF_ERR_TLS with an error log line; delete storage_dir/identity.json
 * and onboard again to get a new key and certificate.
 *
 * With a claim certificate (thingif_set_claim_certificate()) the bootstrap
 * connection authenticates with it instead of app_id / app_key and sends
 * the request on the claim topic; everything else is as above. The
 * framework refuses a claim onboarding without a CSR (THINGIF_ERR_REJECTED,
 * the log line naming CERTIFICATE_SIGNING_REQUEST_REQUIRED: TLS not set, a
 * certfile of the user's own, or a vendor_thing_id over 64 characters), a
 * claim of another app or a batch its operator retired (CLAIM_REFUSED).
 *
 * @param t the handle.
 * @param vendor_thing_id the thing's vendor ID. Copied. Not NULL or empty.
 * @param password its password. Copied. Not NULL or empty.
 * @param thing_type e.g. "AirConditioner". Copied. NULL for none.
 * @param firmware_version e.g. "1.0.3". Copied. NULL for none.
 * @param properties_json thingProperties as the text of a JSON object, or
 *                      NULL. Copied.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, THINGIF_ERR_JSON (properties_json is not
 *   a JSON object), THINGIF_ERR_STATE (a loop runs),
 *   THINGIF_ERR_IN_CALLBACK, THINGIF_ERR_CONNECT, THINGIF_ERR_TIMEOUT,
 *   THINGIF_ERR_REJECTED (e.g. a wrong password), THINGIF_ERR_PROTOCOL,
 *   THINGIF_ERR_STORAGE (identity.json, thing-key.pem or thing-cert.pem
 *   cannot be written), THINGIF_ERR_TLS (a TLS setup or handshake
 *   failure; the key or the CSR cannot be made; the framework's
 *   certificate is not for thing-key.pem; a stored certificate whose key
 *   is gone).
 *
 * @par Thread
 * any, while no loop runs; not from a callback.
 */
THINGIF_NODISCARD int thingif_onboard(thingif_t *t, const char *vendor_thing_id, const char *password,
                                      const char *thing_type, const char *firmware_version,
                                      const char *properties_json);

/**
 * Takes an identity that the app onboarded and handed over (over BLE, say):
 * a thingID and its access token. Over a bootstrap connection the library
 * creates one MQTT installation for the thing and asks for its endpoint,
 * then stores both in storage_dir. When storage_dir already holds an
 * endpoint for the same thingID and token, no network is used: the
 * installation is kept, never created again.
 *
 * Blocks for up to twice THINGIF_OPT_REQUEST_TIMEOUT_MS in all (two
 * requests, and retries while the framework answers 503), plus the TCP
 * connect. Does not connect the thing: the loop does.
 *
 * A client certificate of the thing's own, as with thingif_onboard():
 * when thingif_set_tls() was called with certfile NULL, the installation
 * request carries a certificate signing request (subject CN = thing_id)
 * for the EC P-256 key in storage_dir/thing-key.pem, made and written
 * there (0600, atomically) when missing. A framework with a CA for things
 * answers with the endpoint and its certificate at once (no endpoint is
 * read); the library checks that it is for thing-key.pem and writes it to
 * storage_dir/thing-cert.pem (0600, atomically) before identity.json, and
 * the thing's own connection uses it on portSSL with no password. A
 * framework that signs nothing (Kii's, or one without a CA) answers
 * without a certificate: the endpoint is read as above and the thing uses
 * its password (an info log line says so). Without TLS, or with a
 * certfile of the user's own, no CSR is sent and no key is made. A
 * thing_id longer than 64 characters gets no CSR, with a warning. A
 * stored identity is used as it is: its files are checked when the loop
 * connects (thing-cert.pem is written again from identity.json if missing;
 * a key that is gone is an error line and a retry, see thingif_set_tls();
 * delete identity.json and call again to get a new key and certificate).
 *
 * Files written in storage_dir: identity.json (the thingID, token and
 * endpoint, with the certificate if any), and with a certificate
 * thing-key.pem and thing-cert.pem; all mode 0600.
 *
 * @param t the handle.
 * @param thing_id the thingID. Copied. Not NULL or empty.
 * @param access_token the thing's access token. Copied. Not NULL or empty.
 *
 * @return as thingif_onboard(), without THINGIF_ERR_JSON.
 *
 * @par Thread
 * any, while no loop runs; not from a callback.
 */
THINGIF_NODISCARD int thingif_use_onboarded(thingif_t *t, const char *thing_id, const char *access_token);

/**
 * Returns the thingID once the thing is onboarded, else NULL. The string is
 * owned by the handle and valid until the next thingif_onboard() /
 * thingif_use_onboarded() or thingif_destroy().
 *
 * @par Thread
 * any, also from inside a callback.
 */
const char *thingif_thing_id(thingif_t *t);

/**
 * Returns 1 while the thing's MQTT connection is up and subscribed, 0
 * otherwise (also for NULL).
 * @par Thread
 * any, also from inside a callback.
 */
int thingif_is_connected(thingif_t *t);

/**
 * Runs one action of a command. The action succeeds unless the handler
 * calls thingif_action_fail().
 *
 * @param action the action. Borrowed: valid only until the handler returns,
 *              and so is every pointer read from it.
 * @param userdata the pointer given at registration.
 *
 * @par Thread
 * the loop thread (the thread inside thingif_loop(), or the
 * library's own thread after thingif_loop_start()). Actions of one command
 * run one after another, in the order sent; commands run in the order
 * received. From inside, the handler may call thingif_action_*() on this
 * action, thingif_state_update(), thingif_state_patch(),
 * thingif_firmware_version_update(), thingif_on_*(), thingif_thing_id(),
 * thingif_is_connected(), thingif_set_log_callback(), thingif_set_option().
 * thingif_loop(), thingif_loop_stop(), thingif_destroy(), thingif_onboard()
 * and thingif_use_onboarded() return THINGIF_ERR_IN_CALLBACK there.
 */
typedef void (*thingif_action_cb)(thingif_action_t *action, void *userdata);

/**
 * Registers the handler of an action of a schema command (Thing-IF schema
 * commands, as the AirConditioner-Demo sends).
 *
 * @param t the handle.
 * @param schema the schema name, or NULL for any schema and any trait
 *                    alias. Copied.
 * @param schema_version the schema version, or 0 for any version.
 * @param action the action name. Copied. Not NULL or empty.
 * @param cb the handler, or NULL to remove the registration.
 * @param userdata passed to cb unchanged; the caller owns it and keeps it
 *                    valid while the handler is registered.
 *
 * Registering the same (schema, schema_version, action) again replaces the
 * handler. For an action the library looks, in order, for: the exact
 * schema and version; the schema with version 0; schema NULL; the
 * catch-all of thingif_on_any_action(). An action that finds none fails
 * with "no handler for action …", and the other actions still run. Names
 * match byte for byte: the same text in another Unicode normalization form
 * (NFC against NFD) is another name.
 *
 * @return THINGIF_OK or THINGIF_ERR_INVALID (also for a negative version).
 *
 * @par Thread
 * any, also from inside a callback. A change applies from the next
 * action on.
 */
THINGIF_NODISCARD int thingif_on_action(thingif_t *t, const char *schema, int schema_version, const char *action,
                                        thingif_action_cb cb, void *userdata);

/**
 * Registers the handler of an action under a trait alias (Thing-IF trait
 * commands). Lookup order: the exact alias; then the schema-NULL
 * registrations of thingif_on_action(); then the catch-all.
 *
 * @param t,action,cb,userdata as thingif_on_action().
 * @param alias in place of schema and version: the trait alias. Not NULL
 *              or empty; copied.
 *
 * @return THINGIF_OK or THINGIF_ERR_INVALID.
 * @par Thread
 * any, also from inside
 * a callback.
 */
THINGIF_NODISCARD int thingif_on_alias_action(thingif_t *t, const char *alias, const char *action, thingif_action_cb cb,
                                              void *userdata);

/**
 * Registers the catch-all handler: it runs every action that no other
 * registration matches. Read the action's name with thingif_action_name().
 * cb NULL removes it.
 *
 * @return THINGIF_OK or THINGIF_ERR_INVALID.
 * @par Thread
 * any, also from inside
 * a callback.
 */
THINGIF_NODISCARD int thingif_on_any_action(thingif_t *t, thingif_action_cb cb, void *userdata);

/**
 * The action's name, e.g.\ "turnPower". Borrowed: valid until the handler
 * returns. NULL only for a NULL action.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
const char *thingif_action_name(const thingif_action_t *action);

/**
 * The action's parameters as a jansson value: for schema commands usually an
 * object ({"power":true}), for trait commands any JSON value (true). Use
 * json_unpack() on it. Borrowed: do not json_decref() or change it; valid
 * until the handler returns (json_incref() it to keep it longer). Never
 * NULL for a non-NULL action: an action sent without a value gets JSON null.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
json_t *thingif_action_params(const thingif_action_t *action);

/**
 * The ID of the command this action belongs to. Borrowed: valid until the
 * handler returns.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
const char *thingif_action_command_id(const thingif_action_t *action);

/**
 * The command's issuer, e.g.\ "user:1234", or NULL when the command names
 * none. Borrowed: valid until the handler returns.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
const char *thingif_action_issuer(const thingif_action_t *action);

/**
 * The schema name of a schema command, or NULL for a trait command or a
 * command sent without one. Borrowed: valid until the handler returns.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
const char *thingif_action_schema(const thingif_action_t *action);

/**
 * The schema version of a schema command; 0 for a trait command or none.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
int thingif_action_schema_version(const thingif_action_t *action);

/**
 * The trait alias of an action of a trait command, or NULL for a schema
 * command. Borrowed: valid until the handler returns.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
const char *thingif_action_alias(const thingif_action_t *action);

/**
 * The command's title, or NULL when it has none. Borrowed: valid until the
 * handler returns.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
const char *thingif_action_title(const thingif_action_t *action);

/**
 * The command's description, or NULL when it has none. Borrowed: valid
 * until the handler returns.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
const char *thingif_action_description(const thingif_action_t *action);

/**
 * The command's metadata object, or NULL when it has none. Borrowed: do not
 * decref or change it; valid until the handler returns.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
json_t *thingif_action_metadata(const thingif_action_t *action);

/**
 * The action's 0-based position among all actions of its command (trait
 * commands count across aliases), or -1 for a NULL action.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
int thingif_action_index(const thingif_action_t *action);

/**
 * When the action's command expires, in milliseconds since the Unix epoch
 * (UTC), or 0 when it has no expiry. The framework sets it; a command that
 * arrives past it (by the thing's clock, with THINGIF_OPT_EXPIRY_SKEW_MS of
 * tolerance) never reaches a handler, so a handler sees an expiry still
 * ahead, or an unjudged one (a clock before 2020). A handler that starts
 * something long may use it to stop in time.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 * @see THINGIF_OPT_EXPIRY_SKEW_MS
 */
long long thingif_action_command_expires_at(const thingif_action_t *action);

/**
 * The handle that runs this action, so a handler can call
 * thingif_state_update() without a global. NULL for a NULL action.
 * @par Thread
 * the handler's own call only (the action lives for that call).
 */
thingif_t *thingif_action_thing(const thingif_action_t *action);

/**
 * Marks the action as failed. Its result becomes {"succeeded":false,
 * "errorMessage": error_message}. Calling it again replaces the message.
 * The action fails whatever the message is: bytes that are not UTF-8 are
 * REPLACED (each invalid sequence becomes U+FFFD), and a NULL message gives
 * a fixed text.
 *
 * @param action the action.
 * @param error_message why, in words a person can act on. Copied. UTF-8;
 *                   at most 1024 bytes are kept.
 *
 * @return THINGIF_OK (also for a message that was repaired), or
 * THINGIF_ERR_INVALID for a NULL action (nothing happens) or a NULL
 * message (the action still fails).
 *
 * @par Thread
 * the handler's own call only.
 */
THINGIF_NODISCARD int thingif_action_fail(thingif_action_t *action, const char *error_message);

/**
 * Attaches a data object to the action's result ("data" in the result),
 * whether it succeeds or fails. Calling it again replaces the data.
 *
 * @param action the action.
 * @param data a JSON object. The reference is STOLEN, also when the call
 *            fails: do not decref it afterwards.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID (NULL argument) or
 * THINGIF_ERR_JSON (data is not an object).
 *
 * @par Thread
 * the handler's own call only.
 */
THINGIF_NODISCARD int thingif_action_attach_data(thingif_action_t *action, json_t *data);

/**
 * Defers the action's result: the handler returns now (a firmware update or
 * a motor move goes on), and the result comes later through
 * thingif_deferred_complete(). The command's results are sent when its last
 * action has a result. The following actions of the command run at once.
 * A deferred action survives reconnects; a restart before it completes
 * reports it as failed ("interrupted"). Calling it twice returns the same
 * handle. Whatever thingif_action_fail() or thingif_action_attach_data() set
 * before is discarded.
 *
 * @return a handle owned by the caller until it passes it to
 * thingif_deferred_complete() (exactly once); NULL for a NULL action or no
 * memory.
 *
 * @par Thread
 * the handler's own call only.
 */
thingif_deferred_t *thingif_action_defer(thingif_action_t *action);

/**
 * Completes a deferred action and frees the handle.
 *
 * @param deferred from thingif_action_defer(). Invalid after this call,
 *                   except when it returns THINGIF_ERR_INVALID: the
 *                   arguments are checked first, and then the handle is
 *                   untouched and still the caller's, to complete again.
 * @param error_message NULL for success, else why it failed (copied, UTF-8, at
 *                   most 1024 bytes kept).
 * @param data a JSON object for the result's "data", or NULL. STOLEN,
 *                   also on failure.
 *
 * @return THINGIF_OK; THINGIF_ERR_INVALID (NULL deferred, message not
 * UTF-8: nothing is completed and the handle stays valid); THINGIF_ERR_JSON
 * (data not an object; the action then succeeds or fails without data);
 * THINGIF_ERR_STATE (the handle was destroyed, or the command is no longer
 * waiting: nothing is sent).
 *
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_deferred_complete(thingif_deferred_t *deferred, const char *error_message, json_t *data);

/**
 * Uploads the thing's whole state (PUT targets/thing:{id}/states). The
 * library serializes it and writes it to the outbox in storage_dir
 * (fsync'd) before returning, and sends it when connected; it stays in the
 * outbox, and is sent again after a reconnect or restart, until the
 * framework answers. A full state upload supersedes every state upload
 * (full or partial) still waiting in the outbox: those are dropped, so an
 * old state sent again can never overwrite a newer one. When the outbox
 * holds THINGIF_OPT_OUTBOX_MAX requests, the oldest state upload in it is
 * dropped with a warning; when none is left to drop (results and
 * firmware-version reports fill it), the upload is refused with
 * THINGIF_ERR_FULL. Results are never dropped; while they alone fill the
 * outbox, new commands wait until the framework answers, in the inbox and
 * up to THINGIF_OPT_INBOX_MAX of them: when the inbox is full they run and
 * their results go beyond THINGIF_OPT_OUTBOX_MAX.
 *
 * @param t the handle.
 * @param state a JSON object. Borrowed only during the call; the caller keeps
 *           its reference.
 *
 * @return THINGIF_OK (in the outbox), THINGIF_ERR_INVALID,
 * THINGIF_ERR_JSON (not an object), THINGIF_ERR_NOT_ONBOARDED,
 * THINGIF_ERR_FULL, THINGIF_ERR_STORAGE (the outbox cannot be written).
 *
 * @par Thread
 * any, also from inside a handler.
 */
THINGIF_NODISCARD int thingif_state_update(thingif_t *t, const json_t *state);

/**
 * Uploads part of the state (PATCH targets/thing:{id}/states): the fields
 * given replace the stored ones, the others stay. Parameters and returns
 * as thingif_state_update().
 * @par Thread
 * any, also from inside a handler.
 */
THINGIF_NODISCARD int thingif_state_patch(thingif_t *t, const json_t *partial_state);

/**
 * Supplies the state for a periodic upload.
 *
 * @return a JSON object with a NEW reference, which the library steals, or
 * NULL to skip this upload.
 *
 * @par Thread
 * the loop thread. The same calls are allowed inside as in a
 * thingif_action_cb.
 */
typedef json_t *(*thingif_state_cb)(thingif_t *t, void *userdata);

/**
 * Uploads the state returned by cb every interval_ms (a full PUT), first
 * one interval after the call, while the thing is connected.
 *
 * @param t the handle.
 * @param cb the provider, or NULL to stop periodic uploads.
 * @param interval_ms 100 .. 86400000 (ignored when cb is NULL).
 * @param userdata passed to cb unchanged; the caller keeps it valid.
 *
 * @return THINGIF_OK or THINGIF_ERR_INVALID.
 * @par Thread
 * any, also from inside
 * a callback.
 */
THINGIF_NODISCARD int thingif_set_state_provider(thingif_t *t, thingif_state_cb cb, int interval_ms, void *userdata);

/**
 * Reports the firmware version (PUT things/{id}/firmware-version),
 * e.g.\ after an update. Goes through the outbox like a state upload.
 *
 * @param t the handle.
 * @param version not NULL or empty, copied.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, THINGIF_ERR_NOT_ONBOARDED,
 * THINGIF_ERR_FULL, THINGIF_ERR_STORAGE.
 * @par Thread
 * any, also from inside a handler.
 */
THINGIF_NODISCARD int thingif_firmware_version_update(thingif_t *t, const char *version);

/**
 * Runs the thing for up to timeout_ms on the calling thread: connects or
 * reconnects (with backoff), receives commands, runs their handlers, sends
 * results and state, and runs the periodic state provider. Call it again
 * and again, e.g. for (;;) thingif_loop(t, 1000);
 *
 * @param t the handle.
 * @param timeout_ms the most it waits for network activity: 0 .. 60000.
 *
 * @retval THINGIF_OK ran.
 * @retval THINGIF_ERR_NO_CONN not connected now; the next calls retry
 *                               after the reconnect backoff. Not fatal.
 * @retval THINGIF_ERR_NOT_ONBOARDED the thing has no identity yet.
 * @retval THINGIF_ERR_INVALID a NULL handle or timeout_ms out of range.
 * @retval THINGIF_ERR_STATE the loop thread of thingif_loop_start() runs.
 * @retval THINGIF_ERR_IN_CALLBACK called from inside a callback.
 *
 * @par Thread
 * one thread at a time; that thread becomes the loop thread for the
 * duration of the call.
 */
THINGIF_NODISCARD int thingif_loop(thingif_t *t, int timeout_ms);

/**
 * Starts a library-owned thread that calls thingif_loop() until
 * thingif_loop_stop() or thingif_destroy(). Handlers then run on it.
 *
 * @return THINGIF_OK, THINGIF_ERR_NOT_ONBOARDED, THINGIF_ERR_STATE (already
 * started, or another thread is inside thingif_loop()),
 * THINGIF_ERR_IN_CALLBACK (called from a callback), THINGIF_ERR_NOMEM (no
 * thread could be created).
 *
 * @par Thread
 * any but the loop thread.
 */
THINGIF_NODISCARD int thingif_loop_start(thingif_t *t);

/**
 * Stops the thread of thingif_loop_start() and waits for it to end (up to
 * about 200 ms after the running handler returns). The connection stays
 * up but is not serviced; thingif_loop() may be used afterwards.
 *
 * @return THINGIF_OK, THINGIF_ERR_STATE (not started),
 * THINGIF_ERR_IN_CALLBACK (called from a callback, in either loop style:
 * return from the callback first; joining its own thread would deadlock).
 *
 * @par Thread
 * any but the loop thread.
 */
THINGIF_NODISCARD int thingif_loop_stop(thingif_t *t);

/**
 * @name Action sets and timer triggers
 *
 * An action set is a named list of actions kept on the thing; executing it
 * runs its actions in order through the handlers registered for commands,
 * exactly as if a command with those actions had arrived: the command ledger
 * and the outbox apply, and the framework receives the command (PUT
 * targets/thing:{id}/commands/{commandID}, with "title" = the action set's
 * name) and then its action results. A timer trigger runs one or more
 * action sets at a date, once or on a recurrence, also while the thing is
 * offline (the reports wait in the outbox); each command it runs carries
 * "firedByTriggerID" = the trigger's name.
 *
 * Both are persisted in storage_dir (automation.json) and survive a
 * restart. Timers fire inside thingif_loop() (or the loop thread of
 * thingif_loop_start()), so only while the application runs the loop; a
 * firing missed while the thing was off happens once at the next loop turn.
 * The framework may also manage them remotely (docs/PROTOCOL.md, the
 * configuration message): those replace the remotely managed ones, and one
 * of the same name as a local one replaces the local one.
 *
 * Names are 1 .. 64 bytes of UTF-8, unique per thing among action sets and
 * among timer triggers, and compared byte for byte.
 * @{
 */

/** Recurrence units for thingif_timer_create(). */
enum thingif_recurrence {
    THINGIF_RECUR_NONE = 0,   /**< fires once */
    THINGIF_RECUR_MINUTE = 1, /**< every count minutes (absolute time) */
    THINGIF_RECUR_HOUR = 2,   /**< every count hours (absolute time) */
    THINGIF_RECUR_DAY = 3,    /**< every count days at the same local wall-clock time */
    THINGIF_RECUR_WEEK = 4    /**< every count weeks at the same local wall-clock time */
};

/**
 * Creates an empty action set.
 *
 * @param t the handle.
 * @param name 1 .. 64 bytes of UTF-8, copied.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID (NULL handle, bad name),
 * THINGIF_ERR_EXISTS (an action set of that name exists),
 * THINGIF_ERR_STORAGE (storage_dir cannot be written; nothing changed
 * on disk).
 *
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_actionset_create(thingif_t *t, const char *name);

/**
 * Appends an action to an action set.
 *
 * @param t the handle.
 * @param set the action set's name.
 * @param schema the schema the action belongs to, as in a command: the
 *               handler registered with thingif_on_action() for it runs.
 *               Not NULL or empty; copied.
 * @param schema_version the schema version, >= 0.
 * @param action the action's name, not NULL or empty; copied.
 * @param params the action's parameters (any JSON value), or NULL for an
 *               empty object. Borrowed only during the call: the library
 *               keeps a deep copy.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, THINGIF_ERR_NOT_FOUND (no such
 * action set), THINGIF_ERR_NOMEM, THINGIF_ERR_STORAGE.
 *
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_actionset_add_action(thingif_t *t, const char *set, const char *schema,
                                                   int schema_version, const char *action, const json_t *params);

/**
 * Removes one action from an action set; the later ones move up.
 *
 * @param t the handle.
 * @param set the action set's name.
 * @param index the action's position, 0-based.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID (also an index out of range),
 * THINGIF_ERR_NOT_FOUND (no such action set), THINGIF_ERR_STORAGE.
 *
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_actionset_remove_action(thingif_t *t, const char *set, int index);

/**
 * Deletes an action set.
 *
 * @param t the handle.
 * @param name the action set's name.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, THINGIF_ERR_NOT_FOUND,
 * THINGIF_ERR_STATE (a timer trigger uses it: delete the trigger first; an
 * error log line names it), THINGIF_ERR_STORAGE.
 *
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_actionset_delete(thingif_t *t, const char *name);

/**
 * Queues an action set for execution. The loop thread runs it at its next
 * turn, even when not connected: its actions run in order through the
 * handlers as one command (one per run of actions of the same schema and
 * version), with a new commandID "local-…", the issuer "thing:{thingID}"
 * and the action set's name as title; the command and its results go to
 * the framework through the outbox. A queued execution is not persisted:
 * one not yet run when the handle is destroyed is dropped.
 *
 * @param t the handle.
 * @param name the action set's name.
 *
 * @return THINGIF_OK (queued), THINGIF_ERR_INVALID,
 * THINGIF_ERR_NOT_ONBOARDED, THINGIF_ERR_NOT_FOUND.
 *
 * @par Thread
 * any, also from inside a callback (it then runs after the callback, at the
 * loop's next turn).
 */
THINGIF_NODISCARD int thingif_actionset_execute(thingif_t *t, const char *name);

/**
 * Creates a timer trigger, disabled: enable it with thingif_timer_enable().
 * When it fires, its action sets run in the order given (see
 * thingif_actionset_execute()), each reported with "firedByTriggerID".
 * After a firing, the next fire date is the first occurrence after the
 * clock: minute and hour recurrences add absolute time; day and week
 * recurrences keep the local wall-clock time of fire_date_ms in time_zone,
 * across daylight-saving changes (a local time that a change skips fires
 * an hour later that day). A trigger without recurrence is disabled after
 * it fires.
 *
 * @param t the handle.
 * @param name 1 .. 64 bytes of UTF-8, copied.
 * @param fire_date_ms the first firing, in milliseconds since the Unix
 *               epoch (UTC); it must be in the future by the handle's clock
 *               (thingif_set_clock()).
 * @param recurrence_unit an enum thingif_recurrence value.
 * @param recurrence_count how many units between firings, ignored for
 *               THINGIF_RECUR_NONE; the period must be between 5 minutes and
 *               5 weeks, inclusive.
 * @param time_zone an IANA time zone name such as "Europe/Paris", which
 *               must exist in the system's zoneinfo (TZDIR, else
 *               /usr/share/zoneinfo); copied.
 * @param action_sets the names of 1 .. 16 existing action sets; the array
 *               and the strings are copied.
 * @param n_action_sets the number of names in action_sets.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID (NULL or bad argument, fire date
 * not in the future, recurrence out of range, unknown time zone, unknown
 * action set: an error log line says which), THINGIF_ERR_EXISTS (a trigger
 * of that name exists), THINGIF_ERR_STORAGE.
 *
 * @par Thread
 * any, also from inside a callback. It calls the clock callback.
 */
THINGIF_NODISCARD int thingif_timer_create(thingif_t *t, const char *name, long long fire_date_ms, int recurrence_unit,
                                           int recurrence_count, const char *time_zone, const char *const *action_sets,
                                           int n_action_sets);

/**
 * Enables or disables a timer trigger. Enabling a recurring trigger whose
 * fire date passed while it was disabled moves it to its next occurrence
 * (a disabled period is not a missed firing).
 *
 * @param t the handle.
 * @param name the trigger's name.
 * @param enabled 1 to enable, 0 to disable.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID (also: enabling a one-time
 * trigger whose date has passed), THINGIF_ERR_NOT_FOUND,
 * THINGIF_ERR_STORAGE.
 *
 * @par Thread
 * any, also from inside a callback. It calls the clock callback.
 */
THINGIF_NODISCARD int thingif_timer_enable(thingif_t *t, const char *name, int enabled);

/**
 * Deletes a timer trigger.
 *
 * @param t the handle.
 * @param name the trigger's name.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, THINGIF_ERR_NOT_FOUND,
 * THINGIF_ERR_STORAGE.
 *
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_timer_delete(thingif_t *t, const char *name);

/**
 * Returns the current wall-clock time for timer triggers.
 *
 * @param userdata the pointer given to thingif_set_clock().
 * @return milliseconds since the Unix epoch (UTC).
 *
 * @par Thread
 * the loop thread, and any thread that calls thingif_timer_create() or
 * thingif_timer_enable(); it must be thread-safe and must not call thingif
 * functions.
 */
typedef long long (*thingif_clock_cb)(void *userdata);

/**
 * Replaces the clock that timer triggers read, for tests and simulators:
 * a test moves the clock over days in milliseconds. The network timing
 * (keepalive, reconnect backoff, request timeouts) keeps the system's
 * monotonic clock.
 *
 * @param t the handle.
 * @param cb the clock, or NULL to restore the system clock.
 * @param userdata passed to cb unchanged; the caller keeps it valid while
 *               the clock is set.
 *
 * @return THINGIF_OK or THINGIF_ERR_INVALID (NULL handle).
 *
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_set_clock(thingif_t *t, thingif_clock_cb cb, void *userdata);

/** @} */

/**
 * @defgroup gateway Gateways and end nodes
 * A gateway is a thing that carries end nodes: devices that cannot reach the
 * framework themselves (lamps on a radio, sensors on a bus). Each end node is
 * a thing of its own at the framework (thingID, owners, state, commands),
 * and all its traffic goes through the gateway's one handle: one connection,
 * one identity, and one ledger, outbox and inbox with the same durability
 * contract as the gateway's own commands (docs/GATEWAYS.md). Since 0.4.0.
 *
 * End nodes are named by their vendorThingID (the name the firmware has
 * for the device); the thingID arrives with THINGIF_END_NODE_ADDED. The
 * registry is kept in storage_dir/end_nodes.json (no password, no token).
 * Handlers are registered once (thingif_on_action() …) and serve the gateway
 * and every end node: thingif_action_end_node() says which end node an
 * action is for.
 *
 * On a handle that is not a gateway every call of this group but
 * thingif_set_layout_position() answers THINGIF_ERR_STATE (getters: NULL). A
 * library built with -DTHINGIF_GATEWAYS=OFF (a thing on its own, about 38 KB
 * smaller) answers THINGIF_ERR_UNSUPPORTED on every handle (getters: NULL),
 * and so does thingif_set_layout_position(t, THINGIF_LAYOUT_GATEWAY): that
 * is how firmware tells such a build.
 * @{
 */

/** Layout positions (Kii's layoutPosition), for thingif_set_layout_position(). */
enum thingif_layout {
    THINGIF_LAYOUT_STANDALONE = 0, /**< a thing on its own (the default) */
    THINGIF_LAYOUT_GATEWAY = 1     /**< a thing that carries end nodes */
};

/**
 * Makes the handle a gateway (or a thing on its own again): the onboarding
 * by the thing sends this layout ("layoutPosition"), and a gateway receives
 * its end nodes' commands and membership events. The framework keeps the
 * layout of a thing's first onboarding; a gateway must also have been
 * onboarded as one (an owner's onboarding with "layoutPosition":"GATEWAY",
 * before thingif_use_onboarded()). Not stored: call it at every start,
 * before the loop runs.
 *
 * @param t the handle.
 * @param layout a thingif_layout value.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, THINGIF_ERR_STATE (a loop runs),
 * THINGIF_ERR_UNSUPPORTED (GATEWAY in a build without gateways).
 * @par Thread
 * any, while no loop runs; not from inside a callback.
 */
THINGIF_NODISCARD int thingif_set_layout_position(thingif_t *t, int layout);

/** Events of thingif_end_node_cb. */
enum thingif_end_node_event {
    THINGIF_END_NODE_ADDED = 0,   /**< it has a thingID now (onboarded by this gateway, or by an owner) */
    THINGIF_END_NODE_REFUSED = 1, /**< the framework refused its onboarding (detail says why); it is forgotten */
    THINGIF_END_NODE_REMOVED = 2, /**< removed (by an owner, or thingif_end_node_remove() confirmed); forgotten */
    THINGIF_END_NODE_CHANGED = 3  /**< the framework gave it another vendorThingID (vendor_thing_id is the new
                                       one), or this vendorThingID another thingID */
};

/**
 * Told when an end node's membership changes.
 *
 * @param t the handle.
 * @param event a thingif_end_node_event value.
 * @param vendor_thing_id the end node; borrowed, valid during the call.
 * @param thing_id its thingID; NULL for THINGIF_END_NODE_REFUSED. Borrowed.
 * @param detail the framework's status and answer for REFUSED, else NULL. Borrowed.
 * @param userdata as given to thingif_set_end_node_callback().
 *
 * @par Thread
 * the loop thread, with no lock of the library held. The calls allowed in a
 * thingif_action_cb are allowed here, and every thingif_end_node_* call.
 */
typedef void (*thingif_end_node_cb)(thingif_t *t, int event, const char *vendor_thing_id, const char *thing_id,
                                    const char *detail, void *userdata);

/**
 * Sets (or, with NULL, removes) the end-node callback.
 * @return THINGIF_OK or THINGIF_ERR_INVALID.
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_set_end_node_callback(thingif_t *t, thingif_end_node_cb cb, void *userdata);

/**
 * Registers an end node the gateway found and onboards it through the
 * gateway (Kii's OnboardingEndNodeWithGatewayThingID, with the gateway's
 * token). Does not block: the registry is written and synced, and the
 * request put in the outbox, before it returns; it is sent when connected
 * and again until the framework answers. The answer comes to the end-node
 * callback as THINGIF_END_NODE_ADDED (with the thingID) or _REFUSED. The
 * password is kept only in the outbox (storage_dir/outbox.jsonl, mode 0600)
 * until the framework answers. The end node is online from this call on
 * (see thingif_end_node_set_online()).
 *
 * @param t the handle, a gateway (thingif_set_layout_position()), onboarded.
 * @param vendor_thing_id 1 .. 200 bytes of UTF-8; copied.
 * @param password 1 .. 200 bytes of UTF-8; copied.
 * @param thing_type NULL for none; copied.
 * @param firmware_version NULL for none; copied.
 * @param properties_json the text of a JSON object, or NULL.
 *
 * @return THINGIF_OK (in the outbox), THINGIF_ERR_INVALID,
 * THINGIF_ERR_JSON (properties_json is not an object), THINGIF_ERR_STATE
 * (not a gateway), THINGIF_ERR_NOT_ONBOARDED, THINGIF_ERR_EXISTS (registered
 * already), THINGIF_ERR_TOO_MANY, THINGIF_ERR_FULL (outbox),
 * THINGIF_ERR_STORAGE.
 * @par Thread
 * any, also from inside a handler or the end-node callback.
 */
THINGIF_NODISCARD int thingif_end_node_add(thingif_t *t, const char *vendor_thing_id, const char *password,
                                           const char *thing_type, const char *firmware_version,
                                           const char *properties_json);

/**
 * The end node's thingID.
 *
 * @return the thingID, or NULL until it is ADDED (and for an unknown end
 * node). Owned by the handle and valid until thingif_destroy(): the handle
 * keeps one copy per thingID it has handed out (so another thread's change
 * never frees a string in use).
 * @par Thread
 * any, also from inside a callback.
 */
const char *thingif_end_node_thing_id(thingif_t *t, const char *vendor_thing_id);

/**
 * Says whether the device is reachable now: publishes "online" or "offline",
 * retained, on its status topic (at once when connected and the end node
 * has a thingID, else after the next connect or its ADDED). The framework
 * holds its commands while it is offline. Every end node is offline when
 * the handle is created, until this call says otherwise.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, THINGIF_ERR_STATE (not a
 * gateway), THINGIF_ERR_NOT_FOUND.
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_end_node_set_online(thingif_t *t, const char *vendor_thing_id, int online);

/**
 * Removes an end node. One with a thingID: its commands are refused from now
 * on (every action fails with data {"reason":"REMOVED"}), and DELETE
 * things/{gateway}/end-nodes/{thingID} goes through the outbox; the
 * framework deletes the end node with its history, and the callback is told
 * THINGIF_END_NODE_REMOVED when it confirms. One still waiting for its
 * onboarding is forgotten at once and its onboarding withdrawn (no
 * callback); if the framework had taken it already, the next connect's list
 * brings it back as ADDED.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, THINGIF_ERR_STATE (not a
 * gateway), THINGIF_ERR_NOT_ONBOARDED, THINGIF_ERR_NOT_FOUND,
 * THINGIF_ERR_FULL, THINGIF_ERR_STORAGE.
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_end_node_remove(thingif_t *t, const char *vendor_thing_id);

/**
 * Uploads an end node's whole state, as thingif_state_update() does for the
 * thing, through the same outbox: a full state supersedes only that end
 * node's waiting uploads.
 *
 * @return as thingif_state_update(), and THINGIF_ERR_STATE (not a gateway),
 * THINGIF_ERR_NOT_FOUND for an unknown end node, THINGIF_ERR_NOT_ONBOARDED
 * for one not ADDED yet (upload from the end-node callback).
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_end_node_state_update(thingif_t *t, const char *vendor_thing_id, const json_t *state);

/** Part of an end node's state, as thingif_state_patch(); returns as
 * thingif_end_node_state_update(). @par Thread any, also from inside a callback. */
THINGIF_NODISCARD int thingif_end_node_state_patch(thingif_t *t, const char *vendor_thing_id,
                                                   const json_t *partial_state);

/** An end node's firmware version, as thingif_firmware_version_update();
 * returns as thingif_end_node_state_update(). @par Thread any, also from inside a callback. */
THINGIF_NODISCARD int thingif_end_node_firmware_version_update(thingif_t *t, const char *vendor_thing_id,
                                                               const char *version);

/** Told once per end node by thingif_end_node_foreach(); the strings are
 * borrowed for the call, thing_id NULL until ADDED. */
typedef void (*thingif_end_node_each_cb)(const char *vendor_thing_id, const char *thing_id, int online, void *userdata);

/**
 * Calls cb once per registered end node, in registration order, on the
 * calling thread, with a copy of the registry taken before the first call
 * (cb may call the thingif_end_node_* functions). On a handle that is not a
 * gateway there are none.
 *
 * @return THINGIF_OK or THINGIF_ERR_INVALID.
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_end_node_foreach(thingif_t *t, thingif_end_node_each_cb cb, void *userdata);

/**
 * Inside an action handler: the vendorThingID of the end node the action is
 * for, or NULL when it is the gateway's own (and for a thing that is no
 * gateway). Borrowed, valid until the handler returns.
 * @par Thread
 * the handler's own call only.
 */
const char *thingif_action_end_node(const thingif_action_t *action);

/**
 * Inside an action handler: the thingID the command targets, the end node's
 * or the thing's own. Borrowed, valid until the handler returns.
 * @par Thread
 * the handler's own call only.
 */
const char *thingif_action_thing_id(const thingif_action_t *action);

/** @} */

/**
 * @defgroup update Firmware updates
 * An update job arrives as an ordinary command (held while the thing is
 * offline, run at most once) and goes on in the library: the signed
 * manifest checked against the firmware's trust file, the installer asked,
 * the image fetched in blocks over the thing's own connection, each block
 * checked against the signed hash list before a byte of it reaches the
 * installer, the install, the reboot, and the trial of the new image until
 * the firmware confirms it (docs/UPDATES.md). One job at a time, in a
 * journal of its own under the storage directory: a power cut at any point
 * resumes it. Every step is reported to the framework through the outbox.
 *
 * The installer is the firmware's: these callbacks, set once at each start
 * with thingif_set_installer(). Every callback runs on the loop thread
 * with no lock of the library held; none may call thingif_loop() or
 * thingif_destroy(). A build without updates (-DTHINGIF_UPDATES=OFF)
 * answers every call here THINGIF_ERR_UNSUPPORTED.
 * @{
 */

/** What thingif_installer.offer answers. */
enum thingif_update_decision {
    THINGIF_UPDATE_ACCEPT = 0, /**< take the job: the download starts */
    THINGIF_UPDATE_DEFER = 1,  /**< not now (battery, maintenance window): reported DELAYED, offered again later */
    THINGIF_UPDATE_REFUSE = 2  /**< not this one (no space): reported REJECTED */
};

/** Statuses of an update job, as thingif_update_status() gives them (docs/UPDATES.md §6). */
enum thingif_update_status {
    THINGIF_UPDATE_NONE = 0,        /**< no job, since the storage directory was made */
    THINGIF_UPDATE_DOWNLOADING = 1, /**< taken; blocks are being fetched */
    THINGIF_UPDATE_INSTALLING = 2,  /**< every block verified; the installer was started */
    THINGIF_UPDATE_REBOOTING = 3,   /**< installed; the reboot was asked for */
    THINGIF_UPDATE_TRIAL = 4,       /**< the new image runs: call thingif_update_confirm() */
    THINGIF_UPDATE_SUCCEEDED = 5,   /**< confirmed: the last job ended well */
    THINGIF_UPDATE_ROLLED_BACK = 6, /**< the previous version runs again */
    THINGIF_UPDATE_FAILED = 7,      /**< ended without a change (bad blocks, the install failed, cut off too often) */
    THINGIF_UPDATE_CANCELLED = 8    /**< the framework ended it before the install */
};

/**
 * A verified update as the installer's callbacks see it. Every pointer is
 * borrowed, valid during the callback only.
 */
typedef struct thingif_update_info {
    const char *job_id;          /**< the framework's name of the job */
    const char *update_id;       /**< the manifest's updateID */
    const char *version;         /**< the version the image brings */
    const char *compatible;      /**< the thing type it is for (checked already) */
    uint64_t size;               /**< the image's bytes */
    const unsigned char *sha256; /**< 32 bytes: the whole image's SHA-256 (every block is checked already) */
    const char *metadata_json;   /**< the manifest's "metadata" as JSON text, or NULL */
    const char *image_path;      /**< file mode (no write callback): the image's file; else NULL */
} thingif_update_info;

/**
 * The firmware's installer. offer, install, reboot, commit and rollback are
 * required; write and flush go together: both NULL is the file mode, where
 * the library writes the image to "update.img" in the storage directory
 * (fsync at each checkpoint) and names it in thingif_update_info.image_path.
 */
typedef struct thingif_installer {
    /**
     * A manifest signed by a trusted key, for this thing type, not below its
     * security version, is offered. Return a thingif_update_decision; for
     * DEFER and REFUSE, message (message_size bytes, zeroed) may say why.
     */
    int (*offer)(thingif_t *t, const thingif_update_info *info, char *message, size_t message_size, void *userdata);
    /**
     * Writes length bytes (at most 32 KiB, checked against the signed hashes
     * already) at offset of the image. Blocks come in any order, and a block
     * may be written again after a power cut. Return 0, or nonzero to fail
     * the job (FAILED SINK_FAILED).
     */
    int (*write)(thingif_t *t, uint64_t offset, const void *bytes, size_t length, void *userdata);
    /**
     * Makes every byte written so far durable (fsync), before the library
     * records those blocks as held. Return 0, or nonzero to fail the job.
     */
    int (*flush)(thingif_t *t, void *userdata);
    /**
     * Every block is held: start the installer and return. Tell the outcome
     * with thingif_update_installed(), from any thread. A power cut before
     * that starts it again at the next start (at most 3 starts in all).
     * Return 0, or nonzero for an install that cannot start (FAILED).
     */
    int (*install)(thingif_t *t, const thingif_update_info *info, void *userdata);
    /**
     * The install succeeded and is recorded: reboot into the new image. It
     * need not return. The next start, with thingif_set_installer() naming
     * the running version, goes on: the new version starts the trial, the
     * previous one reports ROLLED_BACK (the bootloader fell back).
     */
    void (*reboot)(thingif_t *t, void *userdata);
    /**
     * The trial boot was confirmed (thingif_update_confirm(), connected):
     * mark the running image good. Return 0, or nonzero: the trial goes on
     * and commit is asked again at the next confirmation.
     */
    int (*commit)(thingif_t *t, void *userdata);
    /**
     * The trial failed (thingif_update_reject(), its deadline passed
     * unconfirmed, or it booted too often): switch back to the previous
     * image and reboot. The next start reports ROLLED_BACK.
     * Also when the library gives up an install cut off 3 times (FAILED
     * INSTALL_INTERRUPTED): make sure the slot being installed does not
     * boot (the previous image runs, so a reboot is not needed); and again
     * at a start that finds that slot running after all.
     */
    void (*rollback)(thingif_t *t, void *userdata);
} thingif_installer;

/** What thingif_set_installer() is told of the firmware. */
typedef struct thingif_update_config {
    const char *thing_type;      /**< required: manifests for another type are refused */
    const char *running_version; /**< required: the version running now (1-64 printable ASCII, no space) */
    const char *trust_file;      /**< required: the firmware's trust file (docs/UPDATES.md §3) */
    int max_trial_boots;         /**< boots of a trial before it rolls back; 0: 3 */
} thingif_update_config;

/**
 * Sets the installer and reads where the last job was: call it at every
 * start, after thingif_create() and before the loop runs. What a restart
 * does with the job (more blocks, the install again, the trial, a report of
 * the rollback) happens in the loop. Without an installer, an update offer
 * fails with "NO_INSTALLER".
 *
 * @param t the handle.
 * @param installer the callbacks; copied.
 * @param config the firmware's facts; its strings are copied, and the
 *        trust file is read during the call.
 * @param userdata given to every callback.
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID (a NULL argument, a required
 *         callback or field missing, only one of write and flush),
 *         THINGIF_ERR_JSON (the trust file is not its form; an error log
 *         line says why), THINGIF_ERR_STORAGE (the trust file or the
 *         journal cannot be read), THINGIF_ERR_STATE (a loop runs, or an
 *         installer is set already), THINGIF_ERR_UNSUPPORTED.
 * @par Thread
 * any, while no loop runs; not from inside a callback.
 */
THINGIF_NODISCARD int thingif_set_installer(thingif_t *t, const thingif_installer *installer,
                                            const thingif_update_config *config, void *userdata);

/**
 * The installer started by thingif_installer.install has finished.
 *
 * @param t the handle.
 * @param ok nonzero: installed, the library records it and calls reboot;
 *        zero: failed, the job ends FAILED INSTALL_FAILED with message.
 * @param message why it failed, or NULL; copied (at most 256 bytes kept).
 *
 * @return THINGIF_OK (taken: the loop acts at its next turn),
 *         THINGIF_ERR_STATE (no install is under way),
 *         THINGIF_ERR_INVALID, THINGIF_ERR_UNSUPPORTED.
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_update_installed(thingif_t *t, int ok, const char *message);

/**
 * In the trial boot, the firmware's self-test passed: once the thing is
 * connected the library calls thingif_installer.commit and reports the job
 * SUCCEEDED with the running version (the framework's record of the
 * thing's firmware version). Before the connection, the confirmation waits.
 *
 * @return THINGIF_OK (taken), THINGIF_ERR_STATE (no trial runs: after the
 *         reboot the trial starts at the loop's first turn, from when
 *         thingif_update_status() says THINGIF_UPDATE_TRIAL),
 *         THINGIF_ERR_INVALID, THINGIF_ERR_UNSUPPORTED.
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_update_confirm(thingif_t *t);

/**
 * In the trial boot, the firmware's self-test failed: the library calls
 * thingif_installer.rollback at its next turn.
 *
 * @param t the handle.
 * @param message why, or NULL; copied (at most 256 bytes kept).
 *
 * @return THINGIF_OK, THINGIF_ERR_STATE (no trial runs),
 *         THINGIF_ERR_INVALID, THINGIF_ERR_UNSUPPORTED.
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_update_reject(thingif_t *t, const char *message);

/**
 * The job the thing holds, or had last.
 *
 * @param t the handle.
 * @param status set to a thingif_update_status value.
 * @param blocks_held set to the blocks made durable (may be NULL).
 * @param blocks set to the image's blocks (may be NULL).
 *
 * @return THINGIF_OK, THINGIF_ERR_INVALID, THINGIF_ERR_STATE (no installer
 *         is set), THINGIF_ERR_UNSUPPORTED.
 * @par Thread
 * any, also from inside a callback.
 */
THINGIF_NODISCARD int thingif_update_status(thingif_t *t, int *status, uint64_t *blocks_held, uint64_t *blocks);

/** @} */

/**
 * @defgroup deprecated Old names
 * The names of 0.2.0, kept so that programs written for it still compile
 * and link: each is the same function as its new name, exported as before.
 * New code uses the new names; these may go at the next ABI version.
 * @{
 */
/* One declaration per line, each with its comment right above it. */
/* clang-format off */
/**
 * Deprecated: the old name of thingif_state_update(), the same function: state is borrowed for the call;
 * the same threads and return codes as thingif_state_update().
 */
THINGIF_NODISCARD THINGIF_DEPRECATED("thingif_state_update") int thingif_update_state(thingif_t *t, const json_t *state);
/**
 * Deprecated: the old name of thingif_state_patch(), the same function: partial_state is borrowed for the call;
 * the same threads and return codes as thingif_state_patch().
 */
THINGIF_NODISCARD THINGIF_DEPRECATED("thingif_state_patch") int thingif_patch_state(thingif_t *t, const json_t *partial_state);
/**
 * Deprecated: the old name of thingif_firmware_version_update(), the same function: version is copied;
 * the same threads and return codes as thingif_firmware_version_update().
 */
THINGIF_NODISCARD THINGIF_DEPRECATED("thingif_firmware_version_update") int thingif_update_firmware_version(thingif_t *t, const char *version);
/**
 * Deprecated: the old name of thingif_actionset_create(), the same function: name is copied;
 * the same threads and return codes as thingif_actionset_create().
 */
THINGIF_NODISCARD THINGIF_DEPRECATED("thingif_actionset_create") int thingif_action_set_create(thingif_t *t, const char *name);
/**
 * Deprecated: the old name of thingif_actionset_add_action(), the same function: the strings are copied, params deep-copied;
 * the same threads and return codes as thingif_actionset_add_action().
 */
THINGIF_NODISCARD THINGIF_DEPRECATED("thingif_actionset_add_action") int thingif_action_set_add_action(thingif_t *t, const char *set, const char *schema, int schema_version, const char *action, const json_t *params);
/**
 * Deprecated: the old name of thingif_actionset_remove_action(), the same function: set is read during the call;
 * the same threads and return codes as thingif_actionset_remove_action().
 */
THINGIF_NODISCARD THINGIF_DEPRECATED("thingif_actionset_remove_action") int thingif_action_set_remove_action(thingif_t *t, const char *set, int index);
/**
 * Deprecated: the old name of thingif_actionset_delete(), the same function: name is read during the call;
 * the same threads and return codes as thingif_actionset_delete().
 */
THINGIF_NODISCARD THINGIF_DEPRECATED("thingif_actionset_delete") int thingif_action_set_delete(thingif_t *t, const char *name);
/**
 * Deprecated: the old name of thingif_actionset_execute(), the same function: name is read during the call;
 * the same threads and return codes as thingif_actionset_execute().
 */
THINGIF_NODISCARD THINGIF_DEPRECATED("thingif_actionset_execute") int thingif_action_set_execute(thingif_t *t, const char *name);
/* clang-format on */
/** @} */

#ifdef __cplusplus
}
#endif

#endif /* THINGIF_H */
