# SPDX-License-Identifier: Apache-2.0

"""Loading libthingif and libjansson, and the C prototypes (internal)."""

import ctypes
import ctypes.util
import json
import os
import sys

__all__ = ["lib", "jansson", "libc", "library_path"]

# The callback types of include/thingif.h. thingif_t * and thingif_action_t *
# travel as plain addresses (c_void_p).
LOG_CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
ACTION_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
STATE_CB = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
CLOCK_CB = ctypes.CFUNCTYPE(ctypes.c_longlong, ctypes.c_void_p)
# thingif_end_node_cb(t, event, vendor_thing_id, thing_id, detail, userdata) and
# thingif_end_node_each_cb(vendor_thing_id, thing_id, online, userdata). The
# strings are borrowed for the call: c_char_p copies them into bytes.
END_NODE_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.c_char_p, ctypes.c_void_p)
END_NODE_EACH_CB = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p)

# jansson flags (jansson.h).
JSON_DECODE_ANY = 0x4
JSON_COMPACT = 0x20
JSON_ENCODE_ANY = 0x200

_LIB_DIRS = (
    "/usr/local/lib",
    "/usr/local/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/arm-linux-gnueabihf",
    "/opt/homebrew/lib",
)
# libthingif.so.N: N is the header's THINGIF_ABI_VERSION (a test checks it).
_LIB_NAMES = ("libthingif.so.2", "libthingif.so", "libthingif.dylib")


def _candidates():
    env = os.environ.get("THINGIF_LIBRARY")
    if env:
        # An explicit choice: use it or fail, never fall back silently.
        return [env], True
    found = []
    name = ctypes.util.find_library("thingif")
    if name:
        found.append(name)
    for d in _LIB_DIRS:
        for n in _LIB_NAMES:
            p = os.path.join(d, n)
            if os.path.exists(p):
                found.append(p)
    return found, False


def _load_thingif():
    candidates, explicit = _candidates()
    errors = []
    for c in candidates:
        try:
            return ctypes.CDLL(c), c
        except OSError as e:
            errors.append("%s: %s" % (c, e))
    if explicit:
        raise ImportError("thingif: cannot load THINGIF_LIBRARY=%s (%s)" % (candidates[0], "; ".join(errors)))
    raise ImportError(
        "thingif: libthingif not found. Install it (cmake --install) or set "
        "THINGIF_LIBRARY to the path of libthingif.so" + (" (tried: %s)" % "; ".join(errors) if errors else "")
    )


lib, library_path = _load_thingif()


def _load_jansson():
    # dlsym on libthingif's handle also searches the libraries it was loaded
    # with, so this finds the very jansson that libthingif uses.
    try:
        lib.json_loads  # noqa: B018 (probe)
        return lib
    except AttributeError:
        pass
    names = [os.environ.get("THINGIF_JANSSON_LIBRARY"), ctypes.util.find_library("jansson"),
             "libjansson.so.4", "libjansson.dylib"]
    for n in names:
        if not n:
            continue
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    raise ImportError("thingif: libjansson not found (apt install libjansson4)")


jansson = _load_jansson()
libc = ctypes.CDLL(ctypes.util.find_library("c") or ("libc.dylib" if sys.platform == "darwin" else "libc.so.6"))


# Every libthingif function the binding declares (a test compares it with
# include/thingif.h).
declared = []


def _proto(name, restype, *argtypes):
    declared.append(name)
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_p = ctypes.c_void_p
_s = ctypes.c_char_p
_i = ctypes.c_int


# Firmware updates (thingif.h, "update" group).
class UPDATE_INFO(ctypes.Structure):
    """struct thingif_update_info: borrowed for the callback's call."""
    _fields_ = [("job_id", _s), ("update_id", _s), ("version", _s), ("compatible", _s),
                ("size", ctypes.c_uint64), ("sha256", ctypes.POINTER(ctypes.c_ubyte)),
                ("metadata_json", _s), ("image_path", _s)]


