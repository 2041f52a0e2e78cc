# SPDX-License-Identifier: Apache-2.0

"""The Pythonic layer over libthingif (see include/thingif.h for the contract)."""

import collections
import json
import os
import ctypes
import enum
import itertools
import logging
import threading
import traceback

from . import _native
from ._native import lib

__all__ = [
    "Status", "LogLevel", "Option", "Recurrence", "Layout", "EndNodeEvent", "EndNode", "ThingIFError",
    "ActionFailed", "Action", "Deferred", "Thing", "version", "strerror",
]


class Status(enum.IntEnum):
    """enum thingif_status."""
    OK = 0
    ERR_INVALID = 1
    ERR_NOMEM = 2
    ERR_STATE = 3
    ERR_NOT_ONBOARDED = 4
    ERR_IN_CALLBACK = 5
    ERR_CONNECT = 6
    ERR_NO_CONN = 7
    ERR_TIMEOUT = 8
    ERR_REJECTED = 9
    ERR_PROTOCOL = 10
    ERR_STORAGE = 11
    ERR_JSON = 12
    ERR_TLS = 13
    ERR_MQTT = 14
    ERR_FULL = 15
    ERR_EXISTS = 16
    ERR_NOT_FOUND = 17
    ERR_TOO_MANY = 18
    ERR_UNSUPPORTED = 19


class LogLevel(enum.IntEnum):
    """enum thingif_log_level."""
    ERROR = 0
    WARNING = 1
    INFO = 2
    DEBUG = 3


class Option(enum.IntEnum):
    """enum thingif_option (see Thing.set_option)."""
    MAX_PAYLOAD = 1
    KEEPALIVE_S = 2
    REQUEST_TIMEOUT_MS = 3
    RECONNECT_MIN_MS = 4
    RECONNECT_MAX_MS = 5
    OUTBOX_MAX = 6
    LEDGER_SIZE = 7
    INBOX_MAX = 8
    DURABILITY = 9
    EXPIRY_SKEW_MS = 10
    MAX_END_NODES = 11


class Durability(enum.IntEnum):
    """enum thingif_durability (the values of Option.DURABILITY)."""
    SYNC = 0
    NONE = 1


class Recurrence(enum.IntEnum):
    """enum thingif_recurrence (see Thing.timer_create)."""
    NONE = 0
    MINUTE = 1
    HOUR = 2
    DAY = 3
    WEEK = 4


class Layout(enum.IntEnum):
    """enum thingif_layout (see Thing.set_layout_position)."""
    STANDALONE = 0
    GATEWAY = 1


class EndNodeEvent(enum.IntEnum):
    """enum thingif_end_node_event (see Thing.on_end_node)."""
    ADDED = 0
    REFUSED = 1
    REMOVED = 2
    CHANGED = 3


class UpdateDecision(enum.IntEnum):
    """enum thingif_update_decision: what an installer's offer() answers."""
    ACCEPT = 0
    DEFER = 1
    REFUSE = 2


class UpdateStatus(enum.IntEnum):
    """enum thingif_update_status (see Thing.update_status)."""
    NONE = 0
    DOWNLOADING = 1
    INSTALLING = 2
    REBOOTING = 3
    TRIAL = 4
    SUCCEEDED = 5
    ROLLED_BACK = 6
    FAILED = 7
    CANCELLED = 8


UpdateInfo = collections.namedtuple(
    "UpdateInfo", ["job_id", "update_id", "version", "compatible", "size", "sha256", "metadata", "image_path"])
UpdateInfo.__doc__ = """A verified update as the installer sees it (struct thingif_update_info):
sha256 is 32 bytes, metadata the manifest's metadata (a dict) or None,
image_path the library's image file in the file mode, else None."""


EndNode = collections.namedtuple("EndNode", ["vendor_thing_id", "thing_id", "online"])
EndNode.__doc__ = """One end node of a gateway, as Thing.end_nodes() lists it: its vendorThingID,
its thingID (None until EndNodeEvent.ADDED) and whether it was last set online."""


_PY_LEVELS = {
    LogLevel.ERROR: logging.ERROR,
    LogLevel.WARNING: logging.WARNING,
    LogLevel.INFO: logging.INFO,
    LogLevel.DEBUG: logging.DEBUG,
}


def version():
    """The library's version (THINGIF_VERSION_STRING of include/thingif.h)."""
    return lib.thingif_version().decode()


def strerror(status):
    """thingif_strerror(): one line of English for a status code."""
    return lib.thingif_strerror(int(status)).decode()


def _enum_or(enum_type, value):
    """enum_type(value), or value itself when it names no member."""
    try:
        return enum_type(value)
    except ValueError:
        return value


class ThingIFError(Exception):
    """A libthingif call failed.

    .status is the int status (compare with thingif.Status), .message the
    text of thingif_strerror(status), .context what was being done."""

    def __init__(self, status, context=None):
        self.status = int(status)
        self.message = strerror(self.status)
        self.context = context
        text = self.message if not context else "%s: %s" % (context, self.message)
        super().__init__(text)


def _check(status, context):
    if status != Status.OK:
        raise ThingIFError(status, context)


class ActionFailed(Exception):
    """Raise it in an action handler to fail the action with a message (and data)."""

    def __init__(self, message, data=None):
        super().__init__(message)
        self.message = str(message)
        self.data = data


