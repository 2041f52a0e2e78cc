#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""bench/update_driver.py - the operator and the power of bench/update
(standard library only, with the thingif CLI for the release).

  update_driver.py --hub URL --hub-pid PID --port BROKER_PORT --cli PATH --aircon PATH
                   --tmp DIR --size MIB --cuts N [--seed S]

A user and two things (owner onboarding, hubs_driver.py setup): UPD-0001,
bench/update_device.py, takes the update; AC-0001 (aircon) takes commands
all the while, one at a time from this driver. A release key (openssl),
the device's trust file, a random image of MIB MiB in 32 KiB blocks, and
with the CLI its manifest, signature and job. Then the device starts, and
each time the job's reported bytes pass the next of N random points of the
image, and it made progress since its last start, after a random pause of
up to 50 ms, it is killed (SIGKILL: its
unflushed blocks are lost) and started again. At INSTALLING the device has
checked the slot's SHA-256. Prints one line of key=value figures and exits
non-zero when the image is not intact or more was fetched than the bound:
the image + the hash pages + N x (one checkpoint + the window) blocks."""

import argparse
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubs_driver  # noqa: E402

BLOCK = 32768
CHECKPOINT = 16
WINDOW = 4
ADMIN = "bench-update-admin"


def get(url, token=None):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


def metric(text, name, labels=""):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and labels in line and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def cpu_ns(pid):
    s = 0
    for t in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
            s += int(f.read().split()[0])
    return s


class Commands(threading.Thread):
    """One command at a time to the aircon while the download runs."""

    def __init__(self, hub, token, user, thing):
        super().__init__(daemon=True)
        self.conn = hubs_driver.Hub(hub, token)
        self.target = "/thing-if/apps/%s/targets/thing:%s/commands" % (hubs_driver.APP, thing)
        self.user = user
        self.lat = []
        self.errors = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                c = self.conn.call("POST", self.target, {"schema": "AirConditioner-Demo", "schemaVersion": 1,
                                                         "actions": [{"turnPower": {"power": True}}],
                                                         "issuer": "user:" + self.user})
                while True:
                    got = self.conn.call("GET", self.target + "/" + c["commandID"])
                    if got.get("commandState") in ("DONE", "INCOMPLETE"):
                        break
                    if time.monotonic() - t0 > 30:
                        raise RuntimeError("no results in 30 s")
                    time.sleep(0.002)
                self.lat.append((t0, time.monotonic() - t0))
            except Exception as e:  # counted, the run goes on
                self.errors += 1
                print("update_driver: command: %s" % e, file=sys.stderr)


def main():
    p = argparse.ArgumentParser()
    for a in ("--hub", "--hub-pid", "--port", "--cli", "--aircon", "--tmp", "--size", "--cuts"):
        p.add_argument(a, required=True)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    tmp, rnd = a.tmp, random.Random(a.seed)
    size = int(a.size) << 20
    cuts = int(a.cuts)
    hub_pid = int(a.hub_pid)

    setup = json.loads(subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "hubs_driver.py"),
                                       "setup", a.hub, "UPD-0001", "AC-0001"], check=True,
                                      capture_output=True, text=True).stdout)
    dev, ac = setup["things"]

    # The release key, the trust file, the image, and the CLI's release.
    key, trust = hubs_driver.release_key(tmp)
    image = os.path.join(tmp, "fw.img")
    data = rnd.randbytes(size)
    with open(image, "wb") as f:
        f.write(data)
    want = hashlib.sha256(data).hexdigest()
    cli = hubs_driver.operator_cli(a.cli, a.hub, ADMIN, tmp, "update_driver")

    manifest = os.path.join(tmp, "fw.json")
    cli("update", "manifest", image, "--version", "1.2.0", "--thing-type", "AirConditioner", "--block-size",
        str(BLOCK), "--out", manifest)
    cli("update", "sign", manifest, "--key", key, "--kid", "fw-bench")

    # The aircon that takes commands throughout.
    aircon = subprocess.Popen([a.aircon, "--host", "127.0.0.1", "--port", a.port, "--storage",
                               os.path.join(tmp, "aircon"), "--thing-id", ac["thingID"], "--token",
                               ac["accessToken"]], stdout=open(os.path.join(tmp, "aircon.log"), "w"),
                              stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while "aircon: connected" not in open(os.path.join(tmp, "aircon.log")).read():
            if time.monotonic() > deadline or aircon.poll() is not None:
                sys.exit("update_driver: the aircon did not connect")
            time.sleep(0.05)
        return run(a, tmp, rnd, size, cuts, hub_pid, setup, dev, ac, trust, image, manifest, want, cli)
    finally:
        aircon.kill()
        aircon.wait()


def run(a, tmp, rnd, size, cuts, hub_pid, setup, dev, ac, trust, image, manifest, want, cli):
    slot = os.path.join(tmp, "slot")
    log = open(os.path.join(tmp, "device.log"), "a")
    device_env = dict(os.environ)

    def start_device():
        return subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "update_device.py"),
                                 "--port", a.port, "--thing-id", dev["thingID"], "--token", dev["accessToken"],
                                 "--storage", os.path.join(tmp, "device"), "--slot", slot, "--trust", trust],
                                stdout=log, stderr=subprocess.STDOUT, env=device_env)

    job_url = "%s/api/apps/%s/things/%s/updates/" % (a.hub, hubs_driver.APP, dev["thingID"])
    before = get(a.hub + "/metrics")
    device = start_device()
    # The upload (the image streamed into the store) comes first, with
    # the commands already running: their round trips are printed for the
    # upload and for the download apart.
    commands = Commands(a.hub, setup["token"], setup["userID"], ac["thingID"])
    commands.start()
    u0 = time.monotonic()
    out = cli("update", "start", dev["thingID"], "--image", image, "--manifest", manifest)
    job = out.strip().splitlines()[-1]
    upload_s = time.monotonic() - u0
    cpu0 = cpu_ns(hub_pid)
    t0 = time.monotonic()
    points = sorted(rnd.uniform(0.02, 0.98) * size for _ in range(cuts))
    done_cuts = 0
    held_at_start = -1
    status = None
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        j = json.loads(get(job_url + job, ADMIN))
        status = j.get("status")
        if status in ("INSTALLING", "REBOOTING") or (status and status not in ("ACCEPTED", "DOWNLOADING",
                                                                                 "VERIFIED", "DELAYED")):
            break
        held = j.get("bytes") or 0
        # A cut once the job passed the next point and the device made
        # progress since its last start (points passed during a restart
        # are cut one a life, not at the start).
        if done_cuts < cuts and held >= points[done_cuts] and held > held_at_start:
            time.sleep(rnd.uniform(0, 0.05))
            device.send_signal(signal.SIGKILL)
            device.wait()
            done_cuts += 1
            held_at_start = held
            device = start_device()
        time.sleep(0.02)
    seconds = time.monotonic() - t0
    hub_cpu = cpu_ns(hub_pid) - cpu0
    commands.stop.set()
    commands.join(35)
    installed = None
    deadline = time.monotonic() + 30
    while installed is None and time.monotonic() < deadline:
        m = re.search(r"INSTALL sha256=([0-9a-f]+)", open(os.path.join(tmp, "device.log")).read())
        installed = m.group(1) if m else None
        time.sleep(0.05)
    device.kill()
    device.wait()
    after = get(a.hub + "/metrics")

    served = metric(after, "thingif_hub_update_bytes_served_total") - metric(
        before, "thingif_hub_update_bytes_served_total")
    blocks_served = metric(after, "thingif_hub_mqtt_requests_total", 'kind="update-block",status="200"') - metric(
        before, "thingif_hub_mqtt_requests_total", 'kind="update-block",status="200"')
    blocks = (size + BLOCK - 1) // BLOCK
    hashes = blocks * 32
    bound = size + hashes * (1 + done_cuts) + done_cuts * (CHECKPOINT + WINDOW) * BLOCK
    written = sum(1 for _ in open(slot + ".writes"))
    lat = sorted(d for s, d in commands.lat if s >= t0)
    up = sorted(d for s, d in commands.lat if s < t0)

    def pct(q, lat=lat):
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else 0.0

    intact = installed == want
    print("image_mib=%d blocks=%d cuts=%d status=%s intact=%s seconds=%.1f mib_per_s=%.1f served_mib=%.2f "
          "bound_mib=%.2f extra_blocks=%.0f blocks_written=%d hub_cpu_us_per_block=%.0f commands=%d "
          "command_errors=%d command_p50_ms=%.1f command_p99_ms=%.1f command_max_ms=%.1f upload_s=%.1f "
          "upload_commands=%d upload_command_p50_ms=%.1f upload_command_p99_ms=%.1f upload_command_max_ms=%.1f"
          % (size >> 20, blocks, done_cuts, status, intact, seconds, (size / seconds) / (1 << 20) if seconds else 0,
             served / (1 << 20), bound / (1 << 20), blocks_served - blocks, written,
             hub_cpu / 1000 / blocks_served if blocks_served else 0, len(lat), commands.errors, pct(0.5), pct(0.99),
             pct(1.0), upload_s, len(up), pct(0.5, up), pct(0.99, up), pct(1.0, up)))
    if not intact:
        print("update_driver: the installed image is not the image (%s, want %s)" % (installed, want),
              file=sys.stderr)
        return 1
    if served > bound:
        print("update_driver: fetched %d bytes, over the bound %d" % (served, bound), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