UPDATE_OFFER_CB = ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.POINTER(UPDATE_INFO), _p, ctypes.c_size_t, _p)
UPDATE_WRITE_CB = ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.c_uint64, _p, ctypes.c_size_t, _p)
UPDATE_INT_CB = ctypes.CFUNCTYPE(ctypes.c_int, _p, _p)
UPDATE_INSTALL_CB = ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.POINTER(UPDATE_INFO), _p)
UPDATE_VOID_CB = ctypes.CFUNCTYPE(None, _p, _p)


class INSTALLER(ctypes.Structure):
    """struct thingif_installer."""
    _fields_ = [("offer", UPDATE_OFFER_CB), ("write", UPDATE_WRITE_CB), ("flush", UPDATE_INT_CB),
                ("install", UPDATE_INSTALL_CB), ("reboot", UPDATE_VOID_CB), ("commit", UPDATE_INT_CB),
                ("rollback", UPDATE_VOID_CB)]


class UPDATE_CONFIG(ctypes.Structure):
    """struct thingif_update_config."""
    _fields_ = [("thing_type", _s), ("running_version", _s), ("trust_file", _s), ("max_trial_boots", _i)]


_proto("thingif_version", _s)
_proto("thingif_strerror", _s, _i)
_proto("thingif_new", _p, _s, _s, _s)
_proto("thingif_destroy", _i, _p)
_proto("thingif_set_log_callback", _i, _p, LOG_CB, _i, _p)
_proto("thingif_set_option", _i, _p, _i, ctypes.c_long)
_proto("thingif_set_broker", _i, _p, _s, _i)
_proto("thingif_set_tls", _i, _p, _s, _s, _s)
_proto("thingif_set_claim_certificate", _i, _p, _s, _s)
_proto("thingif_onboard", _i, _p, _s, _s, _s, _s, _s)
_proto("thingif_use_onboarded", _i, _p, _s, _s)
_proto("thingif_thing_id", _s, _p)
_proto("thingif_is_connected", _i, _p)
_proto("thingif_on_action", _i, _p, _s, _i, _s, ACTION_CB, _p)
_proto("thingif_on_alias_action", _i, _p, _s, _s, ACTION_CB, _p)
_proto("thingif_on_any_action", _i, _p, ACTION_CB, _p)
_proto("thingif_action_name", _s, _p)
_proto("thingif_action_params", _p, _p)
_proto("thingif_action_command_id", _s, _p)
_proto("thingif_action_issuer", _s, _p)
_proto("thingif_action_schema", _s, _p)
_proto("thingif_action_schema_version", _i, _p)
_proto("thingif_action_alias", _s, _p)
_proto("thingif_action_title", _s, _p)
_proto("thingif_action_description", _s, _p)
_proto("thingif_action_metadata", _p, _p)
_proto("thingif_action_index", _i, _p)
_proto("thingif_action_command_expires_at", ctypes.c_longlong, _p)
_proto("thingif_action_thing", _p, _p)
_proto("thingif_action_fail", _i, _p, _s)
_proto("thingif_action_attach_data", _i, _p, _p)
_proto("thingif_action_defer", _p, _p)
_proto("thingif_deferred_complete", _i, _p, _s, _p)
_proto("thingif_state_update", _i, _p, _p)
_proto("thingif_state_patch", _i, _p, _p)
_proto("thingif_set_state_provider", _i, _p, STATE_CB, _i, _p)
_proto("thingif_firmware_version_update", _i, _p, _s)
_proto("thingif_actionset_create", _i, _p, _s)
_proto("thingif_actionset_add_action", _i, _p, _s, _s, _i, _s, _p)
_proto("thingif_actionset_remove_action", _i, _p, _s, _i)
_proto("thingif_actionset_delete", _i, _p, _s)
_proto("thingif_actionset_execute", _i, _p, _s)
# The names of 0.2.0, deprecated aliases of the same functions (thingif.h, "Old names").
_proto("thingif_update_state", _i, _p, _p)
_proto("thingif_patch_state", _i, _p, _p)
_proto("thingif_update_firmware_version", _i, _p, _s)
_proto("thingif_action_set_create", _i, _p, _s)
_proto("thingif_action_set_add_action", _i, _p, _s, _s, _i, _s, _p)
_proto("thingif_action_set_remove_action", _i, _p, _s, _i)
_proto("thingif_action_set_delete", _i, _p, _s)
_proto("thingif_action_set_execute", _i, _p, _s)
_proto("thingif_timer_create", _i, _p, _s, ctypes.c_longlong, _i, _i, _s, ctypes.POINTER(_s), _i)
_proto("thingif_timer_enable", _i, _p, _s, _i)
_proto("thingif_timer_delete", _i, _p, _s)
_proto("thingif_set_clock", _i, _p, CLOCK_CB, _p)
# Gateways and end nodes (since 0.4.0).
_proto("thingif_set_layout_position", _i, _p, _i)
_proto("thingif_set_end_node_callback", _i, _p, END_NODE_CB, _p)
_proto("thingif_end_node_add", _i, _p, _s, _s, _s, _s, _s)
_proto("thingif_end_node_thing_id", _s, _p, _s)
_proto("thingif_end_node_set_online", _i, _p, _s, _i)
_proto("thingif_end_node_remove", _i, _p, _s)
_proto("thingif_end_node_state_update", _i, _p, _s, _p)
_proto("thingif_end_node_state_patch", _i, _p, _s, _p)
_proto("thingif_end_node_firmware_version_update", _i, _p, _s, _s)
_proto("thingif_end_node_foreach", _i, _p, END_NODE_EACH_CB, _p)
_proto("thingif_action_end_node", _s, _p)
_proto("thingif_action_thing_id", _s, _p)
# Firmware updates.
_proto("thingif_set_installer", _i, _p, ctypes.POINTER(INSTALLER), ctypes.POINTER(UPDATE_CONFIG), _p)
_proto("thingif_update_installed", _i, _p, _i, _s)
_proto("thingif_update_confirm", _i, _p)
_proto("thingif_update_reject", _i, _p, _s)
_proto("thingif_update_status", _i, _p, ctypes.POINTER(_i), ctypes.POINTER(ctypes.c_uint64),
       ctypes.POINTER(ctypes.c_uint64))
