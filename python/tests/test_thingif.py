# SPDX-License-Identifier: Apache-2.0

"""The thingif Python package against a real mosquitto and a real thingif-hub."""

import gc
import logging
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import thingif
from conftest import PYTHON_DIR, LineLog, find_key, hub_path, identity, publish_command, stop_process

SCHEMA = "AirConditioner-Demo"


def child_env():
    """The environment for a Python child: it imports the same thingif package."""
    env = dict(os.environ)
    package_parent = str(Path(thingif.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    env.setdefault("THINGIF_LIBRARY", thingif.library_path)
    return env


def command(actions, schema=SCHEMA, schema_version=1, **extra):
    cid = "cmd-py-" + uuid.uuid4().hex[:12]
    c = {"commandID": cid, "schema": schema, "schemaVersion": schema_version, "issuer": "user:tester",
         "actions": actions}
    c.update(extra)
    return cid, c


def onboarded(make_thing, hub, name="thing", vendor_thing_id=None, **kwargs):
    t = make_thing(name, **kwargs)
    t.onboard(vendor_thing_id or "PY-" + uuid.uuid4().hex[:8], "pass", thing_type="AirConditioner",
              firmware_version="1.0.0")
    return t


def started(t, timeout=15):
    t.loop_start()
    assert t.wait_connected(timeout), "the thing did not connect within %s s" % timeout
    return t


def topic_of(t, tmp_path, name="thing"):
    return find_key(identity(tmp_path / name), "mqttTopic")


# ---- without a network ------------------------------------------------------

def test_version_and_strerror():
    assert thingif.version().count(".") == 2
    assert thingif.strerror(thingif.Status.ERR_IN_CALLBACK) == thingif.strerror(5)
    assert thingif.strerror(999) == "unknown status"


def test_claim_certificate_without_an_app_key(tmp_path):
    """A thing that onboards with a claim certificate needs no app key (fleet provisioning by claim)."""
    with thingif.Thing("demoApp", None, str(tmp_path / "claim"), log=False) as t:
        with pytest.raises(thingif.ThingIFError) as e:
            t.set_claim_certificate(str(tmp_path / "claim.crt"), None)
        assert e.value.status == thingif.Status.ERR_INVALID
        with pytest.raises(thingif.ThingIFError) as e:
            t.set_claim_certificate(str(tmp_path / "claim.crt"), str(tmp_path / "claim.key"))
        assert e.value.status == thingif.Status.ERR_TLS
        t.set_claim_certificate(None, None)


def test_bad_arguments_raise_with_the_right_status(tmp_path):
    def status_of(call):
        with pytest.raises(thingif.ThingIFError) as e:
            call()
        assert e.value.message == thingif.strerror(e.value.status)
        assert e.value.message in str(e.value)
        return e.value.status

    with pytest.raises(thingif.ThingIFError) as e:
        thingif.Thing("", "key", str(tmp_path / "x"))
    assert e.value.status == thingif.Status.ERR_INVALID

    with thingif.Thing("demoApp", "demoKey", str(tmp_path / "t")) as t:
        assert status_of(lambda: t.set_broker("", 1883)) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.set_broker("127.0.0.1", 0)) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.set_broker(None, 1883)) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.set_option(999, 1)) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.set_option(thingif.Option.KEEPALIVE_S, 1)) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.set_option("keepalive_s", 2 ** 70)) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.on_action("", lambda a: None)) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.on_action("x", lambda a: None, schema="S", schema_version=-1)) \
            == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.on_alias_action("", "x", lambda a: None)) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.set_tls("/nonexistent/ca.pem")) == thingif.Status.ERR_TLS
        assert status_of(lambda: t.set_tls("/nonexistent/ca.pem", certfile="c.pem")) == thingif.Status.ERR_TLS
        assert status_of(lambda: t.update_state({"power": True})) == thingif.Status.ERR_NOT_ONBOARDED
        assert status_of(lambda: t.update_state([1, 2])) in (thingif.Status.ERR_JSON, thingif.Status.ERR_NOT_ONBOARDED)
        assert status_of(lambda: t.update_state({"x": float("nan")})) == thingif.Status.ERR_JSON
        assert status_of(lambda: t.update_firmware_version("")) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.loop(10)) == thingif.Status.ERR_NOT_ONBOARDED
        assert status_of(lambda: t.loop_start()) == thingif.Status.ERR_NOT_ONBOARDED
        assert status_of(lambda: t.loop_stop()) == thingif.Status.ERR_STATE
        assert status_of(lambda: t.onboard("", "pw")) == thingif.Status.ERR_INVALID
        assert status_of(lambda: t.onboard("v", "pw", properties="[1]")) == thingif.Status.ERR_JSON
        assert status_of(lambda: t.set_state_provider(lambda th: {}, interval_ms=1)) == thingif.Status.ERR_INVALID
        assert t.thing_id is None
        assert not t.is_connected
        with pytest.raises(TypeError):
            t.set_broker(1234, 1883)
    # closed: every call says so, close() again is harmless
    assert status_of(lambda: t.set_broker("127.0.0.1", 1883)) == thingif.Status.ERR_INVALID
    t.close()


