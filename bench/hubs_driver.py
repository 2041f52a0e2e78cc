#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""bench/hubs_driver.py - the app side of bench/hubs.sh (standard library only).

  setup:  hubs_driver.py setup HUB_URL [--gateway] VENDOR_ID...
          creates a user, onboards each vendorThingID (owner onboarding; with
          --gateway as gateways, layoutPosition GATEWAY) and prints
          {"token", "things":[{"vendorThingID","thingID","accessToken"}]}.
  run:    hubs_driver.py run --hubs URL,URL --token T --things ID,ID -n N -c C
                 [--schema S --actions JSON] [--pick random]
          sends N commands through the hubs' REST APIs, round-robin over the
          hubs and the things (or to things picked at random, seed 1), C in
          flight, and waits for each one's results. The commands are the
          AirConditioner-Demo's three actions unless --schema and --actions
          (a JSON array) say otherwise.
          A command is done when an event stream (SSE, opened on the first hub
          and fed across hubs by PostgreSQL's LISTEN/NOTIFY) says so; a
          command without an event after 3 s is read with GET until it has
          results (counted as "polled"). Prints one line of key=value figures.

A normal user's every SSE installation is notified, so one stream sees all.
"""
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

APP = "demoApp"
ACTIONS = [
    {"turnPower": {"power": True}},
    {"setPresetTemperature": {"presetTemperature": 24}},
    {"setFanSpeed": {"fanSpeed": 3}},
]


class Hub:
    """One keep-alive HTTP connection to a hub (one per thread)."""

    def __init__(self, url, token=None):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.token = token
        self.conn = None

    def request(self, method, path, body=None, content_type="application/json", retry=True):
        """(status, response bytes). A connection the hub closed while idle is
        opened again once when `retry`; other failures raise."""
        headers = {}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        for attempt in range(2 if retry else 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                self.conn.connect()
                # Headers and body leave in two writes: without this, Nagle and
                # the delayed ACK add 40 ms to every POST.
                self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                text = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, text
            except (http.client.HTTPException, OSError):
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt == 1 or not retry:
                    raise
        raise RuntimeError("unreachable")

    def call(self, method, path, body=None, content_type="application/json"):
        """The parsed JSON answer; an answer of 300 or more raises."""
        status, text = self.request(method, path, body, content_type)
        if status >= 300:
            raise RuntimeError("%s %s: HTTP %d %s" % (method, path, status, text[:200]))
        return json.loads(text) if text else None


def setup(url, vendor_ids):
    gateway = vendor_ids[:1] == ["--gateway"]
    if gateway:
        vendor_ids = vendor_ids[1:]
    hub = Hub(url)
    login = "bench-%d" % int(time.time() * 1000)
    u = hub.call("POST", "/api/apps/%s/users" % APP, {"loginName": login, "password": "bench-pass-1"})
    hub.token = u["accessToken"]
    things = []
    for v in vendor_ids:
        form = {"vendorThingID": v, "thingPassword": "bench-pass", "owner": "user:" + u["userID"],
                "thingType": "LampGateway" if gateway else "AirConditioner"}
        if gateway:
            form["layoutPosition"] = "GATEWAY"
        t = hub.call(
            "POST",
            "/thing-if/apps/%s/onboardings" % APP,
            form,
            content_type="application/vnd.kii.OnboardingWithVendorThingIDByOwner+json",
        )
        things.append({"vendorThingID": v, "thingID": t["thingID"], "accessToken": t["accessToken"]})
    print(json.dumps({"token": hub.token, "userID": u["userID"], "things": things}))


def release_key(tmp, kid="fw-bench"):
    """A release key (openssl, P-256) and the device's trust file naming it: (key path, trust path)."""
    key = os.path.join(tmp, "fw.pem")
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key], check=True)
    pub = subprocess.run(["openssl", "ec", "-in", key, "-pubout"], check=True, capture_output=True).stdout.decode()
    trust = os.path.join(tmp, "trust.json")
    with open(trust, "w") as f:
        json.dump({"keys": [{"kid": kid, "publicKey": pub}]}, f)
    return key, trust


