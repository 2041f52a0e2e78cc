#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# The demo: a mosquitto broker, thingif-hub (the framework side), the thingif
# CLI and the AirConditioner-Demo appliance (examples-c/aircon.c): the CLI
# creates a user, onboards the appliance and sends the seeds' three commands,
# printing each step and its results (scripts/run-demo.sh).
# scripts/demo.sh --gateway runs the gateway example (examples-c/lamps.c)
# instead: one gateway, three lamps behind it, each a thing of its own.
# scripts/demo.sh --update runs the firmware update demo: aircon on a
# simulated A/B board takes a release, reboots into it and confirms it, then
# rolls back a release whose self-test fails (scripts/demo-update.sh);
# scripts/demo.sh --update --installer swupdate hands the releases to
# SWUpdate instead (scripts/demo-update-swupdate.sh).
# Installs what is missing, builds the hub and the CLI with SwiftPM and the
# library and the appliance with CMake first.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
echo "demo: building thingif-hub and thingif (swift build) …"
swift build --product thingif-hub >/dev/null
swift build --product thingif >/dev/null
bin=$(swift build --show-bin-path)
echo "demo: building libthingif, aircon and lamps (cmake + ninja) …"
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTHINGIF_HUB_BIN_DIR="$bin" >/dev/null
cmake --build build >/dev/null
exec bash scripts/run-demo.sh --build-dir build --hub "$bin/thingif-hub" --cli "$bin/thingif" "$@"
