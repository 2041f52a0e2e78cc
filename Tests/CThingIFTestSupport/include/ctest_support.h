/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ctest_support.h - a C "test appliance" for the Swift test harness.
 *
 * It drives libthingif only through include/thingif.h, as firmware does, so
 * every function of the header is compiled and called from C. Handlers record
 * what they saw; the Swift tests read those records and the log lines back
 * through the accessors below.
 *
 * Threads: handlers and the log callback run on the library's loop thread,
 * the accessors on the test's thread; a mutex guards everything shared.
 * Strings returned as char * are malloc'd: the caller frees them.
 */
#ifndef CTEST_SUPPORT_H
#define CTEST_SUPPORT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_thing ct_thing;

/* thingif_new + thingif_set_broker(127.0.0.1, port) + a log callback that
 * keeps lines up to log_level. NULL when thingif_new fails. */
ct_thing *ct_new(const char *app_id, const char *app_key, const char *storage_dir, int port, int log_level);

/* thingif_destroy on a helper thread, bounded by timeout_ms. Returns its
 * status (the appliance is freed on THINGIF_OK), or -1 on a timeout (then
 * everything is left allocated, since the library may still use it). */
int ct_free(ct_thing *ct, int timeout_ms);
/* Only thingif_destroy, bounded like ct_free; the appliance (records, logs,
 * deferred handles) stays for reading and for ct_complete_deferred. */
int ct_destroy_handle(ct_thing *ct, int timeout_ms);

int ct_set_option(ct_thing *ct, int option, long value);
int ct_onboard(ct_thing *ct, const char *vendor_thing_id, const char *password, const char *thing_type,
               const char *firmware_version, const char *properties_json);
int ct_use_onboarded(ct_thing *ct, const char *thing_id, const char *access_token);
/* thingif_thing_id: borrowed from the library. */
const char *ct_thing_id(ct_thing *ct);
int ct_is_connected(ct_thing *ct);

/* Handlers. The AirConditioner-Demo handlers validate their params with
 * json_unpack_ex and keep the device state (power, presetTemperature,
 * fanSpeed). Every handler records what it saw, with a tag naming the
 * registration that ran. */
int ct_register_aircon_handlers(ct_thing *ct, const char *schema, int schema_version);
int ct_register_alias_handlers(ct_thing *ct, const char *alias);
int ct_register_recorder(ct_thing *ct, const char *schema, int schema_version, const char *action, const char *tag);
int ct_register_alias_recorder(ct_thing *ct, const char *alias, const char *action, const char *tag);
/* A NULL tag removes the catch-all. */
int ct_register_any(ct_thing *ct, const char *tag);
int ct_unregister(ct_thing *ct, const char *schema, int schema_version, const char *action);
int ct_unregister_alias(ct_thing *ct, const char *alias, const char *action);

/* Behaviors, by action name, applied by every handler after recording. */
int ct_behave_fail(ct_thing *ct, const char *action, const char *message);
int ct_behave_data(ct_thing *ct, const char *action, const char *data_json);
/* After the action, upload the device state: mode 1 = PUT, 2 = PATCH. */
int ct_behave_upload_state(ct_thing *ct, const char *action, int mode);
/* Inside the action, call the functions a handler may not call (their
 * statuses go into the record's "forbidden") and those it may (into
 * "allowed"). */
int ct_behave_probe(ct_thing *ct, const char *action);
/* on = 1: the handler calls thingif_action_defer (twice: the record's
 * "deferred" is true when both gave the same handle) after every other
 * behavior, and keeps the handle for ct_complete_deferred. */
int ct_behave_defer(ct_thing *ct, const char *action, int on);
/* thingif_deferred_complete on the oldest kept handle of `action` (NULL: of
 * any action), from the calling thread. error_message NULL means success;
 * data_json is any JSON text (not only objects) or NULL. Returns the
 * library's status, -1 for unparsable data_json, -2 when no handle is kept. */
int ct_complete_deferred(ct_thing *ct, const char *action, const char *error_message, const char *data_json);
/* (ct_complete_deferred: on THINGIF_ERR_INVALID the library leaves the handle
 * valid, so it is kept, first in line, for the next call.) */
/* The handler of `action` sleeps ms milliseconds (a slow device). */
int ct_behave_sleep(ct_thing *ct, const char *action, int ms);
/* The handler of `action` waits until ct_release (a device busy for as long
 * as a test needs), at most max_ms; ct_holding says how many handlers wait. */
int ct_behave_hold(ct_thing *ct, const char *action, int max_ms);
void ct_release(ct_thing *ct);
int ct_holding(ct_thing *ct);
/* The thingif_t * inside (for a Swift test hook on the library's internals). */
void *ct_handle(ct_thing *ct);
int ct_deferred_count(ct_thing *ct);

int ct_set_broker(ct_thing *ct, const char *host, int port);
int ct_set_tls(ct_thing *ct, const char *cafile, const char *certfile, const char *keyfile);
int ct_set_claim_certificate(ct_thing *ct, const char *certfile, const char *keyfile);

