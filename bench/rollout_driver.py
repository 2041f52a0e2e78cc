#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""bench/rollout_driver.py - the operator of bench/rollout (standard library
only, with the thingif CLI for the releases).

  rollout_driver.py --hub URL --hub-pid PID --port BROKER_PORT --cli PATH --fleet PATH
                    --tmp DIR --devices N --rate R --cap M [--bad-every K] [--seed S]

N things (owner onboarding, hubs_driver.py setup) run in processes of 150,
bench/update_fleet (a libthingif handle each). A release key and trust file
(openssl), then two releases made and signed with the CLI, each a rollout of
every thing of the type at R a minute and at most M in flight, aborting at
5 % ROLLED_BACK once 50 are final:
- healthy (2.0.0): every member must end SUCCEEDED, no 60 s window may hold
  more than R releases and no moment more than M in flight, read from the
  hub's own timestamps (each member's releasedAt, its job's updatedAt);
- bad (3.0.0; every K-th device's self-test fails it, so it rolls back): the
  rollout must abort, no member be released after the abort, and the
  members ever released stay within 50 + M + one tick's release.
Prints one line of key=value figures per rollout and exits non-zero when a
check fails."""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubs_driver  # noqa: E402

ADMIN = "bench-rollout-admin"
MIN_EXECUTED = 50
FAILURE_PERCENT = 5
PER_PROCESS = 150


def get(url):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + ADMIN})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read().decode())


def cpu_ns(pid):
    s = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                s += int(f.read().split()[0])
        except OSError:
            pass
    return s


def most_in_window(times, window):
    """The most of `times` (sorted) inside any window of `window` ms."""
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] >= window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def most_at_once(spans):
    """The most [start, end) spans open at one moment."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    best = now = 0
    for _, d in events:
        now += d
        best = max(best, now)
    return best


def main():
    p = argparse.ArgumentParser()
    for a in ("--hub", "--hub-pid", "--port", "--cli", "--fleet", "--tmp", "--devices", "--rate", "--cap"):
        p.add_argument(a, required=True)
    p.add_argument("--bad-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    tmp, n, rate, cap = a.tmp, int(a.devices), int(a.rate), int(a.cap)
    rnd = random.Random(a.seed)
    hub_pid = int(a.hub_pid)
    base = "%s/api/apps/%s" % (a.hub, hubs_driver.APP)

    t0 = time.monotonic()
    setup = json.loads(subprocess.run(
        [sys.executable, os.path.join(os.path.dirname(__file__), "hubs_driver.py"), "setup", a.hub]
        + ["UPD-%05d" % i for i in range(n)], check=True, capture_output=True, text=True).stdout)
    with open(os.path.join(tmp, "things.txt"), "w") as f:
        for t in setup["things"]:
            f.write("%s %s\n" % (t["thingID"], t["accessToken"]))
    onboard_s = time.monotonic() - t0

    key, trust = hubs_driver.release_key(tmp)
    cli = hubs_driver.operator_cli(a.cli, a.hub, ADMIN, tmp, "rollout_driver")

    def release(version):
        image = os.path.join(tmp, "fw-%s.img" % version)
        with open(image, "wb") as f:
            f.write(rnd.randbytes(256 << 10))
        manifest = os.path.join(tmp, "fw-%s.json" % version)
        cli("update", "manifest", image, "--version", version, "--thing-type", "AirConditioner", "--block-size",
            "32768", "--out", manifest)
        cli("update", "sign", manifest, "--key", key, "--kid", "fw-bench")
        return image, manifest

    # libmosquitto's loop waits in select(), whose descriptors end at 1,024,
    # and a handle holds five (its socket, libmosquitto's socket pair, the
    # outbox and the update journal): PER_PROCESS devices a process.
    lines = open(os.path.join(tmp, "things.txt")).read().splitlines(True)
    fleets = []
    t1 = time.monotonic()
    for k in range(0, n, PER_PROCESS):
        part = os.path.join(tmp, "things-%d.txt" % k)
        with open(part, "w") as f:
            f.writelines(lines[k:k + PER_PROCESS])
        log = os.path.join(tmp, "fleet-%d.log" % k)
        fleets.append((log, subprocess.Popen(
            [a.fleet, "--port", a.port, "--things", part, "--storage", os.path.join(tmp, "fleet-%d" % k),
             "--trust", trust, "--bad-version", "3.0.0", "--bad-every", str(a.bad_every), "--first", str(k)],
            stdout=open(log, "w"), stderr=subprocess.STDOUT)))
    failed = []
    try:
        deadline = time.monotonic() + 300
        for log, fleet in fleets:
            while "fleet: ready" not in open(log).read():
                if fleet.poll() is not None or time.monotonic() > deadline:
                    sys.exit("rollout_driver: a fleet did not connect:\n" + open(log).read()[-2000:])
                time.sleep(0.1)
        boot_s = time.monotonic() - t1
        print("devices=%d onboard_s=%.1f boot_s=%.1f" % (n, onboard_s, boot_s))
        sys.stdout.flush()

        for name, version in (("healthy", "2.0.0"), ("bad", "3.0.0")):
            image, manifest = release(version)
            cpu0 = cpu_ns(hub_pid)
            s0 = time.monotonic()
            rid = cli("update", "rollout", "create", "--image", image, "--manifest", manifest, "--thing-type",
                      "AirConditioner", "--rate", str(rate), "--max-in-flight", str(cap), "--trial", "60",
                      "--timeout", "300", "--abort-percent", str(FAILURE_PERCENT), "--abort-min-executed",
                      str(MIN_EXECUTED), "--abort-status", "ROLLED_BACK").strip().splitlines()[-1]
            deadline = time.monotonic() + 900
            members = []
            while True:
                r = get("%s/rollouts/%s" % (base, rid))
                if r["status"] not in ("running", "paused") or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            # Every offered member's job ends within its time-out; wait for the jobs to settle.
            while time.monotonic() < deadline:
                members = get("%s/rollouts/%s/things" % (base, rid))["things"]
                if not any(m["state"] == "offered" for m in members):
                    break
                time.sleep(0.5)
            seconds = time.monotonic() - s0
            cpu = cpu_ns(hub_pid) - cpu0
            states = {}
            for m in members:
                states[m["state"]] = states.get(m["state"], 0) + 1
            released = sorted(m["releasedAt"] for m in members if m.get("releasedAt") is not None)
            spans = []
            for m in members:
                if m.get("releasedAt") is None or not m.get("jobID"):
                    continue
                j = get("%s/things/%s/updates/%s" % (base, m["thingID"], m["jobID"]))
                spans.append((m["releasedAt"], j["updatedAt"]))
            window = most_in_window(released, 60_000)
            at_once = most_at_once(spans)
            line = ("rollout=%s status=%s seconds=%.1f released=%d states=%s most_per_60s=%d rate=%d "
                    "most_in_flight=%d cap=%d hub_cpu_us_per_device=%.0f"
                    % (name, r["status"], seconds, len(released), json.dumps(states, separators=(",", ":")),
                       window, rate, at_once, cap, cpu / 1000 / max(1, len(released))))
            if name == "bad":
                aborted_at = r["updatedAt"]
                late = sum(1 for t in released if t > aborted_at)
                bound = MIN_EXECUTED + cap + (rate + 59) // 60
                line += " released_after_abort=%d notified_bound=%d" % (late, bound)
                if r["status"] != "aborted":
                    failed.append("the bad rollout did not abort (%s)" % r["status"])
                if late > 0:
                    failed.append("%d members released after the abort" % late)
                if len(released) > bound:
                    failed.append("%d members notified, over %d" % (len(released), bound))
            else:
                if r["status"] != "completed" or states.get("SUCCEEDED", 0) != n:
                    failed.append("healthy: %s, %s" % (r["status"], states))
            if window > rate:
                failed.append("%s: %d released in 60 s, over the rate %d" % (name, window, rate))
            if at_once > cap:
                failed.append("%s: %d in flight, over the cap %d" % (name, at_once, cap))
            print(line)
            sys.stdout.flush()
    finally:
        for _, fleet in fleets:
            fleet.send_signal(signal.SIGTERM)
        for _, fleet in fleets:
            try:
                fleet.wait(60)
            except subprocess.TimeoutExpired:
                fleet.kill()
    for f in failed:
        print("rollout_driver: " + f, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
