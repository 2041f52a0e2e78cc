# SPDX-License-Identifier: Apache-2.0

"""thingif: Python bindings for libthingif, the thing side of a Thing Interaction Framework.

    import thingif

    thing = thingif.Thing(app_id="demoApp", app_key="demoKey", storage_dir="/tmp/ac")
    thing.set_broker("127.0.0.1", 1883)

    @thing.action("turnPower", schema="AirConditioner-Demo", schema_version=1)
    def turn_power(action):
        if not isinstance(action.params.get("power"), bool):
            raise thingif.ActionFailed("power must be true or false")

    thing.onboard("AC-0001", "secret", thing_type="AirConditioner", firmware_version="1.0.0")
    thing.loop_start()
    ...
    thing.close()

The library is found through THINGIF_LIBRARY (a path to libthingif.so) or
the standard library paths. include/thingif.h is the full contract.
"""

from ._native import library_path
from ._thing import (
    Action,
    ActionFailed,
    Deferred,
    Durability,
    EndNode,
    EndNodeEvent,
    Layout,
    LogLevel,
    Option,
    Recurrence,
    Status,
    Thing,
    ThingIFError,
    UpdateDecision,
    UpdateInfo,
    UpdateStatus,
    strerror,
    version,
)

def _package_version():
    # The version of the installed package (python/pyproject.toml, which a
    # test keeps equal to the header's THINGIF_VERSION_STRING).
    try:
        from importlib.metadata import version as _v
        return _v("thingif")
    except Exception:  # noqa: BLE001 - not installed (run from the source tree)
        return version()


__version__ = _package_version()

__all__ = [
    "Action", "ActionFailed", "Deferred", "Durability", "EndNode", "EndNodeEvent", "Layout", "LogLevel", "Option",
    "Recurrence", "Status", "Thing", "ThingIFError", "UpdateDecision", "UpdateInfo", "UpdateStatus", "strerror",
    "version", "library_path",
]
