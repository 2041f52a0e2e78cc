# SPDX-License-Identifier: Apache-2.0

"""Fixtures: a real mosquitto and a real thingif-hub on 127.0.0.1, stopped by PID.

THINGIF_LIBRARY must name libthingif.so (python/run-tests.sh sets it);
THINGIF_HUB names thingif-hub (default: build-py/thingif-hub in the repo).
"""

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent

try:
    import thingif  # noqa: F401  (the installed package)
except ImportError:  # running from the source tree
    sys.path.insert(0, str(PYTHON_DIR))
    import thingif  # noqa: F401


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc, grace=10):
    """SIGTERM, then SIGKILL after `grace` seconds; always reaps. By PID only."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=grace)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


class LineLog:
    """Collects a child's output lines on a thread; tests wait for patterns."""

    def __init__(self, stream, path):
        self.lines = []
        self._cond = threading.Condition()
        self._path = path
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        with open(self._path, "w", encoding="utf-8") as log:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                log.write(line + "\n")
                log.flush()
                with self._cond:
                    self.lines.append(line)
                    self._cond.notify_all()

    def wait_for(self, pattern, timeout=20.0, start=0, accept=None):
        """The first match of regex `pattern` in lines[start:] for which
        accept(match) is true, waiting up to timeout seconds."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines[start:]:
                    m = rx.search(line)
                    if m and (accept is None or accept(m)):
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no line matching %r within %.0f s; got:\n%s"
                                         % (pattern, timeout, "\n".join(self.lines[-40:])))
                self._cond.wait(left)

    def mark(self):
        with self._cond:
            return len(self.lines)


ADMIN_USER = "thingif-hub"


class Broker:
    """A broker secured as in production (deploy/make-broker-config.sh): no
    anonymous clients; the hub, as ADMIN_USER, makes every other identity."""

    def __init__(self, port, tls_port, proc, log_path, admin_password, cafile):
        self.host = "127.0.0.1"
        self.port = port
        self.tls_port = tls_port
        self.proc = proc
        self.log_path = log_path
        self.admin_user = ADMIN_USER
        self.admin_password = admin_password
        self.cafile = cafile


@pytest.fixture
def broker(tmp_path):
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.access(exe, os.X_OK):
        pytest.fail("mosquitto not found (apt install mosquitto)")
    port = free_port()
    tls_port = free_port()
    while tls_port == port:
        tls_port = free_port()
    admin_password = secrets.token_hex(16)
    subprocess.run(["bash", str(REPO / "deploy" / "make-broker-config.sh"), str(tmp_path / "broker"),
                    "--port", str(port), "--tls-port", str(tls_port), "--admin-user", ADMIN_USER,
                    "--admin-password", admin_password], check=True, timeout=60, stdin=subprocess.DEVNULL)
    conf = tmp_path / "broker" / "mosquitto.conf"
    log_path = tmp_path / "mosquitto.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([exe, "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("mosquitto did not start:\n" + log_path.read_text())
                time.sleep(0.05)
        yield Broker(port, tls_port, proc, log_path, admin_password, str(tmp_path / "broker" / "pki" / "ca.crt"))
    finally:
        stop_process(proc)


def hub_path():
    path = Path(os.environ.get("THINGIF_HUB") or REPO / "build-py" / "thingif-hub")
    if not os.access(path, os.X_OK):
        pytest.fail("thingif-hub not found at %s: build it (cmake --build build-py) or set THINGIF_HUB" % path)
    return str(path)


class Hub:
    """A running `thingif-hub` and its stdout lines; `sent` reads what things
    send (mosquitto_sub as the hub's broker identity)."""

    def __init__(self, proc, out, sent):
        self.proc = proc
        self.out = out
        self.sent = sent

    def wait_results(self, command_id, timeout=20.0):
        """The actionResults the thing reported for a command, as a list. Read
        from the broker, not the hub: the hub stores results only for commands
        it issued, and these tests publish commands of their own."""
        m = self.sent.wait_for(r"^p/\S+/thing-if/apps/\S+/targets/\S+/commands/%s/action-results ([0-9a-f]+)$"
                               % re.escape(command_id), timeout)
        body = bytes.fromhex(m.group(1)).split(b"\r\n\r\n", 1)[1]
        return json.loads(body)["actionResults"]

    def wait_state(self, thing_id, start=0, timeout=20.0, predicate=None):
        """The first stored state of a thing after line `start` that satisfies predicate."""
        m = self.out.wait_for(r"^hub: state of %s: (.*)$" % re.escape(thing_id), timeout, start,
                              accept=lambda m: predicate is None or predicate(json.loads(m.group(1))))
        return json.loads(m.group(1))


@pytest.fixture
def hub(broker, tmp_path):
    env = dict(os.environ, THINGIF_HUB_BROKER_PASSWORD=broker.admin_password)
    proc = subprocess.Popen([hub_path(), "--port", str(broker.tls_port), "--broker-cafile", broker.cafile,
                             "--broker-username", broker.admin_user, "--advertised-port", str(broker.port),
                             "--advertised-tls-port", str(broker.tls_port),
                             "--http-port", "0", "--memory"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    # stdbuf: mosquitto_sub's output is block-buffered on a pipe.
    sub = subprocess.Popen(["stdbuf", "-oL", shutil.which("mosquitto_sub") or "mosquitto_sub", "-V", "mqttv5", "-d", "-q", "1",
                            "-h", broker.host, "-p", str(broker.port), "-u", broker.admin_user,
                            "-P", broker.admin_password, "-t", "p/+/thing-if/apps/#", "-F", "%t %x"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        out = LineLog(proc.stdout, tmp_path / "hub.log")
        sent = LineLog(sub.stdout, tmp_path / "sent.log")
        out.wait_for(r"serving app", timeout=15)
        sent.wait_for(r"received SUBACK", timeout=15)
        yield Hub(proc, out, sent)
    finally:
        stop_process(sub)
        stop_process(proc)


@pytest.fixture
def make_thing(broker, tmp_path):
    """make_thing(name="t") -> a Thing on the broker with its own storage; closed afterwards."""
    things = []

    def make(name="thing", **kwargs):
        t = thingif.Thing("demoApp", "demoKey", str(tmp_path / name), **kwargs)
        t.set_broker(broker.host, broker.port)
        t.set_option(thingif.Option.REQUEST_TIMEOUT_MS, 10000)
        things.append(t)
        return t

    yield make
    for t in things:
        t.close()


def rest(base, method, path, body=None, token=None, content_type="application/json"):
    """A call to the hub's REST API: (HTTP status, JSON body or None); an
    error status is returned, not raised."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    return status, (json.loads(text) if text else None)


def identity(storage_dir):
    """The onboarding result the library stored (identity.json)."""
    return json.loads((Path(storage_dir) / "identity.json").read_text())


def find_key(obj, key):
    """The first value of `key` anywhere in a nested JSON value."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for v in obj:
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def publish_command(broker, topic, command, timeout=15):
    """Sends a command JSON to a thing the way the framework does (MQTT 5, QoS 1)."""
    exe = shutil.which("mosquitto_pub")
    if exe is None:
        pytest.fail("mosquitto_pub not found (apt install mosquitto-clients)")
    subprocess.run([exe, "-V", "mqttv5", "-q", "1", "-h", broker.host, "-p", str(broker.port),
                    "-u", broker.admin_user, "-P", broker.admin_password,
                    "-t", topic, "-m", json.dumps(command)], check=True, timeout=timeout,
                   stdin=subprocess.DEVNULL)


def pytest_report_header(config):
    return "thingif %s from %s; libthingif %s" % (thingif.__version__, Path(thingif.__file__).parent,
                                                  thingif.library_path)
