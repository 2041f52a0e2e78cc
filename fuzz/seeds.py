#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Regenerates the seed corpora of fuzz/corpus/<target>/ from the payloads
the tests send: every single-line raw string literal (#"..."#) of the
test files under Tests/ThingIFTests (not Support/) that a target's filter
accepts, written as one
file per payload (named by its SHA-1, as libFuzzer names its own), plus the
hand-written seeds in fuzz/seeds/<target>/ if any. Literals that
interpolate (\\#(...)) keep the interpolation text: still a useful seed.

usage: fuzz/seeds.py
"""
import glob, hashlib, os, re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RAW = re.compile(r'#"(.*?)"#')

FILTERS = {
    "command_decode": lambda s: '"commandID"' in s or '"actions"' in s,
    "automation_codec": lambda s: any(k in s for k in ('"actionSets"', '"timerTriggers"', '"recurrence"', '"fireDate"')),
    "action_results": lambda s: '"actionResults"' in s or '"succeeded"' in s,
    "state_merge": lambda s: s.startswith("{") and '"commandID"' not in s and '"actionResults"' not in s,
    "kii_reply": lambda s: '"thingID"' in s or '"mqttEndpoint"' in s or '"installationID"' in s,
    "trigger_form": lambda s: '"predicate"' in s,
    "command_form": lambda s: '"actions"' in s and ('"issuer"' in s or '"schema"' in s),
    "state_query": lambda s: '"query"' in s and '"clause"' in s,
    "onboarding_form": lambda s: '"thingPassword"' in s and '"owner"' in s,
    "end_node_onboarding_form": lambda s: '"endNodeVendorThingID"' in s or '"endNodePassword"' in s,
    "end_node_event": lambda s: '"event"' in s or '"results"' in s or "/end-nodes/" in s,
    "trigger_rules": lambda s: '"clause"' in s or '"type":"eq"' in s or '"type":"range"' in s or '"type":"and"' in s,
}

def literals():
    tests = os.path.join(ROOT, "Tests/ThingIFTests")
    paths = glob.glob(os.path.join(tests, "**/*.swift"), recursive=True)
    for path in sorted(p for p in paths if not os.path.relpath(p, tests).startswith("Support/")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                for m in RAW.finditer(line):
                    s = m.group(1)
                    # Swift raw-string escapes that matter here.
                    s = s.replace('\\#n', '\n').replace('\\#r', '\r').replace('\\#t', '\t')
                    if len(s) >= 2:
                        yield s

def write(target, payload):
    d = os.path.join(ROOT, "fuzz/corpus", target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(payload).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(payload)

def main():
    lits = list(dict.fromkeys(literals()))
    for target, accept in FILTERS.items():
        picked = [s.encode("utf-8") for s in lits if accept(s)]
        if target == "state_merge":
            # A method byte (odd: PATCH, even: PUT), the old state, NUL, the upload.
            picked = [bytes([i & 1]) + a + b"\0" + b for i, (a, b) in enumerate(zip(picked, picked[1:]))][:80]
        if target == "onboarding_form":
            # A media-type byte (odd: OnboardingWithThingIDByOwner), the body.
            picked = [bytes([i & 1]) + p for i, p in enumerate(picked)]
        if target == "end_node_onboarding_form":
            # A media-type byte (odd: OnboardingEndNodeWithGatewayVendorThingID), the body.
            picked = [bytes([1 if '"gatewayVendorThingID"' in p.decode("utf-8") else 0]) + p for p in picked]
        for p in picked:
            write(target, p)
    for d in glob.glob(os.path.join(ROOT, "fuzz/seeds/*")):
        target = os.path.basename(d)
        for p in glob.glob(os.path.join(d, "*")):
            with open(p, "rb") as f:
                write(target, f.read())
    for d in sorted(glob.glob(os.path.join(ROOT, "fuzz/corpus/*"))):
        print(f"{os.path.basename(d)}: {len(os.listdir(d))} seeds")

main()