def operator_cli(cli_path, hub, admin, tmp, who):
    """The thingif CLI as the operator (the adminToken, a config in tmp): cli(*args) -> stdout, exits on failure."""
    env = dict(os.environ, THINGIF_HUB_URL=hub, THINGIF_APP_ID=APP, THINGIF_ADMIN_TOKEN=admin,
               THINGIF_CONFIG=os.path.join(tmp, "cli.json"))

    def cli(*args):
        r = subprocess.run([cli_path, *args], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("%s: thingif %s: %s%s" % (who, " ".join(args), r.stdout, r.stderr))
        return r.stdout
    return cli


class Events(threading.Thread):
    """Reads one SSE stream; sets done[commandID] when a command finishes."""

    def __init__(self, url, token):
        super().__init__(daemon=True)
        hub = Hub(url, token)
        inst = hub.call("POST", "/api/apps/%s/installations" % APP, {"deviceType": "SSE"})
        self.path = "/api/apps/%s/installations/%s/events" % (APP, inst["installationID"])
        self.hub = hub
        self.lock = threading.Lock()
        self.finished = {}
        self.waiters = {}
        self.ready = threading.Event()

    def wait(self, cid, timeout):
        with self.lock:
            if cid in self.finished:
                return True
            ev = self.waiters.setdefault(cid, threading.Event())
        return ev.wait(timeout)

    def run(self):
        conn = http.client.HTTPConnection(self.hub.host, self.hub.port, timeout=3600)
        conn.request("GET", self.path, headers={"Authorization": "Bearer " + self.hub.token})
        r = conn.getresponse()
        if r.status != 200:
            print("hubs_driver: event stream: HTTP %d" % r.status, file=sys.stderr)
            return
        event = None
        while True:
            line = r.fp.readline()
            if not line:
                return
            line = line.decode().rstrip("\n")
            if line.startswith(": connected"):
                self.ready.set()
            elif line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "command":
                d = json.loads(line[6:])
                if d.get("commandState") in ("DONE", "INCOMPLETE"):
                    cid = d["commandID"]
                    with self.lock:
                        self.finished[cid] = True
                        ev = self.waiters.pop(cid, None)
                    if ev:
                        ev.set()


def run(args):
    opts = {}
    i = 0
    while i < len(args):
        opts[args[i]] = args[i + 1]
        i += 2
    hubs = opts["--hubs"].split(",")
    things = opts["--things"].split(",")
    token = opts["--token"]
    n = int(opts["-n"])
    conc = int(opts["-c"])
    schema = opts.get("--schema", "AirConditioner-Demo")
    actions = json.loads(opts["--actions"]) if "--actions" in opts else ACTIONS
    picks = None
    if opts.get("--pick") == "random":
        rnd = random.Random(1)
        picks = [rnd.randrange(len(things)) for _ in range(n)]
    events = Events(hubs[0], token)
    events.start()
    if not events.ready.wait(10):
        sys.exit("hubs_driver: the event stream did not open")
    nxt = [0]
    lock = threading.Lock()
    lat = []
    stats = {"done": 0, "incomplete": 0, "polled": 0, "errors": 0}

    def worker():
        conns = [Hub(h, token) for h in hubs]
        while True:
            with lock:
                k = nxt[0]
                if k >= n:
                    return
                nxt[0] += 1
            hub = conns[k % len(conns)]
            tid = things[picks[k] if picks else k % len(things)]
            target = "/thing-if/apps/%s/targets/thing:%s/commands" % (APP, tid)
            t0 = time.monotonic()
            try:
                c = hub.call("POST", target, {"schema": schema, "schemaVersion": 1,
                                              "actions": actions, "issuer": "user:" + opts["--user"]})
                cid = c["commandID"]
                state = None
                if events.wait(cid, 3):
                    state = "seen"
                else:
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline:
                        got = hub.call("GET", target + "/" + cid)
                        if got.get("commandState") in ("DONE", "INCOMPLETE"):
                            state = got["commandState"]
                            break
                        time.sleep(0.2)
                t1 = time.monotonic()
                with lock:
                    if state is None:
                        stats["errors"] += 1
                    else:
                        lat.append(t1 - t0)
                        stats["done"] += 1
                        if state != "seen":
                            stats["polled"] += 1
            except Exception as e:  # counted, the run goes on
                with lock:
                    stats["errors"] += 1
                print("hubs_driver: %s" % e, file=sys.stderr)

    start = time.monotonic()
    cpu0 = time.process_time()
    threads = [threading.Thread(target=worker) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - start
    cpu = time.process_time() - cpu0
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else 0.0

    print("n=%d done=%d polled=%d errors=%d seconds=%.2f cmd_per_s=%.1f p50_ms=%.1f p95_ms=%.1f p99_ms=%.1f max_ms=%.1f"
          " driver_cpu_us=%d"
          % (n, stats["done"], stats["polled"], stats["errors"], secs, stats["done"] / secs if secs else 0,
             pct(0.5), pct(0.95), pct(0.99), pct(1.0), cpu / n * 1e6 if n else 0))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "setup":
        setup(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) >= 2 and sys.argv[1] == "run":
        run(sys.argv[2:])
    else:
        sys.exit(__doc__)
