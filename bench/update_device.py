#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""bench/update_device.py - the device of bench/update: libthingif through
its Python binding (python/thingif; THINGIF_LIBRARY names the library), with
an installer in sink mode whose flash loses what a power cut loses.

  update_device.py --port P --thing-id ID --token T --storage DIR --slot FILE --trust FILE

The sink keeps written blocks in memory until flush() writes them into
the slot file and calls fdatasync: a SIGKILL (the bench's power cut) loses
what was written since the last flush, as a real power cut loses the
unsynced writes. Each write appends a line to SLOT.writes (the blocks the
device was given, in all its lives). install() prints the slot's SHA-256
over the image's size and reports the install done; reboot() prints and
exits: the bench ends there."""

import argparse
import hashlib
import os
import sys
import time

import thingif


class Sink:
    def __init__(self, slot):
        self.fd = os.open(slot, os.O_RDWR | os.O_CREAT, 0o600)
        self.dirty = {}
        self.writes = open(slot + ".writes", "a", buffering=1)

    def offer(self, thing, info):
        return thingif.UpdateDecision.ACCEPT

    def write(self, thing, offset, data):
        self.dirty[offset] = bytes(data)
        self.writes.write("%d\n" % offset)
        return True

    def flush(self, thing):
        for offset, data in self.dirty.items():
            os.pwrite(self.fd, data, offset)
        os.fdatasync(self.fd)
        self.dirty.clear()
        return True

    def install(self, thing, info):
        h = hashlib.sha256()
        left, at = info.size, 0
        while left > 0:
            b = os.pread(self.fd, min(left, 1 << 20), at)
            if not b:
                break
            h.update(b)
            at += len(b)
            left -= len(b)
        print("update_device: INSTALL sha256=%s expected=%s" % (h.hexdigest(), info.sha256), flush=True)
        thing.update_installed(True)
        return True

    def reboot(self, thing):
        print("update_device: REBOOT", flush=True)
        os._exit(3)

    def commit(self, thing):
        return True

    def rollback(self, thing):
        pass


def main():
    p = argparse.ArgumentParser()
    for a in ("--port", "--thing-id", "--token", "--storage", "--slot", "--trust"):
        p.add_argument(a, required=True)
    p.add_argument("--app-id", default="demoApp")
    p.add_argument("--app-key", default="demoKey")
    a = p.parse_args()
    t = thingif.Thing(app_id=a.app_id, app_key=a.app_key, storage_dir=a.storage)
    t.set_broker("127.0.0.1", int(a.port))
    t.use_onboarded(a.thing_id, a.token)
    t.set_installer(Sink(a.slot), "AirConditioner", "1.0.0", a.trust)
    t.loop_start()
    print("update_device: started", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
