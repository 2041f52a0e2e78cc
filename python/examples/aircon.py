#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""aircon.py - the AirConditioner-Demo appliance on the thingif Python package.

The Python twin of examples-c/aircon.c. It takes commands of the schema
"AirConditioner-Demo" version 1 and reports its state:

  turnPower             {"power": true|false}
  setPresetTemperature  {"presetTemperature": 16..30}
  setFanSpeed           {"fanSpeed": 0..10}

  state: {"power", "presetTemperature", "fanSpeed",
          "currentTemperature", "currentHumidity"}

It drives the loop itself (thing.loop(200) on the main thread), so the
handlers run right here and need no locks, and it uploads the state after
every command and on every (re)connect.

Run: THINGIF_LIBRARY=build/libthingif.so python3 python/examples/aircon.py --port 1883
"""

import argparse
import signal
import sys
import time

import thingif

SCHEMA = "AirConditioner-Demo"
SCHEMA_VERSION = 1
TEMP_MIN, TEMP_MAX = 16, 30
FAN_MIN, FAN_MAX = 0, 10


def say(text):
    print("aircon: " + text, flush=True)


class Aircon:
    """The appliance. Handlers change it; the main loop uploads it."""

    def __init__(self):
        self.power = False
        self.preset_temperature = 22
        self.fan_speed = 3
        self.current_temperature = 28
        self.current_humidity = 55
        self.dirty = False

    def read_sensors(self):
        """Stands in for real sensors: the room drifts one degree towards the
        preset temperature while the power is on."""
        if not self.power:
            return
        if self.current_temperature > self.preset_temperature:
            self.current_temperature -= 1
        elif self.current_temperature < self.preset_temperature:
            self.current_temperature += 1

    def state(self):
        return {
            "power": self.power,
            "presetTemperature": self.preset_temperature,
            "fanSpeed": self.fan_speed,
            "currentTemperature": self.current_temperature,
            "currentHumidity": self.current_humidity,
        }


def refuse(action, message):
    say("%s refused: %s" % (action.name, message))
    raise thingif.ActionFailed(message)


def int_param(action, name, lo, hi):
    """The integer parameter `name`, checked to lie in lo..hi; fails the action otherwise."""
    params = action.params
    if not isinstance(params, dict) or name not in params:
        refuse(action, "%s is missing (an integer %d..%d)" % (name, lo, hi))
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, int):
        refuse(action, "%s must be an integer" % name)
    if value < lo or value > hi:
        refuse(action, "%s %d is out of range %d..%d" % (name, value, lo, hi))
    return value


def register(thing, ac):
    @thing.action("turnPower", schema=SCHEMA, schema_version=SCHEMA_VERSION)
    def turn_power(action):
        params = action.params
        if not isinstance(params, dict) or "power" not in params:
            refuse(action, "power is missing (true or false)")
        if not isinstance(params["power"], bool):
            refuse(action, "power must be true or false")
        ac.power = params["power"]
        ac.dirty = True
        say("turnPower power=%s" % ("on" if ac.power else "off"))

    @thing.action("setPresetTemperature", schema=SCHEMA, schema_version=SCHEMA_VERSION)
    def set_preset_temperature(action):
        temperature = int_param(action, "presetTemperature", TEMP_MIN, TEMP_MAX)
        previous = ac.preset_temperature
        ac.preset_temperature = temperature
        ac.dirty = True
        say("setPresetTemperature presetTemperature=%d (was %d)" % (temperature, previous))
        return {"previousPresetTemperature": previous}  # the result's data

    @thing.action("setFanSpeed", schema=SCHEMA, schema_version=SCHEMA_VERSION)
    def set_fan_speed(action):
        ac.fan_speed = int_param(action, "fanSpeed", FAN_MIN, FAN_MAX)
        ac.dirty = True
        say("setFanSpeed fanSpeed=%d" % ac.fan_speed)


def upload_state(thing, ac):
    ac.read_sensors()
    try:
        thing.update_state(ac.state())
    except thingif.ThingIFError as e:
        print("aircon: state upload failed: %s" % e.message, file=sys.stderr, flush=True)
        return
    ac.dirty = False
    s = ac.state()
    say("state uploaded: power=%s presetTemperature=%d fanSpeed=%d currentTemperature=%d currentHumidity=%d"
        % ("on" if s["power"] else "off", s["presetTemperature"], s["fanSpeed"],
           s["currentTemperature"], s["currentHumidity"]))


def positive(text):
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("needs a positive number, not %s" % text)
    return n


def port_number(text):
    n = int(text)
    if not 1 <= n <= 65535:
        raise argparse.ArgumentTypeError("needs a number 1..65535, not %s" % text)
    return n


def main(argv=None):
    p = argparse.ArgumentParser(description="The AirConditioner-Demo appliance: takes turnPower, "
                                "setPresetTemperature and setFanSpeed commands over MQTT and uploads its state.")
    p.add_argument("--host", default="127.0.0.1", help="broker host (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=1883, help="broker port (default 1883)")
    p.add_argument("--app-id", default="demoApp", help="application ID (default demoApp)")
    p.add_argument("--app-key", default="demoKey", help="application key (default demoKey)")
    p.add_argument("--vendor-thing-id", default="AC-0001", help="vendor thing ID (default AC-0001)")
    p.add_argument("--password", default="demo-pass", help="thing password (default demo-pass)")
    p.add_argument("--storage", default="./aircon-data", help="where the identity is kept (default ./aircon-data)")
    p.add_argument("--run-seconds", type=positive, default=0, help="exit after N seconds (default: until a signal)")
    p.add_argument("--verbose", action="store_true", help="log library debug lines to stderr")
    o = p.parse_args(argv)

    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    import logging
    logging.basicConfig(stream=sys.stderr, format="aircon: thingif %(levelname)s: %(message)s",
                        level=logging.DEBUG if o.verbose else logging.INFO)

    ac = Aircon()
    try:
        thing = thingif.Thing(o.app_id, o.app_key, o.storage)
    except thingif.ThingIFError:
        print("aircon: cannot create the thing (is %s writable?)" % o.storage, file=sys.stderr)
        return 1
    with thing:
        thing.set_broker(o.host, o.port)
        register(thing, ac)  # every handler before the loop runs
        try:
            thing.onboard(o.vendor_thing_id, o.password, thing_type="AirConditioner", firmware_version="1.0.0")
        except thingif.ThingIFError as e:
            print("aircon: onboarding failed: %s" % e.message, file=sys.stderr)
            return 1
        say("onboarded as %s; connecting to %s:%d" % (thing.thing_id, o.host, o.port))

        deadline = time.monotonic() + o.run_seconds if o.run_seconds else None
        was_connected = False
        while not stop:
            try:
                thing.loop(200)  # handlers run inside, on this thread
            except thingif.ThingIFError as e:
                print("aircon: loop stopped: %s" % e.message, file=sys.stderr)
                return 1
            connected = thing.is_connected
            if connected and not was_connected:
                say("connected")
                ac.dirty = True
            elif was_connected and not connected:
                say("disconnected; reconnecting")
            was_connected = connected
            if ac.dirty and connected:
                upload_state(thing, ac)
            if deadline is not None and time.monotonic() >= deadline:
                break
        say("stopping")
    return 0


if __name__ == "__main__":
    sys.exit(main())
