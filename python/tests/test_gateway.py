# SPDX-License-Identifier: Apache-2.0

"""A gateway and its end nodes (docs/GATEWAYS.md) through the Python binding,
against a real mosquitto and a real thingif-hub: the gateway onboards itself,
registers an end node, runs the commands its owner sends to that end node
through the hub's REST API, uploads the end node's state and removes it."""

import gc
import logging
import threading
import time
import uuid

import pytest

import thingif
from conftest import find_key, identity, publish_command, rest
from test_thingif import command, started

APP = "demoApp"
LAMP = "Lamp-Demo"
S = thingif.Status
E = thingif.EndNodeEvent


def wait_until(predicate, timeout=20.0, what="the condition"):
    """Polls predicate() until it returns something true, up to timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("%s did not happen within %.0f s" % (what, timeout))
        time.sleep(0.05)


def status_of(call):
    with pytest.raises(thingif.ThingIFError) as e:
        call()
    assert e.value.message == thingif.strerror(e.value.status)
    return e.value.status


def hub_base(hub):
    port = hub.out.wait_for(r"HTTP API on http://127\.0\.0\.1:(\d+)/", timeout=15).group(1)
    return "http://127.0.0.1:%s" % port


class Events:
    """The end-node callback's calls, for a test to wait on."""

    def __init__(self):
        self.seen = []
        self._cond = threading.Condition()

    def add(self, item):
        with self._cond:
            self.seen.append(item)
            self._cond.notify_all()

    def wait(self, event, vendor_thing_id, timeout=20.0):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for item in self.seen:
                    if item[0] == event and item[1] == vendor_thing_id:
                        return item
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no %s for %s within %.0f s; seen: %r"
                                         % (event, vendor_thing_id, timeout, self.seen))
                self._cond.wait(left)


def test_end_node_argument_errors_without_a_network(tmp_path):
    with thingif.Thing(APP, "demoKey", str(tmp_path / "t"), log=False) as t:
        # A thing on its own is no gateway.
        assert status_of(lambda: t.end_node_add("LAMP-1", "pw")) == S.ERR_STATE
        assert status_of(lambda: t.end_node_state_update("LAMP-1", {"power": True})) == S.ERR_STATE
        assert status_of(lambda: t.end_node_remove("LAMP-1")) == S.ERR_STATE
        assert t.end_node_thing_id("LAMP-1") is None
        assert t.end_nodes() == []
        assert status_of(lambda: t.set_layout_position(7)) == S.ERR_INVALID
        assert status_of(lambda: t.set_layout_position(2 ** 40)) == S.ERR_INVALID
        with pytest.raises(KeyError):
            t.set_layout_position("mesh")
        t.set_layout_position("gateway")
        # A gateway that is not onboarded yet.
        assert status_of(lambda: t.end_node_add("LAMP-1", "pw")) == S.ERR_NOT_ONBOARDED
        for call in (lambda: t.end_node_add("", "pw"), lambda: t.end_node_add(None, "pw"),
                     lambda: t.end_node_add("LAMP-1", ""), lambda: t.end_node_add("L" * 201, "pw"),
                     lambda: t.end_node_thing_id(""), lambda: t.end_node_set_online("", True),
                     lambda: t.end_node_remove(""), lambda: t.end_node_state_update("", {}),
                     lambda: t.end_node_state_patch(None, {}),
                     lambda: t.end_node_firmware_version_update("LAMP-1", "")):
            assert status_of(call) == S.ERR_INVALID
        assert status_of(lambda: t.end_node_add("LAMP-1", "pw", properties="[1]")) == S.ERR_JSON
        assert status_of(lambda: t.end_node_add("LAMP-1", "pw", properties={"x": float("nan")})) == S.ERR_JSON
        assert status_of(lambda: t.end_node_state_update("LAMP-1", {"x": float("nan")})) == S.ERR_JSON
        assert status_of(lambda: t.end_node_set_online("LAMP-1", True)) == S.ERR_NOT_FOUND
        assert status_of(lambda: t.set_option(thingif.Option.MAX_END_NODES, 0)) == S.ERR_INVALID
        with pytest.raises(TypeError):
            t.on_end_node(42)
        assert t.on_end_node(None) is None
        t.set_layout_position(thingif.Layout.STANDALONE)
        assert status_of(lambda: t.end_node_add("LAMP-1", "pw")) == S.ERR_STATE