# ---- with the hub -----------------------------------------------------------

def test_onboarding(make_thing, hub, broker, tmp_path):
    t = make_thing("ac")
    t.onboard("AC-PY-1", "pass", thing_type="AirConditioner", firmware_version="1.0.0",
              properties={"room": "kitchen"})
    assert t.thing_id and t.thing_id.startswith("th.")
    m = hub.out.wait_for(r"^hub: onboarded AC-PY-1 as (\S+), commands on (\S+)$")
    assert m.group(1) == t.thing_id
    ident = identity(tmp_path / "ac")
    assert find_key(ident, "mqttTopic") == m.group(2)
    started(t)
    hub.out.wait_for(r"^hub: %s is online$" % t.thing_id)

    # A wrong password is refused by the framework.
    other = make_thing("other")
    with pytest.raises(thingif.ThingIFError) as e:
        other.onboard("AC-PY-1", "wrong")
    assert e.value.status == thingif.Status.ERR_REJECTED

    # The identity handed over by an app: thingID + token, no vendor onboarding.
    handed = make_thing("handed")
    handed.use_onboarded(ident["thingID"], ident["accessToken"])
    assert handed.thing_id == t.thing_id
    hub.out.wait_for(r"^hub: created MQTT installation \S+ for %s$" % t.thing_id)


