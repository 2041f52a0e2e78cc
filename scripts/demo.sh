#!/usr/bin/env bash
# The demo: a mosquitto broker, thingif-hub (the framework side) and the
# AirConditioner-Demo appliance (examples-c/aircon.c), then three commands
# round trip from the hub to the appliance and back, printed step by step.
# Installs what is missing and builds with CMake first.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
echo "demo: building (cmake + ninja) …"
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build >/dev/null
exec bash scripts/run-demo.sh --build-dir build "$@"
