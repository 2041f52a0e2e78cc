#!/usr/bin/env bash
# Runs every test of thingif: the Swift harness (real mosquitto, C ABI through
# the header) and the CMake build's ctest (the C appliance against a real
# broker, valgrind, exported symbols, header hygiene). Installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

echo "== swift test"
swift build --build-tests
swift test

echo "== cmake + ctest"
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build
ctest --test-dir build --output-on-failure