def test_demo_round_trip_with_the_python_appliance(hub, broker, tmp_path):
    """python/examples/aircon.py onboards itself and runs the seeds' three commands: the
    three-action one succeeds, 99 degrees is refused with its range, power off succeeds."""
    aircon = subprocess.Popen([sys.executable, str(PYTHON_DIR / "examples" / "aircon.py"),
                               "--port", str(broker.port), "--storage", str(tmp_path / "aircon"),
                               "--run-seconds", "120"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=child_env())
    try:
        aircon_out = LineLog(aircon.stdout, tmp_path / "aircon.log")
        m = aircon_out.wait_for(r"onboarded as (\S+);", timeout=30)
        thing_id = m.group(1)
        hub.out.wait_for(r"^hub: %s is online" % re.escape(thing_id), timeout=30)
        topic = find_key(identity(tmp_path / "aircon"), "mqttTopic")
        steps = [
            ([{"turnPower": {"power": True}}, {"setPresetTemperature": {"presetTemperature": 25}},
              {"setFanSpeed": {"fanSpeed": 5}}], [True, True, True]),
            ([{"setPresetTemperature": {"presetTemperature": 99}}], [False]),
            ([{"turnPower": {"power": False}}], [True]),
        ]
        for actions, expected in steps:
            cid, cmd = command(actions, title="demo")
            publish_command(broker, topic, cmd)
            results = [list(r.values())[0] for r in hub.wait_results(cid)]
            assert [r["succeeded"] for r in results] == expected, results
            if not expected[0]:
                assert results[0]["errorMessage"] == "presetTemperature 99 is out of range 16..30", results
        aircon_out.wait_for(r"setPresetTemperature refused: presetTemperature 99 is out of range 16\.\.30")
        aircon_out.wait_for(r"state uploaded: power=off presetTemperature=25 fanSpeed=5")
        stop_process(aircon)
        assert aircon.returncode == 0, "\n".join(aircon_out.lines)
    finally:
        stop_process(aircon)


def test_handler_results_exceptions_and_data(make_thing, hub, broker, tmp_path):
    t = onboarded(make_thing, hub)
    seen = []

    def register():
        # Handlers that only the library's registry refers to.
        @t.action("turnPower", schema=SCHEMA, schema_version=1)
        def turn_power(action):
            seen.append((action.name, action.params, action.command_id, action.issuer, action.schema,
                         action.schema_version, action.alias, action.title, action.description,
                         action.metadata, action.index, action.expires_at))

        @t.action("setPresetTemperature", schema=SCHEMA, schema_version=1)
        def set_preset(action):
            raise ValueError("boom %d" % action.params["presetTemperature"])

        @t.action("setFanSpeed", schema=SCHEMA)  # any version
        def set_fan(action):
            if action.params["fanSpeed"] > 10:
                raise thingif.ActionFailed("fanSpeed %d is out of range 0..10" % action.params["fanSpeed"],
                                           data={"max": 10})
            return {"fanSpeed": action.params["fanSpeed"]}

        @t.action("badData", schema=SCHEMA)
        def bad_data(action):
            return [1, 2, 3]  # not an object: the action fails, nothing leaks into C

    register()
    gc.collect()
    started(t)

    cid, cmd = command([{"turnPower": {"power": True}}, {"setPresetTemperature": {"presetTemperature": 42}},
                        {"setFanSpeed": {"fanSpeed": 4}}, {"setFanSpeed": {"fanSpeed": 11}},
                        {"badData": {}}, {"unknownAction": {}}],
                       title="Cool down", description="Before I get home", metadata={"origin": "pytest"},
                       expiresAt=4102444800000)  # 2100-01-01: ahead, so it runs
    gc.collect()
    publish_command(broker, topic_of(t, tmp_path), cmd)
    results = hub.wait_results(cid)
    assert [list(r)[0] for r in results] == ["turnPower", "setPresetTemperature", "setFanSpeed", "setFanSpeed",
                                             "badData", "unknownAction"]
    r = [list(x.values())[0] for x in results]
    assert r[0] == {"succeeded": True}
    assert r[1]["succeeded"] is False and "ValueError: boom 42" in r[1]["errorMessage"]
    assert r[2] == {"succeeded": True, "data": {"fanSpeed": 4}}
    assert r[3] == {"succeeded": False, "errorMessage": "fanSpeed 11 is out of range 0..10", "data": {"max": 10}}
    assert r[4]["succeeded"] is False and "not a JSON object" in r[4]["errorMessage"]
    assert r[5]["succeeded"] is False and "unknownAction" in r[5]["errorMessage"]
    assert seen == [("turnPower", {"power": True}, cid, "user:tester", SCHEMA, 1, None, "Cool down",
                     "Before I get home", {"origin": "pytest"}, 0, 4102444800000)]


def test_alias_catch_all_and_replacement(make_thing, hub, broker, tmp_path):
    t = onboarded(make_thing, hub)
    calls = []
    t.on_alias_action("AirConditionerAlias", "turnPower", lambda a: calls.append(("alias", a.alias, a.params)))
    t.on_any_action(lambda a: calls.append(("any", a.name, a.params, a.index)))
    t.on_action("setFanSpeed", lambda a: calls.append(("first", a.params)))
    t.on_action("setFanSpeed", lambda a: calls.append(("second", a.params)))  # replaces the first
    gc.collect()
    started(t)

    cid = "cmd-py-" + uuid.uuid4().hex[:12]
    cmd = {"commandID": cid, "issuer": "user:tester",
           "actions": [{"AirConditionerAlias": [{"turnPower": True}, {"setFanSpeed": 3}]},
                       {"HumidityAlias": [{"setHumidity": 40}]}]}
    publish_command(broker, topic_of(t, tmp_path), cmd)
    results = hub.wait_results(cid)
    assert list(results[0]) == ["AirConditionerAlias"] and list(results[1]) == ["HumidityAlias"]
    assert all(list(x.values())[0]["succeeded"] for group in results for x in list(group.values())[0])
    assert calls == [("alias", "AirConditionerAlias", True), ("second", 3), ("any", "setHumidity", 40, 2)]

    # Removing the catch-all: an unknown action now fails with a clear message.
    t.on_any_action(None)
    cid2, cmd2 = command([{"mystery": {}}])
    publish_command(broker, topic_of(t, tmp_path), cmd2)
    r = list(hub.wait_results(cid2)[0].values())[0]
    assert r["succeeded"] is False and "mystery" in r["errorMessage"]


def test_update_state_patch_and_firmware_reach_the_hub(make_thing, hub):
    t = started(onboarded(make_thing, hub))
    start = hub.out.mark()
    t.update_state({"power": True, "presetTemperature": 24, "note": "naïve ✓"})
    state = hub.wait_state(t.thing_id, start)
    assert state == {"power": True, "presetTemperature": 24, "note": "naïve ✓"}
    t.patch_state({"presetTemperature": 20})
    state = hub.wait_state(t.thing_id, start, predicate=lambda s: s.get("presetTemperature") == 20)
    assert state == {"power": True, "presetTemperature": 20, "note": "naïve ✓"}
    t.update_firmware_version("1.2.3")
    hub.out.wait_for(r"^hub: firmware version of %s: 1\.2\.3$" % t.thing_id, start=start)


def test_state_provider_and_caller_driven_loop(make_thing, hub):
    t = onboarded(make_thing, hub)
    ticks = []

    def provide(thing):
        ticks.append(thing)
        if len(ticks) == 2:
            raise RuntimeError("a provider error skips one upload")
        return {"tick": len(ticks)}

    t.set_state_provider(provide, interval_ms=100)
    del provide
    gc.collect()
    start = hub.out.mark()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(ticks) < 4:
        t.loop(100)  # the provider runs here, on this thread
    assert len(ticks) >= 4 and ticks[0] is t
    hub.wait_state(t.thing_id, start, predicate=lambda s: s.get("tick", 0) >= 3)
    t.set_state_provider(None)


def test_callbacks_survive_garbage_collection(make_thing, hub, broker, tmp_path):
    t = onboarded(make_thing, hub)
    hits = []

    def install():
        class Device:
            def __init__(self):
                self.power = None

            def handler(self, action):
                self.power = action.params["power"]
                hits.append(self.power)
        t.on_action("turnPower", Device().handler, schema=SCHEMA, schema_version=1)
        t.set_log_callback(lambda level, message: None, thingif.LogLevel.DEBUG)

    install()
    for _ in range(3):
        gc.collect()
    started(t)
    for power in (True, False):
        cid, cmd = command([{"turnPower": {"power": power}}])
        gc.collect()
        publish_command(broker, topic_of(t, tmp_path), cmd)
        assert list(hub.wait_results(cid)[0].values())[0] == {"succeeded": True}
    assert hits == [True, False]


def test_log_lines_go_to_python_logging(make_thing, hub, caplog):
    caplog.set_level(logging.DEBUG, logger="thingif")
    t = make_thing("logged", log_level=logging.DEBUG)
    t.onboard("PY-LOG", "pass")
    started(t)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(r.name == "thingif" and "onboarded" in r.getMessage()
                                                  for r in caplog.records):
        time.sleep(0.05)
    assert any(r.name == "thingif" and "onboarded" in r.getMessage() for r in caplog.records), caplog.text


def test_close_from_a_handler_raises_in_callback_and_defer_completes(make_thing, hub, broker, tmp_path):
    t = onboarded(make_thing, hub)
    statuses = []
    deferred = []

    @t.action("turnPower", schema=SCHEMA)
    def turn_power(action):
        for call in (action.thing.close, action.thing.loop_stop, lambda: action.thing.loop(10)):
            try:
                call()
            except thingif.ThingIFError as e:
                statuses.append(e.status)

    @t.action("setFanSpeed", schema=SCHEMA)
    def set_fan(action):
        deferred.append(action.defer())

    started(t)
    cid, cmd = command([{"turnPower": {"power": True}}, {"setFanSpeed": {"fanSpeed": 2}}])
    publish_command(broker, topic_of(t, tmp_path), cmd)
    deadline = time.monotonic() + 20
    while not deferred and time.monotonic() < deadline:
        time.sleep(0.05)
    assert deferred, "the deferring handler did not run"
    assert statuses == [thingif.Status.ERR_IN_CALLBACK] * 3
    assert t.thing_id  # still open
    threading.Thread(target=lambda: deferred[0].complete(data={"fanSpeed": 2})).start()
    results = hub.wait_results(cid)
    assert [list(x.values())[0] for x in results] == [{"succeeded": True},
                                                      {"succeeded": True, "data": {"fanSpeed": 2}}]
    with pytest.raises(thingif.ThingIFError) as e:
        deferred[0].complete()
    assert e.value.status == thingif.Status.ERR_STATE
    t.loop_stop()
    assert t.loop(50) in (True, False)  # the caller-driven loop works after loop_stop()
    t.close()
    t.close()


def test_one_version_everywhere():
    """The header's THINGIF_VERSION_STRING is the version: the library's, the package's."""
    import re
    header = (PYTHON_DIR.parent / "include" / "thingif.h").read_text()
    version = re.search(r'^#define THINGIF_VERSION_STRING "([0-9.]+)"', header, re.M).group(1)
    assert thingif.version() == version
    assert thingif.__version__ == version
    pyproject = (PYTHON_DIR / "pyproject.toml").read_text()
    assert re.search(r'^version = "([0-9.]+)"', pyproject, re.M).group(1) == version
    from thingif import _native
    abi = re.search(r'^#define THINGIF_ABI_VERSION ([0-9]+)', header, re.M).group(1)
    assert _native._LIB_NAMES[0] == "libthingif.so.%s" % abi


def test_binding_covers_the_whole_header():
    """Every function and enum constant of include/thingif.h is in the binding:
    a function added to the header without the binding fails here."""
    import re
    from thingif import _native
    header = (PYTHON_DIR.parent / "include" / "thingif.h").read_text()
    functions = set(re.findall(r"^(?:THINGIF_[A-Z]+(?:\([^)]*\))? )*[a-z][^()\n;]*?\b(thingif_[a-z0-9_]+)\(",
                               header, re.M))
    assert len(functions) >= 55, sorted(functions)
    assert sorted(functions - set(_native.declared)) == []
    for prefix, enum_type, python_prefix in ((r"THINGIF_ERR_", thingif.Status, "ERR_"),
                                             (r"THINGIF_OPT_", thingif.Option, ""),
                                             (r"THINGIF_LOG_", thingif.LogLevel, ""),
                                             (r"THINGIF_DURABILITY_", thingif.Durability, ""),
                                             (r"THINGIF_RECUR_", thingif.Recurrence, ""),
                                             (r"THINGIF_LAYOUT_", thingif.Layout, ""),
                                             (r"THINGIF_END_NODE_", thingif.EndNodeEvent, "")):
        constants = re.findall(r"\b%s([A-Z0-9_]+)\s*=\s*(\d+)" % prefix, header)
        assert constants, prefix
        for name, value in constants:
            assert enum_type[python_prefix + name] == int(value), prefix + name
        # Both ways: the prefix catches nothing else, and the enum has no member the header lacks.
        assert sorted(python_prefix + name for name, _ in constants) == \
            sorted(m.name for m in enum_type if m.name.startswith(python_prefix)), prefix


def test_action_sets_and_timers_with_an_injected_clock(make_thing, hub):
    t = onboarded(make_thing, hub)
    now = [1_900_000_000_000]
    t.set_clock(lambda: now[0])
    runs = []

    @t.action("turnPower", schema=SCHEMA, schema_version=1)
    def turn_power(action):
        runs.append((action.command_id, action.params["power"]))

    S = thingif.Status
    t.action_set_create("on")
    t.action_set_add_action("on", "turnPower", {"power": True}, schema=SCHEMA, schema_version=1)
    t.action_set_add_action("on", "turnPower", {"power": False}, schema=SCHEMA, schema_version=1)
    t.action_set_remove_action("on", 1)
    for call, status in ((lambda: t.action_set_create("on"), S.ERR_EXISTS),
                         (lambda: t.action_set_remove_action("on", 5), S.ERR_INVALID),
                         (lambda: t.action_set_execute("nope"), S.ERR_NOT_FOUND),
                         (lambda: t.action_set_add_action("on", "x", {1, 2}, schema=SCHEMA), S.ERR_JSON)):
        with pytest.raises(thingif.ThingIFError) as e:
            call()
        assert e.value.status == status
    started(t)
    t.action_set_execute("on")
    deadline = time.monotonic() + 20
    while not runs and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(runs) == 1 and runs[0][1] is True and runs[0][0].startswith("local-"), runs
    assert list(hub.wait_results(runs[0][0])[0].values())[0] == {"succeeded": True}

    R = thingif.Recurrence
    for kwargs, status in (({"recurrence": R.MINUTE, "recurrence_count": 4}, S.ERR_INVALID),
                           ({"time_zone": "zone.tab"}, S.ERR_INVALID),
                           ({"fire_date_ms": now[0] - 1}, S.ERR_INVALID)):
        args = dict(name="bad", fire_date_ms=now[0] + 60_000, action_sets=["on"])
        args.update(kwargs)
        with pytest.raises(thingif.ThingIFError) as e:
            t.timer_create(**args)
        assert e.value.status == status, kwargs
    with pytest.raises(thingif.ThingIFError) as e:
        t.timer_create("bad", now[0] + 60_000, ["nope"])
    assert e.value.status == S.ERR_INVALID
    t.timer_create("wake", now[0] + 60_000, ["on"], time_zone="Europe/Paris", recurrence=R.MINUTE, recurrence_count=5)
    t.timer_enable("wake")
    now[0] += 61_000
    deadline = time.monotonic() + 20
    while len(runs) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(runs) == 2 and runs[1][0] != runs[0][0], runs
    assert list(hub.wait_results(runs[1][0])[0].values())[0] == {"succeeded": True}
    with pytest.raises(thingif.ThingIFError) as e:
        t.action_set_delete("on")
    assert e.value.status == S.ERR_STATE
    t.timer_delete("wake")
    t.action_set_delete("on")
    with pytest.raises(thingif.ThingIFError) as e:
        t.timer_enable("wake")
    assert e.value.status == S.ERR_NOT_FOUND
    t.set_clock(None)