def _b(value, what):
    """str -> UTF-8 bytes for a const char * argument; None stays NULL."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError("%s must be a str or None, not %s" % (what, type(value).__name__))


def _u(value):
    """const char * result -> str (None for NULL)."""
    return None if value is None else value.decode("utf-8", "replace")


# ---- callbacks --------------------------------------------------------------
#
# C calls back on the library's thread (or the thread inside Thing.loop()).
# Three trampolines serve every handle. They are module globals, made once,
# so the CFUNCTYPE objects that C holds can never be garbage collected.
# The userdata pointer C passes back is a key into _registry, which holds
# the Python callable; a Thing removes its keys when it is closed.

_registry = {}
_keys = itertools.count(1)
_log = logging.getLogger("thingif")


def _json_arg(value, context, none_is_null=False):
    """A Python value as a NEW json_t * for a C argument; None stays NULL
    unless none_is_null (then JSON null). ThingIFError(ERR_JSON) when it is
    not JSON."""
    if value is None and not none_is_null:
        return None
    try:
        return _native.json_to_c(value)
    except (TypeError, ValueError) as e:
        raise ThingIFError(Status.ERR_JSON, "%s: %s" % (context, e)) from None


def _properties_text(properties, context):
    """A properties argument (a dict, JSON text or None) as JSON text or None."""
    if properties is None or isinstance(properties, (str, bytes)):
        return properties
    import json
    try:
        return json.dumps(properties, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ThingIFError(Status.ERR_JSON, "%s: properties: %s" % (context, e)) from None


def _new_key(entry):
    key = next(_keys)
    _registry[key] = entry
    return key


def _describe(exc):
    text = str(exc)
    name = type(exc).__name__
    return "%s: %s" % (name, text) if text else name


def _action_trampoline(action_ptr, userdata):
    # Nothing may propagate into C: every exception becomes a failed action.
    try:
        entry = _registry.get(userdata or 0)
        if entry is None:
            lib.thingif_action_fail(action_ptr, b"the handler of this action was removed")
            return
        thing, handler = entry
        action = Action(action_ptr, thing)
        try:
            action._run(handler)
        finally:
            action._ptr = None
    except BaseException as e:  # noqa: BLE001 - last line of defence
        try:
            lib.thingif_action_fail(action_ptr, ("internal error in the Python binding: %s" % _describe(e)).encode())
            _log.error("action handler: %s", traceback.format_exc())
        except BaseException:  # noqa: BLE001
            pass


def _log_trampoline(level, message, userdata):
    try:
        entry = _registry.get(userdata or 0)
        if entry is not None:
            entry(int(level), _u(message) or "")
    except BaseException:  # noqa: BLE001
        pass


def _state_trampoline(thing_ptr, userdata):
    try:
        entry = _registry.get(userdata or 0)
        if entry is None:
            return None
        thing, provider = entry
        state = provider(thing)
        if state is None:
            return None
        return _native.json_to_c(state)  # a NEW reference; the library steals it
    except BaseException as e:  # noqa: BLE001
        try:
            _log.error("state provider failed, upload skipped: %s", _describe(e))
        except BaseException:  # noqa: BLE001
            pass
        return None


def _end_node_trampoline(thing_ptr, event, vendor_thing_id, thing_id, detail, userdata):
    # Nothing may propagate into C: an exception is logged and dropped.
    try:
        entry = _registry.get(userdata or 0)
        if entry is None:
            return
        thing, callback = entry
        try:
            event = EndNodeEvent(event)
        except ValueError:  # a later library's event: passed on as its int
            pass
        callback(thing, event, _u(vendor_thing_id), _u(thing_id), _u(detail))
    except BaseException:  # noqa: BLE001 - last line of defence
        try:
            _log.error("end-node callback raised: %s", traceback.format_exc().rstrip())
        except BaseException:  # noqa: BLE001
            pass


def _end_node_each_trampoline(vendor_thing_id, thing_id, online, userdata):
    try:
        out = _registry.get(userdata or 0)
        if out is not None:
            out.append(EndNode(_u(vendor_thing_id), _u(thing_id), bool(online)))
    except BaseException:  # noqa: BLE001
        pass


def _clock_trampoline(userdata):
    # A clock that fails falls back to the system's, with a log line.
    try:
        entry = _registry.get(userdata or 0)
        if entry is not None:
            return int(entry())
    except BaseException as e:  # noqa: BLE001
        try:
            _log.error("clock callback failed, using the system clock: %s", _describe(e))
        except BaseException:  # noqa: BLE001
            pass
    import time
    return int(time.time() * 1000)


def _update_info(ptr):
    i = ptr.contents
    meta = _u(i.metadata_json)
    return UpdateInfo(_u(i.job_id), _u(i.update_id), _u(i.version), _u(i.compatible), int(i.size),
                      bytes(i.sha256[:32]) if i.sha256 else b"", json.loads(meta) if meta else None,
                      _u(i.image_path))


def _installer_call(userdata, what, call, failed):
    # Nothing may propagate into C: an exception is logged and answers `failed`.
    try:
        entry = _registry.get(userdata or 0)
        if entry is None:
            return failed
        thing, installer = entry
        return call(thing, installer)
    except BaseException:  # noqa: BLE001 - last line of defence
        try:
            _log.error("installer %s raised: %s", what, traceback.format_exc().rstrip())
        except BaseException:  # noqa: BLE001
            pass
        return failed


def _offer_trampoline(thing_ptr, info, message, size, userdata):
    def call(thing, installer):
        answer = installer.offer(thing, _update_info(info))
        decision, text = answer if isinstance(answer, tuple) else (answer, None)
        if text and message and size > 1:
            raw = str(text).encode("utf-8")[:size - 1]
            ctypes.memmove(message, raw, len(raw))
        return int(decision)
    return _installer_call(userdata, "offer", call, int(UpdateDecision.REFUSE))


def _write_trampoline(thing_ptr, offset, data, length, userdata):
    def call(thing, installer):
        ok = installer.write(thing, int(offset), ctypes.string_at(data, length))
        return 0 if ok is None or ok else 1
    return _installer_call(userdata, "write", call, 1)


def _flush_trampoline(thing_ptr, userdata):
    def call(thing, installer):
        ok = installer.flush(thing)
        return 0 if ok is None or ok else 1
    return _installer_call(userdata, "flush", call, 1)


def _install_trampoline(thing_ptr, info, userdata):
    def call(thing, installer):
        ok = installer.install(thing, _update_info(info))
        return 0 if ok is None or ok else 1
    return _installer_call(userdata, "install", call, 1)


def _reboot_trampoline(thing_ptr, userdata):
    _installer_call(userdata, "reboot", lambda thing, installer: installer.reboot(thing), None)


def _commit_trampoline(thing_ptr, userdata):
    def call(thing, installer):
        ok = installer.commit(thing)
        return 0 if ok is None or ok else 1
    return _installer_call(userdata, "commit", call, 1)


def _rollback_trampoline(thing_ptr, userdata):
    _installer_call(userdata, "rollback", lambda thing, installer: installer.rollback(thing), None)


_UPDATE_OFFER_CB = _native.UPDATE_OFFER_CB(_offer_trampoline)
_UPDATE_WRITE_CB = _native.UPDATE_WRITE_CB(_write_trampoline)
_UPDATE_FLUSH_CB = _native.UPDATE_INT_CB(_flush_trampoline)
_UPDATE_INSTALL_CB = _native.UPDATE_INSTALL_CB(_install_trampoline)
_UPDATE_REBOOT_CB = _native.UPDATE_VOID_CB(_reboot_trampoline)
_UPDATE_COMMIT_CB = _native.UPDATE_INT_CB(_commit_trampoline)
_UPDATE_ROLLBACK_CB = _native.UPDATE_VOID_CB(_rollback_trampoline)
_ACTION_CB = _native.ACTION_CB(_action_trampoline)
_CLOCK_CB = _native.CLOCK_CB(_clock_trampoline)
_NULL_CLOCK_CB = _native.CLOCK_CB()
_LOG_CB = _native.LOG_CB(_log_trampoline)
_STATE_CB = _native.STATE_CB(_state_trampoline)
_NULL_ACTION_CB = _native.ACTION_CB()
_NULL_LOG_CB = _native.LOG_CB()
_NULL_STATE_CB = _native.STATE_CB()
_END_NODE_CB = _native.END_NODE_CB(_end_node_trampoline)
_NULL_END_NODE_CB = _native.END_NODE_CB()
_END_NODE_EACH_CB = _native.END_NODE_EACH_CB(_end_node_each_trampoline)


# ---- actions ----------------------------------------------------------------

class Action:
    """One action of a command, as a handler sees it.

    The attributes are copies, so they may be kept after the handler
    returns; fail(), set_data() and defer() work only during the handler."""

    __slots__ = ("_ptr", "_done", "thing", "name", "params", "command_id", "issuer", "schema",
                 "schema_version", "alias", "title", "description", "metadata", "index", "expires_at",
                 "end_node", "thing_id", "_deferred")

    def __init__(self, ptr, thing):
        self._ptr = ptr
        self._deferred = None
        self.thing = thing
        self.name = _u(lib.thingif_action_name(ptr))
        self.params = _native.json_from_c(lib.thingif_action_params(ptr))
        self.command_id = _u(lib.thingif_action_command_id(ptr))
        self.issuer = _u(lib.thingif_action_issuer(ptr))
        self.schema = _u(lib.thingif_action_schema(ptr))
        self.schema_version = lib.thingif_action_schema_version(ptr)
        self.alias = _u(lib.thingif_action_alias(ptr))
        self.title = _u(lib.thingif_action_title(ptr))
        self.description = _u(lib.thingif_action_description(ptr))
        self.metadata = _native.json_from_c(lib.thingif_action_metadata(ptr))
        self.index = lib.thingif_action_index(ptr)
        # When the command expires (epoch ms), None for none (thingif_action_command_expires_at).
        self.expires_at = lib.thingif_action_command_expires_at(ptr) or None
        # On a gateway: the vendorThingID of the end node the action is for, None
        # for the gateway's own (thingif_action_end_node); and the thingID the
        # command targets, the end node's or the thing's own (thingif_action_thing_id).
        self.end_node = _u(lib.thingif_action_end_node(ptr))
        self.thing_id = _u(lib.thingif_action_thing_id(ptr))

    def __repr__(self):
        target = "" if self.end_node is None else " for end node %s" % self.end_node
        return "<thingif.Action %s %s of %s%s>" % (self.name, self.params, self.command_id, target)

    def _live(self, what):
        if self._ptr is None:
            raise ThingIFError(Status.ERR_STATE, "Action.%s: the handler has returned" % what)
        return self._ptr

    def fail(self, message):
        """Marks the action as failed with a message (thingif_action_fail)."""
        _check(lib.thingif_action_fail(self._live("fail"), _b(str(message), "message")), "thingif_action_fail")

    def set_data(self, data):
        """Attaches a dict as the result's "data" (thingif_action_attach_data)."""
        ptr = self._live("set_data")
        j = _json_arg(data, "set_data", none_is_null=True)
        _check(lib.thingif_action_attach_data(ptr, j), "thingif_action_attach_data")  # steals j, also on failure

    def defer(self):
        """Defers the result: returns a Deferred to complete later, from any thread."""
        ptr = self._live("defer")
        if self._deferred is None:
            d = lib.thingif_action_defer(ptr)
            if not d:
                raise ThingIFError(Status.ERR_NOMEM, "thingif_action_defer")
            self._deferred = Deferred(d, self)
        return self._deferred

    def _run(self, handler):
        try:
            result = handler(self)
        except ActionFailed as e:
            self._finish(e.message, e.data)
            return
        except BaseException as e:  # noqa: BLE001 - a handler's error fails the action
            _log.warning("handler of %s raised: %s", self.name, traceback.format_exc().rstrip())
            self._finish(_describe(e), None)
            return
        if self._deferred is not None:
            return  # the result comes through Deferred.complete()
        if result is not None:
            try:
                self.set_data(result)
            except ThingIFError as e:
                self._finish("the handler returned data that is not a JSON object: %s" % e, None)

    def _finish(self, message, data):
        if self._deferred is not None:
            if not self._deferred.done:
                self._deferred.complete(error=message, data=data)
            return
        lib.thingif_action_fail(self._ptr, _b(message, "message"))
        if data is not None:
            try:
                self.set_data(data)
            except ThingIFError as e:
                _log.warning("data of the failed action %s dropped: %s", self.name, e)