_proto("thingif_loop", _i, _p, _i)
_proto("thingif_loop_start", _i, _p)
_proto("thingif_loop_stop", _i, _p)

jansson.json_loads.restype = _p
jansson.json_loads.argtypes = [_s, ctypes.c_size_t, _p]
jansson.json_dumps.restype = _p  # char *, freed with free()
jansson.json_dumps.argtypes = [_p, ctypes.c_size_t]
jansson.json_delete.restype = None
jansson.json_delete.argtypes = [_p]
libc.free.restype = None
libc.free.argtypes = [_p]

# json_error_t is 12 bytes of ints + 80 + 160 chars (jansson 2.x); room to spare.
_JSON_ERROR_SIZE = 512


def json_to_c(value):
    """Python value -> a NEW json_t * (the caller must json_delete or pass it on).

    Raises TypeError/ValueError for values that are not JSON."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    err = ctypes.create_string_buffer(_JSON_ERROR_SIZE)
    j = jansson.json_loads(text.encode("utf-8"), JSON_DECODE_ANY, ctypes.cast(err, _p))
    if not j:
        # json_error_t.text starts after line, column, position (3 ints) and source[80].
        msg = err.raw[12 + 80:12 + 80 + 160].split(b"\0", 1)[0].decode("utf-8", "replace")
        raise ValueError("jansson cannot take this value: %s" % msg)
    return j


def json_from_c(j):
    """A borrowed json_t * -> a Python value (None for NULL)."""
    if not j:
        return None
    s = jansson.json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT)
    if not s:
        raise MemoryError("json_dumps failed")
    try:
        text = ctypes.string_at(s)
    finally:
        libc.free(s)
    return json.loads(text.decode("utf-8"))
