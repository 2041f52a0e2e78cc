#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Smoke check of a cluster that scripts/cluster.sh started: logins, the
# topic rules, a QoS 1 message across nodes and through haproxy,
# SharedSubscriptionAvailable and $share, a node killed and restored
# (scripts/cluster_smoke.py says what each check is). Exits 1 if a check
# fails. Run by hand, not by scripts/test.sh.
#
# usage: scripts/cluster-smoke.sh --dir DIR
#   (start the cluster first: scripts/cluster.sh start --dir DIR)
# paho-mqtt 2.x comes from the interpreter when it has it, else from a venv
# made once under DIR/venv (pip install paho-mqtt).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    -h|--help) sed -n '4,14s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "cluster-smoke: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$dir" ] && [ -s "$dir/cluster.env" ] || { echo "usage: scripts/cluster-smoke.sh --dir DIR (a started cluster)" >&2; exit 2; }
py=python3
if ! "$py" -c 'import paho.mqtt, sys; sys.exit(0 if paho.mqtt.__version__ >= "2" else 1)' 2>/dev/null; then
  py=$dir/venv/bin/python
  if ! "$py" -c 'import paho.mqtt' 2>/dev/null; then
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install -q 'paho-mqtt>=2,<3' >"$dir/venv.log" 2>&1 \
      || { cat "$dir/venv.log" >&2; echo "cluster-smoke: pip install paho-mqtt failed" >&2; exit 1; }
  fi
fi
exec "$py" "$here/cluster_smoke.py" "$dir"
