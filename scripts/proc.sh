# SPDX-License-Identifier: Apache-2.0

# scripts/proc.sh - process helpers the demo and the bench share (sourced).

# wait_for PID SECONDS: waits for a child to end, at most SECONDS. Sets
# $waited to its exit status and returns 0, or returns 1 if it still runs.
waited=""
wait_for() {
    local pid=$1 deadline=$((SECONDS + $2))
    while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.1
    done
    waited=0
    wait "$pid" 2>/dev/null || waited=$?
    return 0
}

# free_port: a TCP port free on 127.0.0.1 now.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
