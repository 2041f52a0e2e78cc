#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Installs the thingif Python package into a throwaway virtual environment
# and runs its pytest suite against a CMake build of libthingif and the
# SwiftPM-built thingif-hub (a real mosquitto on 127.0.0.1 is started by the
# tests).
#
# usage: python/run-tests.sh --build-dir DIR [--hub PATH] [pytest arguments ...]
#   --build-dir DIR  the CMake build folder holding libthingif.so
#   --hub PATH       the thingif-hub program (default DIR/thingif-hub; SwiftPM
#                    builds it: `swift build --show-bin-path`/thingif-hub)
# Environment: PYTHON (default python3).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir="" hub=""
pytest_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build_dir=${2:-}; shift 2 || { echo "run-tests: --build-dir needs a value" >&2; exit 2; } ;;
        --hub) hub=${2:-}; shift 2 || { echo "run-tests: --hub needs a value" >&2; exit 2; } ;;
        -h|--help) sed -n '4,14s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) pytest_args+=("$1"); shift ;;
    esac
done
[ -n "$build_dir" ] || { echo "run-tests: --build-dir DIR is required" >&2; exit 2; }
build_dir=$(cd "$build_dir" && pwd)

lib=""
for name in libthingif.so libthingif.dylib; do
    [ -e "$build_dir/$name" ] && { lib=$build_dir/$name; break; }
done
[ -n "$lib" ] || { echo "run-tests: no libthingif.so in $build_dir; build first (cmake --build $build_dir)" >&2; exit 2; }
[ -n "$hub" ] || hub=$build_dir/thingif-hub
[ -x "$hub" ] || { echo "run-tests: no thingif-hub at $hub; build it (swift build --product thingif-hub) and pass --hub" >&2; exit 2; }
hub=$(cd "$(dirname "$hub")" && pwd)/$(basename "$hub")

python=${PYTHON:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/thingif-py.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$python" -m venv "$tmp/venv"
venv_python=$tmp/venv/bin/python
# Install from a copy, so that the build leaves nothing in the source tree
# (-L: LICENSE and NOTICE are links to the repository's).
mkdir "$tmp/src"
cp -RL "$here/pyproject.toml" "$here/README.md" "$here/LICENSE" "$here/NOTICE" "$here/thingif" "$tmp/src/"
# selenium drives Debian's chromium (apt: chromium chromium-driver) in tests/test_dashboard.py.
echo "run-tests: pip install ./python pytest selenium (in $tmp/venv)"
"$venv_python" -m pip install --quiet --disable-pip-version-check "$tmp/src" pytest 'selenium>=4.11,<5'

export THINGIF_LIBRARY=$lib
export THINGIF_HUB=$hub
# The hub's REST API gets a free port (the dashboard test reads it from the
# hub's log) and its data stays in memory, so that runs side by side do not collide.
export THINGIF_HUB_HTTP_PORT=0 THINGIF_HUB_MEMORY=1
# The dashboard test's screenshots (gitignored).
export THINGIF_ARTIFACTS=${THINGIF_ARTIFACTS:-$here/../artifacts}
# Run from outside the source tree so that the installed package is tested.
cd "$tmp"
status=0
"$venv_python" -m pytest -p no:cacheprovider -q "$here/tests" ${pytest_args[@]+"${pytest_args[@]}"} || status=$?
exit "$status"