def test_gateway_runs_its_end_nodes_commands_state_and_removal(make_thing, hub, broker, tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="thingif")
    base = hub_base(hub)
    gw = make_thing("gw")
    gw.set_layout_position(thingif.Layout.GATEWAY)
    gw.set_option(thingif.Option.MAX_END_NODES, 1)
    events = Events()
    inside = []
    handles = []
    ran = []

    def install():
        # Callables that only the library's registry refers to.
        @gw.on_end_node
        def end_node_changed(thing, event, vendor_thing_id, thing_id, detail):
            handles.append(thing)
            events.add((event, vendor_thing_id, thing_id, detail))
            # Allowed inside: the listing runs over a copy of the registry.
            inside.append([n.vendor_thing_id for n in thing.end_nodes()])
            inside.append(thing.end_node_thing_id(vendor_thing_id))
            raise RuntimeError("a callback's exception stays in Python")

        @gw.action("turnPower", schema=LAMP, schema_version=1)
        def turn_power(action):
            ran.append((action.end_node, action.thing_id, action.name, action.params, action.command_id))
            return {"power": action.params["power"]}

    install()
    gc.collect()

    # The gateway onboards itself as one.
    vendor = "GW-PY-" + uuid.uuid4().hex[:8]
    gw.onboard(vendor, "gw-pass", thing_type="Gateway", firmware_version="1.0.0")
    gw_id = gw.thing_id
    assert gw_id

    # Its owner: a user who onboards the same thing (the end nodes it onboards get the gateway's owners).
    status, user = rest(base, "POST", "/api/apps/%s/users" % APP,
                        {"loginName": "gw-owner-" + uuid.uuid4().hex[:6], "password": "owner-pass-1"})
    assert status in (200, 201), user
    token, owner = user["accessToken"], "user:" + user["userID"]
    status, body = rest(base, "POST", "/thing-if/apps/%s/onboardings" % APP,
                        {"vendorThingID": vendor, "thingPassword": "gw-pass", "owner": owner,
                         "layoutPosition": "GATEWAY"},
                        token=token, content_type="application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
    assert status == 200 and body["thingID"] == gw_id, (status, body)

    started(gw)
    hub.out.wait_for(r"^hub: %s is online$" % gw_id, timeout=30)
    assert status_of(lambda: gw.set_layout_position(thingif.Layout.GATEWAY)) == S.ERR_STATE  # a loop runs

    # An end node: ADDED with its thingID.
    gw.end_node_add("LAMP-1", "lamp-pass", thing_type="Lamp", firmware_version="1.0",
                    properties={"room": "hall"})
    assert status_of(lambda: gw.end_node_add("LAMP-1", "lamp-pass")) == S.ERR_EXISTS
    assert status_of(lambda: gw.end_node_add("LAMP-2", "lamp-pass")) == S.ERR_TOO_MANY
    event, v, lamp_id, detail = events.wait(E.ADDED, "LAMP-1")
    assert isinstance(event, thingif.EndNodeEvent) and lamp_id and lamp_id != gw_id and detail is None
    assert gw.end_node_thing_id("LAMP-1") == lamp_id
    assert gw.end_node_thing_id("LAMP-9") is None
    assert gw.end_nodes() == [thingif.EndNode("LAMP-1", lamp_id, True)]
    assert gw.end_nodes()[0].thing_id == lamp_id
    wait_until(lambda: len(inside) >= 2, what="the callback's own calls")
    assert inside[:2] == [["LAMP-1"], lamp_id]
    assert handles and all(h is gw for h in handles)
    # Logged after the callback's own calls, on the loop thread: waited for.
    wait_until(lambda: "end-node callback raised" in caplog.text, what="the callback's exception logged")
    assert "a callback's exception stays in Python" in caplog.text

    # The owner sees it behind the gateway, online.
    status, body = rest(base, "GET", "/thing-if/apps/%s/things/%s/end-nodes" % (APP, gw_id), token=token)
    assert status == 200 and [(r["thingID"], r["vendorThingID"]) for r in body["results"]] == [(lamp_id, "LAMP-1")]
    wait_until(lambda: rest(base, "GET", "/thing-if/apps/%s/things/%s/end-nodes/%s" % (APP, gw_id, lamp_id),
                            token=token)[1].get("online") is True, what="LAMP-1 online at the hub")

    # The owner's command to the end node, through the hub: the handler knows which end node it is for.
    status, body = rest(base, "POST", "/thing-if/apps/%s/targets/thing:%s/commands" % (APP, lamp_id),
                        {"schema": LAMP, "schemaVersion": 1, "issuer": owner,
                         "actions": [{"turnPower": {"power": True}}]}, token=token)
    assert status == 201, body
    cid = body["commandID"]
    wait_until(lambda: ran, what="the end node's handler")
    assert ran == [("LAMP-1", lamp_id, "turnPower", {"power": True}, cid)]
    assert hub.wait_results(cid) == [{"turnPower": {"succeeded": True, "data": {"power": True}}}]

    def stored():
        s, c = rest(base, "GET", "/thing-if/apps/%s/targets/thing:%s/commands/%s" % (APP, lamp_id, cid), token=token)
        return c if s == 200 and c.get("commandState") == "DONE" else None
    cmd = wait_until(stored, what="the command DONE at the hub")
    assert find_key(cmd["actionResults"], "turnPower") == {"succeeded": True, "data": {"power": True}}, cmd

    # The gateway's own command: no end node, its own thingID.
    cid2, own = command([{"turnPower": {"power": False}}], schema=LAMP)
    publish_command(broker, find_key(identity(tmp_path / "gw"), "mqttTopic"), own)
    assert list(hub.wait_results(cid2)[0].values())[0] == {"succeeded": True, "data": {"power": False}}
    assert ran[1] == (None, gw_id, "turnPower", {"power": False}, cid2)

    # The end node's state and firmware version reach the hub as its own.
    start = hub.out.mark()
    gw.end_node_state_update("LAMP-1", {"power": True, "brightness": 80})
    assert hub.wait_state(lamp_id, start) == {"power": True, "brightness": 80}
    gw.end_node_state_patch("LAMP-1", {"brightness": 40})
    assert hub.wait_state(lamp_id, start, predicate=lambda s: s.get("brightness") == 40) == \
        {"power": True, "brightness": 40}
    status, state = rest(base, "GET", "/thing-if/apps/%s/targets/thing:%s/states" % (APP, lamp_id), token=token)
    assert status == 200 and state == {"power": True, "brightness": 40}, (status, state)
    gw.end_node_firmware_version_update("LAMP-1", "1.1")
    hub.out.wait_for(r"^hub: firmware version of %s: 1\.1$" % lamp_id, start=start)

    # Offline, then removed: REMOVED, and it is forgotten on both sides.
    gw.end_node_set_online("LAMP-1", False)
    assert gw.end_nodes() == [thingif.EndNode("LAMP-1", lamp_id, False)]
    gw.end_node_remove("LAMP-1")
    assert events.wait(E.REMOVED, "LAMP-1")[2] == lamp_id
    assert gw.end_node_thing_id("LAMP-1") is None
    assert gw.end_nodes() == []
    assert status_of(lambda: gw.end_node_remove("LAMP-1")) == S.ERR_NOT_FOUND
    assert status_of(lambda: gw.end_node_state_update("LAMP-1", {"power": False})) == S.ERR_NOT_FOUND
    status, body = rest(base, "GET", "/thing-if/apps/%s/things/%s/end-nodes/%s" % (APP, gw_id, lamp_id), token=token)
    assert status == 404, (status, body)

    # Refused: the gateway's own vendorThingID cannot be an end node; it is forgotten.
    gw.end_node_add(vendor, "gw-pass")
    event, v, thing_id, detail = events.wait(E.REFUSED, vendor)
    assert thing_id is None and detail and "LAYOUT_POSITION_MISMATCH" in detail, detail
    assert gw.end_nodes() == [] and gw.end_node_thing_id(vendor) is None

    # Room again under MAX_END_NODES = 1; the owner gives it another vendorThingID: CHANGED.
    gw.end_node_add("LAMP-2", "lamp-pass")
    lamp2 = events.wait(E.ADDED, "LAMP-2")[2]
    assert lamp2 and lamp2 != lamp_id
    status, body = rest(base, "PUT", "/api/apps/%s/things/%s/vendor-thing-id" % (APP, lamp2),
                        {"_vendorThingID": "LAMP-2B", "_password": "lamp-pass-2"}, token=token,
                        content_type="application/vnd.kii.VendorThingIDUpdateRequest+json")
    assert status == 204, (status, body)
    assert events.wait(E.CHANGED, "LAMP-2B")[2] == lamp2
    assert gw.end_node_thing_id("LAMP-2B") == lamp2
    assert gw.end_node_thing_id("LAMP-2") is None
    assert [n[:2] for n in gw.end_nodes()] == [("LAMP-2B", lamp2)]
    assert [e[0] for e in events.seen] == [E.ADDED, E.REMOVED, E.REFUSED, E.ADDED, E.CHANGED], events.seen

    # The registry outlives the handle (storage_dir/end_nodes.json); every end node starts offline.
    gw.close()
    again = make_thing("gw")
    again.set_layout_position(thingif.Layout.GATEWAY)
    again.onboard(vendor, "gw-pass")
    assert again.thing_id == gw_id
    assert again.end_nodes() == [thingif.EndNode("LAMP-2B", lamp2, False)]
    assert again.end_node_thing_id("LAMP-2B") == lamp2


def test_a_thing_on_its_own_is_no_gateway(make_thing, hub):
    t = make_thing("alone")
    t.onboard("PY-ALONE-" + uuid.uuid4().hex[:8], "pass")
    started(t)
    assert status_of(lambda: t.end_node_add("LAMP-1", "pw")) == S.ERR_STATE
    assert status_of(lambda: t.end_node_add("", "pw")) == S.ERR_INVALID
    assert t.end_nodes() == []
