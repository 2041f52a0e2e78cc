#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""bench/abuse_driver.py - the floods of bench/abuse (standard library only).

  abuse_driver.py FLOOD --hub URL --token T --user U --thing TID
                  [--mqtt-port P --app-id A --app-key K] [-c CLIENTS] [-d SECONDS]

Runs FLOOD with CLIENTS clients for SECONDS while one owner sends commands
to a running aircon one at a time (REST POST, then its result event on the
owner's event stream), and prints one line of key=value figures: the commands' p50/p99 round
trip, commands that never finished (lost), and what the flood got through.

FLOOD is one of:
  idle           no flood
  signup         POST …/users with a loginName and a password (no credential)
  onboard        onboarding by the thing over HTTP, a new vendorThingID each time
  login          logins of unknown users (each a full password hash)
  mqtt           one app-key MQTT connection publishing onboarding requests as
                 fast as it can, QoS 0, a new client ID in every topic
  rollout        8 clients onboarding new things over HTTP (a normal fleet roll-out)
  installations  one pseudo user making MQTT installations at 15 a second
  slowloris      4,000 half-sent HTTP requests from --source (reports how many are open at the end)
  oneaddress     one address (--source) keeping 1,000 half-sent HTTP requests open for at least 30 s,
                 opening a new one for each the hub closes; another client (127.0.0.1) opens a new
                 connection for GET /health once a second, 3 s timeout (reports its answers and p50/p99)
  nonowner       8 pseudo users reading a thing they do not own, while its owner
                 reads it too (reports the owner's answers)
  gateway        no flood; a gateway of the owner onboards end nodes over MQTT one at a time
                 (100 ms apart), on libthingif's path (POST things/{gw}/end-nodes) and Kii's
                 (POST onboardings, its token) in turn: their p50/p99 (the baseline of endnodes)
  endnodes       the same while the bootstrap identity sends --flood-rate (1,000) token-less
                 end-node onboardings a second, evenly spaced, a new client ID in every topic
                 (issue 62): the gateway's onboardings answered, their p50/p99, and the flood's
                 refusals dropped (/metrics)
"""
import argparse
import errno
import http.client
import json
import os
import resource
import selectors
import socket
import struct
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubs_driver  # noqa: E402  (its event stream reader)

ACTIONS = [{"turnPower": {"power": True}}]
BY_THING = "application/vnd.kii.OnboardingWithVendorThingIDByThing+json"


class Hub(hubs_driver.Hub):
    """hubs_driver's connection, answering (status, parsed body or None) and
    never raising: status 0 when the connection failed (no retry, so a flood's
    refusals are counted as they come)."""

    def call(self, method, path, body=None, content_type="application/json"):
        try:
            status, text = self.request(method, path, body, content_type, retry=False)
        except (http.client.HTTPException, OSError):
            return 0, None
        try:
            return status, (json.loads(text) if text else None)
        except ValueError:
            return status, None


def metric_sum(url, name, label=None):
    """The sum of a counter's samples in /metrics (those with `label` in their labels)."""
    h = Hub(url)
    h.conn = http.client.HTTPConnection(h.host, h.port, timeout=10)
    h.conn.request("GET", "/metrics")
    text = h.conn.getresponse().read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (label is None or label in line):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return total


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.by = {}

    def add(self, key, n=1):
        with self.lock:
            self.by[key] = self.by.get(key, 0) + n

    def get(self, key):
        with self.lock:
            return self.by.get(key, 0)


def measure(args, stop, out, events):
    """Commands one at a time to the aircon while `stop` is not set; done
    when the owner's event stream says so (no polling: polls would spend the
    owner's and the thing's budgets)."""
    hub = Hub(args.hub, args.token)
    path = "/thing-if/apps/%s/targets/thing:%s/commands" % (args.app_id, args.thing)
    lat, lost, refused = [], 0, 0
    while not stop.is_set():
        t0 = time.monotonic()
        s, b = hub.call("POST", path, {"schema": "AirConditioner-Demo", "schemaVersion": 1,
                                       "issuer": "user:" + args.user, "actions": ACTIONS})
        if s != 201:
            refused += 1
            time.sleep(0.1)
            continue
        if events.wait(b["commandID"], 15):
            lat.append((time.monotonic() - t0) * 1000)
        else:
            lost += 1
        time.sleep(args.gap)
    out.update(lat=lat, lost=lost, refused=refused)


def run_http_flood(args, stop, counts, make):
    def client(i):
        hub = Hub(args.hub)
        n = 0
        while not stop.is_set():
            n += 1
            method, path, body, ctype = make(i, n)
            s, _ = hub.call(method, path, body, ctype)
            counts.add(s)
            if s == 0:
                time.sleep(0.01)
    return [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]


def mqtt_connect(port, client_id, username, password):
    def s(x):
        b = x.encode()
        return struct.pack("!H", len(b)) + b

    def remaining(n):
        out = b""
        while True:
            d, n = n % 128, n // 128
            out += bytes([d | (128 if n else 0)])
            if not n:
                return out

    var = s("MQTT") + bytes([4, 0xC2]) + struct.pack("!H", 60)
    payload = s(client_id) + s(username) + s(password)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(bytes([0x10]) + remaining(len(var) + len(payload)) + var + payload)
    ack = sock.recv(4)
    if len(ack) < 4 or ack[3] != 0:
        raise RuntimeError("the broker refused the bootstrap connection: %r" % ack)

    def publish(topic, body):
        v = s(topic) + body
        return bytes([0x30]) + remaining(len(v)) + v

    return sock, publish


def mqtt_read_publishes(sock, on_message):
    """Reads MQTT 3.1.1 packets from `sock` until it closes, calling
    on_message(topic, payload) for each PUBLISH (the subscription is QoS 0,
    so none needs an acknowledgement)."""
    buf = b""

    def need(n):
        nonlocal buf
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError
            buf += chunk

    try:
        while True:
            need(2)
            length, mult, i = 0, 1, 1
            while True:
                need(i + 1)
                b = buf[i]
                length += (b & 127) * mult
                mult *= 128
                i += 1
                if not b & 128:
                    break
            need(i + length)
            kind, body = buf[0], buf[i:i + length]
            buf = buf[i + length:]
            if kind >> 4 == 3:
                n = struct.unpack("!H", body[:2])[0]
                skip = 2 + n + (2 if kind & 6 else 0)
                on_message(body[2:2 + n].decode(), body[skip:])
    except (EOFError, OSError):
        return


def gateway_onboardings(args, stop, app, tag):
    """A gateway of the owner (onboarded by the owner with layoutPosition
    GATEWAY, then by itself over HTTP for its MQTT identity) onboarding end
    nodes over MQTT one at a time while `stop` is not set, on libthingif's
    path and Kii's in turn. Returns the thread and its report."""
    owner = Hub(args.hub, args.token)
    vendor = "GW-%s" % tag
    s, g = owner.call("POST", "/thing-if/apps/%s/onboardings" % app,
                      {"vendorThingID": vendor, "thingPassword": "gw-pw", "owner": "user:" + args.user,
                       "thingType": "LampGateway", "layoutPosition": "GATEWAY"},
                      "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
    if s != 200:
        sys.exit("abuse: cannot onboard the gateway: HTTP %d" % s)
    s, me = Hub(args.hub).call("POST", "/thing-if/apps/%s/onboardings" % app,
                               {"vendorThingID": vendor, "thingPassword": "gw-pw"}, BY_THING)
    if s != 200:
        sys.exit("abuse: the gateway cannot onboard itself: HTTP %d" % s)
    ep = me["mqttEndpoint"]
    topic = ep["mqttTopic"]
    sock, publish = mqtt_connect(args.mqtt_port, topic, ep["username"], ep["password"])
    f = ("p/%s/resp" % topic).encode()
    sub = struct.pack("!H", 1) + struct.pack("!H", len(f)) + f + b"\x00"
    sock.sendall(bytes([0x82, len(sub)]) + sub)
    answers = {}
    cond = threading.Condition()

    def on_message(t, payload):
        head = payload.split(b"\r\n\r\n", 1)[0].decode(errors="replace").split("\r\n")
        rid = next((h.split(":", 1)[1].strip() for h in head[1:] if h.lower().startswith("x-kii-requestid:")), None)
        with cond:
            answers[rid] = head[0].strip()
            cond.notify_all()

    reader = threading.Thread(target=mqtt_read_publishes, args=(sock, on_message), daemon=True)
    reader.start()
    st = {"own": [], "kii": [], "sent": 0, "unanswered": 0, "statuses": Counter()}
    ctype = "application/vnd.kii.OnboardingEndNodeWithGatewayThingID+json"

    def run():
        time.sleep(0.5)  # the SUBACK
        n = 0
        while not stop.is_set():
            n += 1
            which = "own" if n % 2 else "kii"
            path = "things/%s/end-nodes" % g["thingID"] if which == "own" else "onboardings"
            rid = "gw-%d" % n
            body = json.dumps({"gatewayThingID": g["thingID"], "endNodeVendorThingID": "EN-%s-%d" % (tag, n),
                               "endNodePassword": "en-pw"})
            msg = ("POST\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nX-Kii-RequestID: %s\r\n\r\n%s"
                   % (me["accessToken"], ctype, rid, body)).encode()
            t0 = time.monotonic()
            sock.sendall(publish("p/%s/thing-if/apps/%s/%s" % (topic, app, path), msg))
            st["sent"] += 1
            with cond:
                cond.wait_for(lambda: rid in answers, timeout=15)
                got = answers.get(rid)
            if got is None:
                st["unanswered"] += 1
                continue
            st["statuses"].add(got)
            if got == "200":
                st[which].append((time.monotonic() - t0) * 1000)
            stop.wait(0.1)
        sock.close()

    def report():
        both = st["own"] + st["kii"]
        r = {"gw_sent": st["sent"], "gw_unanswered": st["unanswered"],
             "gw_p50_ms": "%.1f" % percentile(both, 50), "gw_p99_ms": "%.1f" % percentile(both, 99),
             "gw_own_p99_ms": "%.1f" % percentile(st["own"], 99), "gw_kii_p99_ms": "%.1f" % percentile(st["kii"], 99)}
        r.update({"gw_%s" % k: v for k, v in sorted(st["statuses"].by.items())})
        return r

    return threading.Thread(target=run, daemon=True), report


def one_address_flood(args, stop):
    """--open half-sent requests from --source, each re-opened as soon as the
    hub closes it (one thread, non-blocking sockets); a probe from 127.0.0.1
    once a second. Returns the threads and the report."""
    u = urllib.parse.urlsplit(args.hub)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.open + 256)), hard))
    head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Half: "
    st = {"opened": 0, "cut": 0, "connect_failed": 0, "open_at_end": 0}
    probes = {"sent": 0, "answered": 0, "ms": []}

    def attacker():
        sel = selectors.DefaultSelector()

        def open_one():
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.bind((args.source, 0))
                rc = c.connect_ex((u.hostname, u.port))
            except OSError:
                rc = -1
            if rc not in (0, errno.EINPROGRESS):
                st["connect_failed"] += 1
                c.close()
                return False
            st["opened"] += 1
            sel.register(c, selectors.EVENT_WRITE, "connecting")
            return True

        n = 0
        while n < args.open and not stop.is_set():
            n += open_one()
        while not stop.is_set():
            missing = args.open - len(sel.get_map())
            for _ in range(missing):
                open_one()
            for key, _ in sel.select(timeout=0.1):
                c = key.fileobj
                if key.data == "connecting":
                    if c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                        st["connect_failed"] += 1
                        sel.unregister(c)
                        c.close()
                        continue
                    try:
                        c.send(head)
                        sel.modify(c, selectors.EVENT_READ, "held")
                    except OSError:
                        st["cut"] += 1
                        sel.unregister(c)
                        c.close()
                    continue
                try:
                    more = c.recv(4096) != b""
                except BlockingIOError:
                    more = True
                except OSError:
                    more = False
                if not more:  # closed by the hub: open another
                    st["cut"] += 1
                    sel.unregister(c)
                    c.close()
        for key in list(sel.get_map().values()):
            c = key.fileobj
            if key.data == "held":
                try:
                    c.recv(1)
                except BlockingIOError:
                    st["open_at_end"] += 1
                except OSError:
                    pass
            c.close()

    def prober():
        while not stop.is_set():
            t0 = time.monotonic()
            probes["sent"] += 1
            c = None
            try:
                # 3 s for the whole probe: connect, then each read.
                c = socket.create_connection((u.hostname, u.port), timeout=3, source_address=("127.0.0.1", 0))
                c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                got = b""
                while b"\r\n\r\n" not in got and time.monotonic() - t0 < 3:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    got += chunk
                if got.startswith(b"HTTP/1.1 200") and time.monotonic() - t0 < 3:
                    probes["answered"] += 1
                    probes["ms"].append((time.monotonic() - t0) * 1000)
            except OSError:
                pass
            finally:
                if c is not None:
                    c.close()
            stop.wait(max(0, 1 - (time.monotonic() - t0)))

    def report():
        ms = probes["ms"]
        r = dict(st)
        r.update(probes=probes["sent"], probes_answered=probes["answered"],
                 probe_p50_ms="%.1f" % percentile(ms, 50), probe_p99_ms="%.1f" % percentile(ms, 99),
                 probe_max_ms="%.1f" % (max(ms) if ms else float("nan")),
                 refused=int(metric_sum(args.hub, "thingif_hub_refused_total", 'defence="address_connections"')))
        return r

    return [threading.Thread(target=attacker, daemon=True), threading.Thread(target=prober, daemon=True)], report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("flood")
    ap.add_argument("--hub", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--thing", required=True)
    ap.add_argument("--app-id", default="demoApp")
    ap.add_argument("--app-key", default="demoKey")
    ap.add_argument("--mqtt-port", type=int, default=1883)
    ap.add_argument("-c", "--clients", type=int, default=16)
    ap.add_argument("-d", "--duration", type=float, default=20)
    ap.add_argument("--gap", type=float, default=0.1,
                    help="seconds between the aircon's commands (one at a time)")
    ap.add_argument("--count", type=int, default=0,
                    help="rollout only: stop when so many things were onboarded (200), not after -d; "
                         "-d is then the most it may take")
    ap.add_argument("--source", default="127.0.0.2",
                    help="slowloris/oneaddress: the attacker's address (Linux routes all of 127/8 to loopback), "
                         "not the owner's 127.0.0.1")
    ap.add_argument("--open", type=int, default=1000,
                    help="oneaddress: half-sent requests the attacker keeps open")
    ap.add_argument("--flood-rate", type=int, default=1000,
                    help="endnodes: token-less end-node onboardings a second, evenly spaced")
    ap.add_argument("--csr", default="",
                    help="onboard/rollout: send this PEM CSR with every onboarding (a hub with a things CA "
                         "then signs a certificate for each new thing and makes no broker record)")
    args = ap.parse_args()
    app = args.app_id
    tag = "%x" % int(time.time() * 1000)
    stop = threading.Event()
    counts = Counter()
    threads = []
    through = ""
    extra = {}

    if args.flood == "oneaddress":
        args.duration = max(args.duration, 30)  # the flood of issue #46: sustained for 30 s
    if args.flood == "idle":
        pass
    elif args.flood == "signup":
        threads = run_http_flood(args, stop, counts, lambda i, n: (
            "POST", "/api/apps/%s/users" % app, {"loginName": "f%s-%d-%d" % (tag, i, n), "password": "flood-pw-1"},
            "application/json"))
    elif args.flood in ("onboard", "rollout"):
        if args.flood == "rollout":
            args.clients = 8
        csr = {}
        if args.csr:
            with open(args.csr) as f:
                csr = {"certificateSigningRequest": f.read()}
        threads = run_http_flood(args, stop, counts, lambda i, n: (
            "POST", "/thing-if/apps/%s/onboardings" % app,
            dict({"vendorThingID": "F-%s-%d-%d" % (tag, i, n), "thingPassword": "flood-pw",
                  "thingType": "AirConditioner"}, **csr),
            BY_THING))
    elif args.flood == "login":
        threads = run_http_flood(args, stop, counts, lambda i, n: (
            "POST", "/api/apps/%s/oauth2/token" % app, {"username": "nobody-%s-%d-%d" % (tag, i, n),
                                                         "password": "guess"}, "application/json"))
    elif args.flood == "mqtt":
        base = metric_sum(args.hub, "thingif_hub_mqtt_requests_total", 'kind="onboarding"')
        dropped0 = metric_sum(args.hub, "thingif_hub_bootstrap_dropped_total")
        sent = [0]

        def mqtt_flood():
            sock, publish = mqtt_connect(args.mqtt_port, "thingif-bootstrap-" + tag, app, args.app_key)
            n = 0
            while not stop.is_set():
                batch = []
                for _ in range(100):
                    n += 1
                    cid = "thingif-bootstrap-%s%08x" % (tag, n)
                    body = ("POST\r\nContent-Type: %s\r\nX-Kii-RequestID: r%d\r\n\r\n" % (BY_THING, n)).encode() + \
                        json.dumps({"vendorThingID": "M-%s-%d" % (tag, n), "thingPassword": "pw"}).encode()
                    batch.append(publish("p/%s/thing-if/apps/%s/onboardings" % (cid, app), body))
                sock.sendall(b"".join(batch))
                sent[0] = n
            sock.close()

        threads = [threading.Thread(target=mqtt_flood, daemon=True)]
        extra["finish"] = lambda: {
            "sent": sent[0],
            "answered": int(metric_sum(args.hub, "thingif_hub_mqtt_requests_total", 'kind="onboarding"') - base),
            "dropped": int(metric_sum(args.hub, "thingif_hub_bootstrap_dropped_total") - dropped0)}
    elif args.flood in ("gateway", "endnodes"):
        gw_thread, gw_report = gateway_onboardings(args, stop, app, tag)
        threads = [gw_thread]
        refused0 = metric_sum(args.hub, "thingif_hub_refused_total", "end_node_onboarding")
        sent = [0]

        def end_node_flood():
            sock, publish = mqtt_connect(args.mqtt_port, "thingif-bootstrap-e" + tag, app, args.app_key)
            body = json.dumps({"gatewayThingID": "th.nope", "endNodeVendorThingID": "X", "endNodePassword": "x"})
            head = "POST\r\nContent-Type: application/vnd.kii.OnboardingEndNodeWithGatewayThingID+json\r\n"
            n, t0, batch = 0, time.monotonic(), max(1, args.flood_rate // 100)
            while not stop.is_set():
                out = []
                for _ in range(batch):
                    n += 1
                    cid = "thingif-bootstrap-%s%08x" % (tag, n)
                    msg = (head + "X-Kii-RequestID: f%d\r\n\r\n%s" % (n, body)).encode()
                    out.append(publish("p/%s/thing-if/apps/%s/onboardings" % (cid, app), msg))
                sock.sendall(b"".join(out))
                sent[0] = n
                # evenly spaced: the next batch at n / rate
                time.sleep(max(0, t0 + n / float(args.flood_rate) - time.monotonic()))
            sock.close()

        if args.flood == "endnodes":
            threads.append(threading.Thread(target=end_node_flood, daemon=True))
        extra["finish"] = lambda: dict(gw_report(), flood_sent=sent[0], flood_refused=int(
            metric_sum(args.hub, "thingif_hub_refused_total", "end_node_onboarding") - refused0))
    elif args.flood == "installations":
        s, u = Hub(args.hub).call("POST", "/api/apps/%s/users" % app, {})
        if s != 201:
            sys.exit("abuse: cannot make the pseudo user: HTTP %d" % s)

        def installer():
            hub = Hub(args.hub, u["accessToken"])
            next_t = time.monotonic()
            while not stop.is_set():
                st, _ = hub.call("POST", "/api/apps/%s/installations" % app, {"deviceType": "MQTT"})
                counts.add(st)
                next_t += 1 / 15.0
                time.sleep(max(0, next_t - time.monotonic()))

        threads = [threading.Thread(target=installer, daemon=True)]
    elif args.flood == "slowloris":
        u = urllib.parse.urlsplit(args.hub)
        socks = []

        def opener():
            for i in range(4000):
                if stop.is_set():
                    break
                try:
                    c = socket.create_connection((u.hostname, u.port), timeout=5, source_address=(args.source, 0))
                    c.sendall(b"POST /api/apps/%s/users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              % app.encode())
                    socks.append(c)
                except OSError:
                    counts.add("connect_failed")

        threads = [threading.Thread(target=opener, daemon=True)]

        def still_open():
            n = 0
            for c in socks:
                c.setblocking(False)
                try:
                    n += 1 if c.recv(1) != b"" else 0
                except BlockingIOError:
                    n += 1
                except OSError:
                    pass
                c.close()
            return {"opened": len(socks), "open_at_end": n}

        extra["finish"] = still_open
    elif args.flood == "oneaddress":
        threads, extra["finish"] = one_address_flood(args, stop)
    elif args.flood == "nonowner":
        owner = Hub(args.hub, args.token)
        thing_path = "/thing-if/apps/%s/targets/thing:%s/commands" % (app, args.thing)
        tokens = []
        for _ in range(8):
            s, u = Hub(args.hub).call("POST", "/api/apps/%s/users" % app, {})
            if s == 201:
                tokens.append(u["accessToken"])

        def reader(tok):
            hub = Hub(args.hub, tok)
            while not stop.is_set():
                st, _ = hub.call("GET", thing_path)
                counts.add(st)

        def owner_reads():
            while not stop.is_set():
                st, _ = owner.call("GET", thing_path)
                counts.add("owner_%d" % st)
                time.sleep(0.3)

        threads = [threading.Thread(target=reader, args=(t,), daemon=True) for t in tokens]
        threads.append(threading.Thread(target=owner_reads, daemon=True))
    else:
        sys.exit("abuse: unknown flood %s" % args.flood)

    out = {}
    hubs_driver.APP = app
    events = hubs_driver.Events(args.hub, args.token)
    events.start()
    if not events.ready.wait(10):
        sys.exit("abuse: the owner's event stream did not open")
    m = threading.Thread(target=measure, args=(args, stop, out, events))
    for t in threads:
        t.start()
    m.start()
    t_start = time.monotonic()
    if args.count and args.flood == "rollout":
        while counts.get(200) < args.count and time.monotonic() - t_start < args.duration:
            time.sleep(0.05)
    else:
        time.sleep(args.duration)
    stop.set()
    extra.setdefault("seconds", time.monotonic() - t_start)
    m.join()
    for t in threads:
        t.join(timeout=35)
    if "finish" in extra:
        through = " ".join("%s=%s" % kv for kv in extra["finish"]().items())
    if args.count:
        through = ("seconds=%.1f " % extra["seconds"] + through).strip()
    fields = {k: v for k, v in counts.by.items()}
    through = (through + " " + " ".join("http_%s=%d" % (k, v) for k, v in sorted(fields.items(), key=str))).strip()
    lat = out.get("lat", [])
    print("flood=%s commands=%d lost=%d cmd_refused=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f %s" % (
        args.flood, len(lat), out.get("lost", 0), out.get("refused", 0), percentile(lat, 50), percentile(lat, 99),
        max(lat) if lat else float("nan"), through))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