class Deferred:
    """A deferred action result (thingif_action_defer). Complete it exactly once."""

    def __init__(self, ptr, action):
        self._ptr = ptr
        self._lock = threading.Lock()
        self.action = action

    @property
    def done(self):
        return self._ptr is None

    def complete(self, error=None, data=None):
        """Sends the result: success when error is None, else failed with that message."""
        j = _json_arg(data, "Deferred.complete")
        with self._lock:
            ptr, self._ptr = self._ptr, None
        if ptr is None:
            if j:
                _native.jansson.json_delete(j)
            raise ThingIFError(Status.ERR_STATE, "Deferred.complete: already completed")
        msg = None if error is None else _b(str(error), "error")
        _check(lib.thingif_deferred_complete(ptr, msg, j), "thingif_deferred_complete")  # steals j


# ---- the thing --------------------------------------------------------------

class Thing:
    """One thing: a thingif_t handle.

    Handlers run on the loop thread: the thread inside loop(), or the
    library's own thread after loop_start(). Close the thing with close()
    (or use it as a context manager)."""

    def __init__(self, app_id, app_key, storage_dir, log=True, log_level=None):
        h = lib.thingif_new(_b(app_id, "app_id"), _b(app_key, "app_key"), _b(str(storage_dir), "storage_dir"))
        if not h:
            status = Status.ERR_INVALID if not app_id or not storage_dir else Status.ERR_STORAGE
            raise ThingIFError(status, "thingif_new(storage_dir=%r)" % (storage_dir,))
        self._h = h
        self._keys = {}          # registration -> key in _registry
        self._retired = []       # keys of replaced callables, released by close()
        self._log_key = None
        self._state_key = None
        if log:
            self.set_logger(log_level=log_level)

    # -- life cycle --

    def _handle(self):
        if self._h is None:
            raise ThingIFError(Status.ERR_INVALID, "the thing is closed")
        return self._h

    def close(self):
        """thingif_destroy(): stops the loop, disconnects and frees the handle.

        Raises ThingIFError (ERR_IN_CALLBACK) when called from a handler of
        this thing; nothing is done then. Closing twice is harmless."""
        if self._h is None:
            return
        _check(lib.thingif_destroy(self._h), "thingif_destroy")
        self._h = None
        # C calls back no more: release the Python callables.
        for key in list(self._keys.values()) + self._retired + [self._log_key, self._state_key]:
            if key is not None:
                _registry.pop(key, None)
        self._keys.clear()
        self._retired.clear()
        self._log_key = self._state_key = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            if getattr(self, "_h", None) is not None:
                self.close()
        except Exception:  # noqa: BLE001
            pass

    # -- configuration --

    def set_broker(self, host, port):
        _check(lib.thingif_set_broker(self._handle(), _b(host, "host"), int(port)), "thingif_set_broker")

    def set_tls(self, cafile, certfile=None, keyfile=None):
        _check(lib.thingif_set_tls(self._handle(), _b(cafile, "cafile"), _b(certfile, "certfile"),
                                   _b(keyfile, "keyfile")), "thingif_set_tls")

    def set_claim_certificate(self, certfile, keyfile):
        """Onboard with a claim certificate instead of the app key (app_key may be None)."""
        _check(lib.thingif_set_claim_certificate(self._handle(), _b(certfile, "certfile"), _b(keyfile, "keyfile")),
               "thingif_set_claim_certificate")

    def set_option(self, option, value):
        """Sets a thingif.Option (or its name, e.g. "keepalive_s") to an int."""
        if isinstance(option, str):
            option = Option[option.upper()]
        value = int(value)
        if not -(2 ** 63) <= value < 2 ** 63 or not -(2 ** 31) <= int(option) < 2 ** 31:
            raise ThingIFError(Status.ERR_INVALID, "thingif_set_option")
        try:
            rc = lib.thingif_set_option(self._handle(), int(option), value)
        except ctypes.ArgumentError:  # wider than a C long here
            raise ThingIFError(Status.ERR_INVALID, "thingif_set_option") from None
        _check(rc, "thingif_set_option(%s, %d)" % (getattr(option, "name", option), value))

    def set_log_callback(self, callback, max_level=LogLevel.INFO):
        """Routes log lines to callback(level: int, message: str); None: back to stderr."""
        h = self._handle()
        old = self._log_key
        if callback is None:
            rc = lib.thingif_set_log_callback(h, _NULL_LOG_CB, int(max_level), None)
            key = None
        else:
            key = _new_key(callback)
            rc = lib.thingif_set_log_callback(h, _LOG_CB, int(max_level), key)
        if rc != Status.OK:
            if key is not None:
                _registry.pop(key, None)
            raise ThingIFError(rc, "thingif_set_log_callback")
        self._log_key = key
        if old is not None:
            self._retired.append(old)

    def set_logger(self, logger=None, log_level=None):
        """Routes log lines into Python logging (the "thingif" logger by default).

        log_level: a logging level; by default the logger's effective level."""
        logger = logger or _log
        level = logger.getEffectiveLevel() if log_level is None else log_level
        if level <= logging.DEBUG:
            max_level = LogLevel.DEBUG
        elif level <= logging.INFO:
            max_level = LogLevel.INFO
        elif level <= logging.WARNING:
            max_level = LogLevel.WARNING
        else:
            max_level = LogLevel.ERROR

        def emit(lvl, message):
            logger.log(_PY_LEVELS.get(lvl, logging.DEBUG), "%s", message)

        self.set_log_callback(emit, max_level)

    # -- identity --

    def onboard(self, vendor_thing_id, password, thing_type=None, firmware_version=None, properties=None):
        """Onboards by the thing itself. properties: a dict (or JSON text) or None. Blocks."""
        properties = _properties_text(properties, "onboard")
        _check(lib.thingif_onboard(self._handle(), _b(vendor_thing_id, "vendor_thing_id"), _b(password, "password"),
                                   _b(thing_type, "thing_type"), _b(firmware_version, "firmware_version"),
                                   _b(properties, "properties")), "thingif_onboard")

    def use_onboarded(self, thing_id, access_token):
        """Takes an identity that the app onboarded. Blocks."""
        _check(lib.thingif_use_onboarded(self._handle(), _b(thing_id, "thing_id"), _b(access_token, "access_token")),
               "thingif_use_onboarded")

    @property
    def thing_id(self):
        """The thingID once onboarded, else None."""
        return _u(lib.thingif_thing_id(self._handle()))

    @property
    def is_connected(self):
        return self._h is not None and lib.thingif_is_connected(self._h) == 1

    # -- handlers --

    def _register(self, reg, call, handler):
        h = self._handle()
        old = self._keys.get(reg)
        if handler is None:
            rc = call(h, _NULL_ACTION_CB, None)
            key = None
        else:
            if not callable(handler):
                raise TypeError("handler must be callable")
            key = _new_key((self, handler))
            rc = call(h, _ACTION_CB, key)
        if rc != Status.OK:
            if key is not None:
                _registry.pop(key, None)
            raise ThingIFError(rc, "registering %s" % (reg,))
        if key is None:
            self._keys.pop(reg, None)
        else:
            self._keys[reg] = key
        if old is not None:
            # Keep the old callable until close(): a command that looked it
            # up just before the change may still call it.
            self._retired.append(old)

    def on_action(self, action, handler, schema=None, schema_version=0):
        """thingif_on_action: handler(action) for an action of a schema (None: any schema or alias)."""
        b_schema, b_action = _b(schema, "schema"), _b(action, "action")
        self._register(("schema", schema, schema_version, action),
                       lambda h, cb, key: lib.thingif_on_action(h, b_schema, int(schema_version), b_action, cb, key),
                       handler)

    def on_alias_action(self, alias, action, handler):
        """thingif_on_alias_action: handler(action) for an action under a trait alias."""
        b_alias, b_action = _b(alias, "alias"), _b(action, "action")
        self._register(("alias", alias, action),
                       lambda h, cb, key: lib.thingif_on_alias_action(h, b_alias, b_action, cb, key), handler)

    def on_any_action(self, handler):
        """thingif_on_any_action: the catch-all handler (None removes it)."""
        self._register(("any",), lambda h, cb, key: lib.thingif_on_any_action(h, cb, key), handler)

    def action(self, name, schema=None, schema_version=0, alias=None):
        """Decorator: @thing.action("turnPower", schema="AirConditioner-Demo", schema_version=1)
        or @thing.action("turnPower", alias="AirConditionerAlias").

        The handler gets an Action. It returns None (success), a dict (success
        with that data), or raises ActionFailed(message, data=...) to fail;
        any other exception fails the action with the exception's text."""
        if alias is not None and schema is not None:
            raise TypeError("give schema or alias, not both")

        def register(fn):
            if alias is not None:
                self.on_alias_action(alias, name, fn)
            else:
                self.on_action(name, fn, schema=schema, schema_version=schema_version)
            return fn
        return register

    def any_action(self):
        """Decorator for the catch-all handler."""
        def register(fn):
            self.on_any_action(fn)
            return fn
        return register

    # -- state --

    def _upload(self, fn, state, context):
        h = self._handle()
        j = _json_arg(state, context, none_is_null=True)
        try:
            rc = fn(h, j)  # borrows j
        finally:
            _native.jansson.json_delete(j)
        _check(rc, context)

    def update_state(self, state):
        """Uploads the whole state (a dict). Returns once it is in the outbox."""
        self._upload(lib.thingif_state_update, state, "thingif_state_update")

    def patch_state(self, partial_state):
        """Uploads part of the state (a dict)."""
        self._upload(lib.thingif_state_patch, partial_state, "thingif_state_patch")

    def update_firmware_version(self, version):
        _check(lib.thingif_firmware_version_update(self._handle(), _b(version, "version")),
               "thingif_firmware_version_update")

    def set_state_provider(self, provider, interval_ms=60000):
        """Uploads provider(thing) (a dict, or None to skip) every interval_ms; None stops."""
        h = self._handle()
        old = self._state_key
        if provider is None:
            rc = lib.thingif_set_state_provider(h, _NULL_STATE_CB, int(interval_ms), None)
            key = None
        else:
            key = _new_key((self, provider))
            rc = lib.thingif_set_state_provider(h, _STATE_CB, int(interval_ms), key)
        if rc != Status.OK:
            if key is not None:
                _registry.pop(key, None)
            raise ThingIFError(rc, "thingif_set_state_provider")
        self._state_key = key
        if old is not None:
            self._retired.append(old)

    # -- action sets and timer triggers (kept in storage_dir) --

    def action_set_create(self, name):
        """thingif_actionset_create: a new, empty action set."""
        _check(lib.thingif_actionset_create(self._handle(), _b(name, "name")), "thingif_actionset_create")

    def action_set_add_action(self, set_name, action, params=None, schema=None, schema_version=0):
        """thingif_actionset_add_action: appends action(params) of schema to the set."""
        j = _json_arg(params, "thingif_actionset_add_action")
        try:
            rc = lib.thingif_actionset_add_action(self._handle(), _b(set_name, "set_name"), _b(schema, "schema"),
                                                   int(schema_version), _b(action, "action"), j)
        finally:
            if j:
                _native.jansson.json_delete(j)
        _check(rc, "thingif_actionset_add_action")

    def action_set_remove_action(self, set_name, index):
        """thingif_actionset_remove_action: removes the action at index (0-based)."""
        _check(lib.thingif_actionset_remove_action(self._handle(), _b(set_name, "set_name"), int(index)),
               "thingif_actionset_remove_action")

    def action_set_delete(self, name):
        """thingif_actionset_delete."""
        _check(lib.thingif_actionset_delete(self._handle(), _b(name, "name")), "thingif_actionset_delete")

    def action_set_execute(self, name):
        """thingif_actionset_execute: queued; the loop runs it as one command."""
        _check(lib.thingif_actionset_execute(self._handle(), _b(name, "name")), "thingif_actionset_execute")

    def timer_create(self, name, fire_date_ms, action_sets, time_zone="UTC", recurrence=Recurrence.NONE,
                     recurrence_count=0):
        """thingif_timer_create: a disabled timer trigger running action_sets (a list of names)."""
        names = [_b(n, "action_sets[%d]" % i) for i, n in enumerate(action_sets)]
        arr = (ctypes.c_char_p * max(1, len(names)))(*names)
        _check(lib.thingif_timer_create(self._handle(), _b(name, "name"), int(fire_date_ms), int(recurrence),
                                        int(recurrence_count), _b(time_zone, "time_zone"), arr, len(names)),
               "thingif_timer_create")

    def timer_enable(self, name, enabled=True):
        """thingif_timer_enable."""
        _check(lib.thingif_timer_enable(self._handle(), _b(name, "name"), 1 if enabled else 0), "thingif_timer_enable")

    def timer_delete(self, name):
        """thingif_timer_delete."""
        _check(lib.thingif_timer_delete(self._handle(), _b(name, "name")), "thingif_timer_delete")

    def set_clock(self, clock):
        """thingif_set_clock: clock() returns epoch milliseconds (for timers); None restores the system clock.

        It is called from the loop thread and from timer_create/timer_enable."""
        h = self._handle()
        old = self._keys.get(("clock",))
        if clock is None:
            rc = lib.thingif_set_clock(h, _NULL_CLOCK_CB, None)
            key = None
        else:
            if not callable(clock):
                raise TypeError("clock must be callable")
            key = _new_key(clock)
            rc = lib.thingif_set_clock(h, _CLOCK_CB, key)
        if rc != Status.OK:
            if key is not None:
                _registry.pop(key, None)
            raise ThingIFError(rc, "thingif_set_clock")
        if key is None:
            self._keys.pop(("clock",), None)
        else:
            self._keys[("clock",)] = key
        if old is not None:
            self._retired.append(old)

    # -- gateways and end nodes (since 0.4.0; docs/GATEWAYS.md) --

    def set_layout_position(self, layout):
        """thingif_set_layout_position: Layout.GATEWAY makes this thing a gateway
        (or a name, e.g. "gateway"). Not stored: call it at every start, before
        onboard()/use_onboarded() and while no loop runs."""
        if isinstance(layout, str):
            layout = Layout[layout.upper()]
        layout = int(layout)
        if not -(2 ** 31) <= layout < 2 ** 31:
            raise ThingIFError(Status.ERR_INVALID, "thingif_set_layout_position")
        _check(lib.thingif_set_layout_position(self._handle(), layout),
               "thingif_set_layout_position(%s)" % getattr(_enum_or(Layout, layout), "name", layout))

    def on_end_node(self, callback):
        """thingif_set_end_node_callback: callback(thing, event, vendor_thing_id, thing_id, detail)
        when an end node's membership changes; None removes it. Returns callback,
        so that it works as a decorator (@thing.on_end_node).

        event is an EndNodeEvent; thing_id is None for REFUSED, detail the
        framework's answer for REFUSED, else None. It runs on the loop thread;
        an exception it raises is logged (the "thingif" logger) and dropped."""
        h = self._handle()
        reg = ("end_node",)
        old = self._keys.get(reg)
        if callback is None:
            rc = lib.thingif_set_end_node_callback(h, _NULL_END_NODE_CB, None)
            key = None
        else:
            if not callable(callback):
                raise TypeError("callback must be callable")
            key = _new_key((self, callback))
            rc = lib.thingif_set_end_node_callback(h, _END_NODE_CB, key)
        if rc != Status.OK:
            if key is not None:
                _registry.pop(key, None)
            raise ThingIFError(rc, "thingif_set_end_node_callback")
        if key is None:
            self._keys.pop(reg, None)
        else:
            self._keys[reg] = key
        if old is not None:
            # An event already on its way may still call the old one.
            self._retired.append(old)
        return callback

    def end_node_add(self, vendor_thing_id, password, thing_type=None, firmware_version=None, properties=None):
        """thingif_end_node_add: registers an end node and onboards it through this
        gateway. Does not block: EndNodeEvent.ADDED (with its thingID) or REFUSED
        comes to the end-node callback. properties: a dict (or JSON text) or None."""
        properties = _properties_text(properties, "end_node_add")
        _check(lib.thingif_end_node_add(self._handle(), _b(vendor_thing_id, "vendor_thing_id"),
                                        _b(password, "password"), _b(thing_type, "thing_type"),
                                        _b(firmware_version, "firmware_version"), _b(properties, "properties")),
               "thingif_end_node_add(%r)" % (vendor_thing_id,))

    def end_node_thing_id(self, vendor_thing_id):
        """thingif_end_node_thing_id: the end node's thingID, None until it is ADDED
        (and for an unknown end node)."""
        if not vendor_thing_id:
            raise ThingIFError(Status.ERR_INVALID, "thingif_end_node_thing_id: no vendor_thing_id")
        return _u(lib.thingif_end_node_thing_id(self._handle(), _b(vendor_thing_id, "vendor_thing_id")))

    def end_node_set_online(self, vendor_thing_id, online=True):
        """thingif_end_node_set_online: whether the device is reachable now (the
        framework holds its commands while it is offline)."""
        _check(lib.thingif_end_node_set_online(self._handle(), _b(vendor_thing_id, "vendor_thing_id"),
                                               1 if online else 0),
               "thingif_end_node_set_online(%r)" % (vendor_thing_id,))

    def end_node_remove(self, vendor_thing_id):
        """thingif_end_node_remove: its commands are refused from now on; REMOVED
        comes to the end-node callback when the framework confirms."""
        _check(lib.thingif_end_node_remove(self._handle(), _b(vendor_thing_id, "vendor_thing_id")),
               "thingif_end_node_remove(%r)" % (vendor_thing_id,))

    def _end_node_upload(self, fn, vendor_thing_id, state, context):
        h = self._handle()
        v = _b(vendor_thing_id, "vendor_thing_id")
        j = _json_arg(state, context, none_is_null=True)
        try:
            rc = fn(h, v, j)  # borrows j
        finally:
            _native.jansson.json_delete(j)
        _check(rc, "%s(%r)" % (context, vendor_thing_id))

    def end_node_state_update(self, vendor_thing_id, state):
        """thingif_end_node_state_update: uploads an end node's whole state (a dict)."""
        self._end_node_upload(lib.thingif_end_node_state_update, vendor_thing_id, state,
                              "thingif_end_node_state_update")

    def end_node_state_patch(self, vendor_thing_id, partial_state):
        """thingif_end_node_state_patch: uploads part of an end node's state (a dict)."""
        self._end_node_upload(lib.thingif_end_node_state_patch, vendor_thing_id, partial_state,
                              "thingif_end_node_state_patch")

    def end_node_firmware_version_update(self, vendor_thing_id, version):
        """thingif_end_node_firmware_version_update: an end node's firmware version."""
        _check(lib.thingif_end_node_firmware_version_update(self._handle(), _b(vendor_thing_id, "vendor_thing_id"),
                                                            _b(version, "version")),
               "thingif_end_node_firmware_version_update(%r)" % (vendor_thing_id,))

    def end_nodes(self):
        """thingif_end_node_foreach: the registered end nodes, in registration order,
        as a list of EndNode(vendor_thing_id, thing_id or None, online), over a
        copy of the registry (also from inside the end-node callback)."""
        h = self._handle()
        out = []
        key = _new_key(out)
        try:
            rc = lib.thingif_end_node_foreach(h, _END_NODE_EACH_CB, key)
        finally:
            _registry.pop(key, None)
        _check(rc, "thingif_end_node_foreach")
        return out

    # -- loops --

    def loop(self, timeout_ms=1000):
        """Runs the thing for up to timeout_ms on this thread (handlers run here).

        Returns True when it ran connected, False when not connected now
        (the next calls reconnect); raises ThingIFError otherwise."""
        rc = lib.thingif_loop(self._handle(), int(timeout_ms))
        if rc == Status.ERR_NO_CONN:
            return False
        _check(rc, "thingif_loop")
        return True

    # ---- firmware updates ------------------------------------------------

    def set_installer(self, installer, thing_type, running_version, trust_file, max_trial_boots=0):
        """thingif_set_installer: the firmware's installer, at every start, before
        the loop runs (docs/UPDATES.md §10). installer is an object with

        - offer(thing, info) -> UpdateDecision, or (UpdateDecision, message)
        - write(thing, offset, data) and flush(thing), or neither: the file mode,
          where the library writes the image to info.image_path itself
        - install(thing, info): start the installer and return; tell the outcome
          with thing.update_installed(ok, message)
        - reboot(thing), commit(thing), rollback(thing)

        Each runs on the loop thread; a falsy answer (other than None) from
        write, flush, install or commit is a failure, and an exception is
        logged and counts as one (offer: REFUSE)."""
        for name in ("offer", "install", "reboot", "commit", "rollback"):
            if not callable(getattr(installer, name, None)):
                raise TypeError("installer has no %s()" % name)
        sink = callable(getattr(installer, "write", None))
        if sink != callable(getattr(installer, "flush", None)):
            raise TypeError("installer needs both write() and flush(), or neither (the file mode)")
        ops = _native.INSTALLER(
            _UPDATE_OFFER_CB, _UPDATE_WRITE_CB if sink else _native.UPDATE_WRITE_CB(),
            _UPDATE_FLUSH_CB if sink else _native.UPDATE_INT_CB(), _UPDATE_INSTALL_CB, _UPDATE_REBOOT_CB,
            _UPDATE_COMMIT_CB, _UPDATE_ROLLBACK_CB)
        config = _native.UPDATE_CONFIG(_b(thing_type, "thing_type"), _b(running_version, "running_version"),
                                       _b(os.fspath(trust_file), "trust_file"), int(max_trial_boots))
        key = _new_key((self, installer))
        rc = lib.thingif_set_installer(self._handle(), ctypes.byref(ops), ctypes.byref(config), key)
        if rc != Status.OK:
            _registry.pop(key, None)
            raise ThingIFError(rc, "thingif_set_installer")
        self._keys[("installer",)] = key

    def update_installed(self, ok, message=None):
        """thingif_update_installed: the installer started by install() finished."""
        _check(lib.thingif_update_installed(self._handle(), 1 if ok else 0, _b(message, "message")),
               "thingif_update_installed")

    def update_confirm(self):
        """thingif_update_confirm: the trial boot's self-test passed."""
        _check(lib.thingif_update_confirm(self._handle()), "thingif_update_confirm")

    def update_reject(self, message=None):
        """thingif_update_reject: the trial boot's self-test failed; rollback() follows."""
        _check(lib.thingif_update_reject(self._handle(), _b(message, "message")), "thingif_update_reject")

    def update_status(self):
        """thingif_update_status: (UpdateStatus, blocks held, blocks) of the job the
        thing holds or had last."""
        status = ctypes.c_int(0)
        held = ctypes.c_uint64(0)
        blocks = ctypes.c_uint64(0)
        _check(lib.thingif_update_status(self._handle(), ctypes.byref(status), ctypes.byref(held),
                                         ctypes.byref(blocks)), "thingif_update_status")
        return _enum_or(UpdateStatus, status.value), held.value, blocks.value

    def loop_start(self):
        """Starts the library's loop thread; handlers then run on it."""
        _check(lib.thingif_loop_start(self._handle()), "thingif_loop_start")

    def loop_stop(self):
        _check(lib.thingif_loop_stop(self._handle()), "thingif_loop_stop")

    def wait_connected(self, timeout=10.0):
        """With loop_start(): waits up to timeout seconds for the connection. Returns is_connected."""
        import time
        deadline = time.monotonic() + timeout
        while not self.is_connected and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.is_connected
