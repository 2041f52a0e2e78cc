#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Generates the API reference from include/thingif.h into docs/api/html with
# Doxygen (docs/Doxyfile). Any Doxygen warning (an undocumented function,
# enum value or parameter) fails the run. Installs doxygen with apt-get when
# it is missing and this runs as root.
#
# usage: scripts/api-docs.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v doxygen >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "api-docs: installing doxygen" >&2
        apt-get install -y doxygen >/dev/null || { apt-get update >/dev/null && apt-get install -y doxygen >/dev/null; }
    else
        echo "api-docs: doxygen not found (apt install doxygen)" >&2
        exit 2
    fi
fi

rm -rf docs/api
# docs/Doxyfile reads the version from the environment: the header is its one copy.
THINGIF_VERSION=$(sed -n 's/^#define THINGIF_VERSION_STRING "\([^"]*\)".*/\1/p' include/thingif.h)
export THINGIF_VERSION
doxygen docs/Doxyfile
echo "api-docs: docs/api/html/index.html (doxygen $(doxygen --version))"