/* Loop control. ct_stop is bounded like ct_free (-1 on a timeout). */
int ct_start(ct_thing *ct);
int ct_stop(ct_thing *ct, int timeout_ms);
int ct_loop_once(ct_thing *ct, int timeout_ms);
/* Calls thingif_loop(t, 50) for about ms milliseconds; returns the last status. */
int ct_loop_for(ct_thing *ct, int ms);

/* State. JSON arguments are text; an unparsable one gives -1. */
int ct_update_state(ct_thing *ct, const char *state_json);
int ct_patch_state(ct_thing *ct, const char *state_json);
int ct_update_firmware_version(ct_thing *ct, const char *version);
/* interval_ms 0 removes the provider. The provider returns
 * {"power":…,"presetTemperature":…,"fanSpeed":…,"tick":n}. */
int ct_set_state_provider(ct_thing *ct, int interval_ms);
int ct_state_provider_calls(ct_thing *ct);

/* Action sets and timer triggers: pass-throughs. params_json is any JSON
 * text or NULL (-1 when unparsable); action_sets_csv names the action sets
 * separated by commas. */
int ct_action_set_create(ct_thing *ct, const char *name);
int ct_action_set_add_action(ct_thing *ct, const char *set, const char *schema, int schema_version, const char *action,
                             const char *params_json);
int ct_action_set_remove_action(ct_thing *ct, const char *set, int index);
int ct_action_set_delete(ct_thing *ct, const char *name);
int ct_action_set_execute(ct_thing *ct, const char *name);
int ct_timer_create(ct_thing *ct, const char *name, long long fire_date_ms, int recurrence_unit, int recurrence_count,
                    const char *time_zone, const char *action_sets_csv);
int ct_timer_enable(ct_thing *ct, const char *name, int enabled);
int ct_timer_delete(ct_thing *ct, const char *name);
/* thingif_set_clock with a clock the test sets (ct_clock_set), starting at
 * start_ms; ct_use_system_clock restores the system clock. */
int ct_use_fake_clock(ct_thing *ct, long long start_ms);
void ct_clock_set(ct_thing *ct, long long ms);
int ct_use_system_clock(ct_thing *ct);

/* Gateways. ct_gateway: thingif_set_layout_position(GATEWAY) and an end-node
 * callback that records each call (with what thingif_end_node_thing_id says
 * inside it), read back with ct_end_node_events_json:
 * [{"event","vendorThingID","thingID","detail","lookedUp"}]. The others are
 * pass-throughs; JSON arguments are text (-1 when unparsable);
 * ct_end_node_thing_id returns a malloc'd copy or NULL; ct_end_node_list_json
 * is thingif_end_node_foreach as [{"vendorThingID","thingID","online"}]. */
int ct_gateway(ct_thing *ct);
char *ct_end_node_events_json(ct_thing *ct);
int ct_end_node_add(ct_thing *ct, const char *vendor_thing_id, const char *password, const char *thing_type,
                    const char *firmware_version, const char *properties_json);
char *ct_end_node_thing_id(ct_thing *ct, const char *vendor_thing_id);
int ct_end_node_set_online(ct_thing *ct, const char *vendor_thing_id, int online);
int ct_end_node_remove(ct_thing *ct, const char *vendor_thing_id);
int ct_end_node_state_update(ct_thing *ct, const char *vendor_thing_id, const char *state_json);
int ct_end_node_state_patch(ct_thing *ct, const char *vendor_thing_id, const char *state_json);
int ct_end_node_firmware_version_update(ct_thing *ct, const char *vendor_thing_id, const char *version);
char *ct_end_node_list_json(ct_thing *ct);

/* Records: a JSON array, one object per handler call, in order:
 * {"tag","name","params" (JSON text),"commandID","issuer","schema",
 *  "schemaVersion","alias","title","description","metadata" (JSON text),
 *  "index","thingMatches","expiresAt" (0: none),"endNode","targetThingID",
 *  "forbidden"?,"allowed"?}; absent strings are null. */
char *ct_records_json(ct_thing *ct);
int ct_record_count(ct_thing *ct);
void ct_clear_records(ct_thing *ct);

/* Log lines as "LEVEL message", newline-separated. */
char *ct_logs_text(ct_thing *ct);
int ct_log_contains(ct_thing *ct, const char *needle);
/* `hook` is called with each log line ("LEVEL message") after it is kept,
 * on the thread that logged it (the loop thread for the library's own
 * lines), before the library goes on: a test acts at that exact point.
 * NULL removes it. */
typedef void (*ct_log_hook)(const char *line, void *userdata);
void ct_set_log_hook(ct_thing *ct, ct_log_hook hook, void *userdata);

/* Pass-throughs for version and status texts. */
const char *ct_version(void);
const char *ct_version_macro(void);
const char *ct_strerror(int status);

/* Calls every function of thingif.h with NULL, empty and out-of-range
 * arguments on handles that are not onboarded. Returns the number of checks
 * that gave an unexpected answer and describes them in report. */
int ct_api_misuse(const char *scratch_dir, char *report, size_t report_len);

#ifdef __cplusplus
}
#endif

#endif /* CTEST_SUPPORT_H */
