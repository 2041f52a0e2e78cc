#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# A local ejabberd (mod_mqtt) cluster behind haproxy, for tests and by hand
# (issue #59; docs/SCALING.md "A three-node cluster (ejabberd)"). All on
# 127.0.0.1, on free ports, with a private epmd; every process is recorded
# by PID in DIR/pids and stopped by PID.
#
# usage: scripts/cluster.sh start  --dir DIR [--nodes N]   (default 3)
#        scripts/cluster.sh stop   --dir DIR
#        scripts/cluster.sh status --dir DIR
#        scripts/cluster.sh kill-node  --dir DIR K   (kill -9 node K)
#        scripts/cluster.sh start-node --dir DIR K   (start node K again, on its data)
#        scripts/cluster.sh ctl --dir DIR K COMMAND [ARGS]   (ejabberdctl COMMAND on node K)
#
# start: installs what is missing (apt-get install ejabberd haproxy, with
# one apt-get update if the install fails without it; no Debian service
# is started: a policy-rc.d that refuses starts is put in place for the
# install when there is none, and the units are disabled where systemd
# runs), writes the configuration with deploy/cluster/make-cluster-config.sh
# on free ports (kept in DIR/cluster.env; the PKI, cookie and identities
# are kept across starts), starts the epmd, the nodes one by one (each
# awaited until both its MQTT ports accept), joins nodes 2..N to node 1
# (awaited until node 1's list_cluster names every node), registers the
# identities (DIR/identities) on node 1, starts haproxy (awaited until
# its stats socket says every server is UP), and prints the figures:
# seconds to each node's listeners, to each join, RSS per node.
# A start begins with empty Mnesia folders; start-node keeps them.
#
# The binaries are Debian's, run with erl directly (not Debian's
# ejabberdctl, which runs everything as the user ejabberd under /var):
# HOME=DIR (the cookie DIR/.erlang.cookie), ERL_EPMD_PORT, ERL_LIBS. The
# control commands run in a hidden Erlang node (ejabberd_ctl), as
# ejabberdctl does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

cmd=${1:-}; [ $# -gt 0 ] && shift
dir=""; nodes=3; args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    -h|--help) sed -n '4,32s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$cmd" in start|stop|status|kill-node|start-node|ctl) ;; *)
  echo "usage: scripts/cluster.sh start|stop|status|kill-node|start-node|ctl --dir DIR [--nodes N] (--help)" >&2; exit 2 ;;
esac
[ -n "$dir" ] || { echo "cluster: --dir DIR is required" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pids=$dir/pids
mkdir -p "$pids"

say() { echo "cluster: $*"; }
die() { echo "cluster: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }

# ---- installing ------------------------------------------------------------
ejabberd_ebin() { ls -d /usr/lib/*/ejabberd-*/ebin 2>/dev/null | head -n 1; }
install_missing() {
  local need=()
  [ -n "$(ejabberd_ebin)" ] && command -v erl >/dev/null || need+=(ejabberd)
  command -v haproxy >/dev/null || need+=(haproxy)
  [ ${#need[@]} -gt 0 ] || return 0
  [ "$(id -u)" -eq 0 ] || die "missing ${need[*]}: run as root, or apt-get install ${need[*]}"
  say "installing ${need[*]}"
  local t_install; t_install=$(now)
  # Debian's ejabberd package starts its service (5222, 5269, 5280 and
  # mosquitto's 1883) unless policy-rc.d says no: keep it from starting.
  local policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\n# scripts/cluster.sh: no service starts during its install\nexit 101\n' > "$policy"
    chmod 0755 "$policy"
  fi
  local rc=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >"$dir/apt.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    say "apt-get install failed; apt-get update once and again"
    apt-get update >>"$dir/apt.log" 2>&1 || true
    rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >>"$dir/apt.log" 2>&1 || rc=$?
  fi
  [ -z "$policy" ] || rm -f "$policy"
  [ "$rc" -eq 0 ] || { tail -20 "$dir/apt.log" >&2; die "apt-get install ${need[*]} failed ($dir/apt.log)"; }
  # Nor at the next boot; and one that started all the same (a
  # policy-rc.d that allowed it) is stopped: it is this install's.
  local u
  for u in "${need[@]}"; do
    if [ -d /run/systemd/system ]; then
      systemctl disable --now "$u" >/dev/null 2>&1 || true
    elif [ -x "/etc/init.d/$u" ]; then
      update-rc.d "$u" disable >/dev/null 2>&1 || true
      # By its pid file: "/etc/init.d/ejabberd status" would start an epmd
      # on 0.0.0.0:4369 as a side effect.
      local pf=/run/$u.pid
      [ "$u" = ejabberd ] && pf=/run/ejabberd/ejabberd.pid
      if [ -s "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null; then
        "/etc/init.d/$u" stop >/dev/null 2>&1 || true
      fi
    fi
  done
  say "installed ${need[*]} in $(since "$t_install") s; their services are not running"
}

# ---- configuration ---------------------------------------------------------
env_file=$dir/cluster.env
load_env() {
  [ -s "$env_file" ] || die "no cluster in $dir (scripts/cluster.sh start --dir $dir)"
  # shellcheck disable=SC1090
  . "$env_file"
  nodes=$NODES
}
erl_env() {
  export HOME=$dir ERL_EPMD_PORT=$EPMD_PORT ERL_LIBS
  ERL_LIBS=$(dirname "$(dirname "$(ejabberd_ebin)")")
}
# node_field K FIELD (of DIR/nodes: k name host mqtt tls dist)
node_field() { awk -v k="$1" -v f="$2" '$1 == k { print $f }' "$dir/nodes"; }

configure() {
  local ports
  # 3 ports per node, the epmd's and haproxy's two, all free now (held
  # together, so none is given twice).
  ports=$(python3 - "$nodes" <<'PY'
import socket, sys
n = int(sys.argv[1])
socks = []
for _ in range(3 * n + 3):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)
  read -r -a p <<< "$ports"
  local mq=() tl=() di=() i
  for i in $(seq 0 $((nodes - 1))); do mq+=("${p[$((3 * i))]}"); tl+=("${p[$((3 * i + 1))]}"); di+=("${p[$((3 * i + 2))]}"); done
  local base=$((3 * nodes))
  EPMD_PORT=${p[$base]} LB_PORT=${p[$((base + 1))]} LB_TLS_PORT=${p[$((base + 2))]}
  join() { local IFS=,; echo "$*"; }
  local boot_user=${THINGIF_CLUSTER_APP_ID:-cluster-app} boot_pw
  boot_pw=${THINGIF_CLUSTER_APP_KEY:-$(awk -v u="$boot_user" '$1 == u { print $2 }' "$dir/identities" 2>/dev/null || true)}
  boot_pw=${boot_pw:-$(openssl rand -hex 12)}
  local out
  out=$(bash "$root/deploy/cluster/make-cluster-config.sh" "$dir" --nodes "$nodes" \
    --mqtt-ports "$(join "${mq[@]}")" --tls-ports "$(join "${tl[@]}")" --dist-ports "$(join "${di[@]}")" \
    --epmd-port "$EPMD_PORT" --lb-port "$LB_PORT" --lb-tls-port "$LB_TLS_PORT" \
    --bootstrap-user "$boot_user" --bootstrap-password "$boot_pw" \
    $( [ -s "$dir/identities" ] && echo --hub-password "$(awk 'NR == 1 { print $2 }' "$dir/identities")" ))
  local hub_pw
  hub_pw=$(awk 'NR == 1 { print $2 }' "$dir/identities")
  : "$out"
  {
    echo "# SPDX-License-Identifier: Apache-2.0"
    echo "# Written by scripts/cluster.sh start; sourced by the smoke check and tests."
    echo "NODES=$nodes"
    echo "EPMD_PORT=$EPMD_PORT"
    echo "LB_HOST=127.0.0.1"
    echo "LB_PORT=$LB_PORT"
    echo "LB_TLS_PORT=$LB_TLS_PORT"
    for i in $(seq 1 "$nodes"); do
      echo "NODE${i}_MQTT_PORT=${mq[$((i - 1))]}"
      echo "NODE${i}_TLS_PORT=${tl[$((i - 1))]}"
    done
    echo "HUB_USER=$(awk 'NR == 1 { print $1 }' "$dir/identities")"
    echo "APP_ID=$boot_user"
    echo "PKI=$dir/pki"
  } > "$env_file"
  : "$hub_pw"
}

# ---- processes -------------------------------------------------------------
# alive NAME: the recorded PID runs and is still the process it was (its
# command line names what it should), so a reused PID is never signalled.
alive() {
  local f=$pids/$1.pid pid
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -F -- "$(cat "$pids/$1.match")" >/dev/null
}
record() { echo "$2" > "$pids/$1.pid"; printf '%s' "$3" > "$pids/$1.match"; }
# wait_port PORT SECONDS PID: until 127.0.0.1:PORT accepts (and PID lives).
wait_port() {
  local port=$1 deadline=$((SECONDS + $2)) pid=${3:-}
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    [ -z "$pid" ] || kill -0 "$pid" 2>/dev/null || return 1
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}
# stop_pid NAME SIGNAL: signal the recorded process, await its end (10 s,
# then SIGKILL).
stop_pid() {
  local name=$1 sig=${2:-TERM} pid
  alive "$name" || { rm -f "$pids/$name.pid"; return 0; }
  pid=$(cat "$pids/$name.pid")
  kill "-$sig" "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 10))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
    sleep 0.05
  done
  rm -f "$pids/$name.pid"
}
rss_mb() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo "?"; }

# ctl K COMMAND ARGS: ejabberd_ctl in a hidden node, as ejabberdctl does.
ctl() {
  local k=$1; shift
  erl -sname "ctl$$-$RANDOM@localhost" -hidden -noinput -start_epmd false \
    -kernel inet_dist_use_interface '{127,0,0,1}' -s ejabberd_ctl -extra "ej$k@localhost" "$@"
}
cluster_nodes() { ctl "$1" list_cluster 2>/dev/null | grep -c '@' || true; }

start_epmd() {
  alive epmd && return 0
  setsid epmd -port "$EPMD_PORT" -address 127.0.0.1 >"$dir/epmd.log" 2>&1 < /dev/null &
  record epmd $! "epmd -port $EPMD_PORT"
  wait_port "$EPMD_PORT" 10 "$(cat "$pids/epmd.pid")" || die "epmd did not listen on $EPMD_PORT"
}

# start_node K: start it, await both MQTT ports; prints the seconds.
start_node() {
  local k=$1 nd=$dir/node$1 t0 pid
  alive "ej$k" && { echo "0"; return 0; }
  local mqtt tls dist
  mqtt=$(node_field "$k" 4); tls=$(node_field "$k" 5); dist=$(node_field "$k" 6)
  t0=$(now)
  EJABBERD_CONFIG_PATH=$nd/ejabberd.yml EJABBERD_LOG_PATH=$nd/ejabberd.log \
    setsid erl -sname "ej$k@localhost" -start_epmd false \
    -kernel inet_dist_use_interface '{127,0,0,1}' \
    -kernel inet_dist_listen_min "$dist" -kernel inet_dist_listen_max "$dist" \
    -env ERL_CRASH_DUMP_BYTES 0 -noinput -mnesia dir "\"$nd/spool\"" -s ejabberd \
    >"$nd/stdout.log" 2>&1 < /dev/null &
  pid=$!
  record "ej$k" "$pid" "-sname ej$k@localhost"
  wait_port "$mqtt" 60 "$pid" && wait_port "$tls" 10 "$pid" \
    || { tail -20 "$nd/ejabberd.log" "$nd/stdout.log" >&2 2>/dev/null; die "node $k did not open $mqtt/$tls"; }
  since "$t0"
}

# await_cluster K N SECONDS: until node K's list_cluster names N nodes.
await_cluster() {
  local k=$1 n=$2 deadline=$((SECONDS + $3)) c
  while :; do
    c=$(cluster_nodes "$k")
    [ "$c" -eq "$n" ] && return 0
    [ "$SECONDS" -lt "$deadline" ] || { say "node $k lists $c of $n nodes"; return 1; }
  done
}

register_identities() {
  # The passwords stay out of every command line: the hidden node reads
  # the file and calls ejabberd_auth on node 1 (replicated in Mnesia).
  local domain=localhost
  erl -sname "reg$$@localhost" -hidden -noinput -start_epmd false -kernel inet_dist_use_interface '{127,0,0,1}' \
    -eval '
      [File, Node0, Domain] = init:get_plain_arguments(),
      Node = list_to_atom(Node0),
      {ok, B} = file:read_file(File),
      Lines = [L || L <- binary:split(B, <<"\n">>, [global]), L =/= <<>>],
      R = [begin
             [U, P] = binary:split(L, <<" ">>),
             case rpc:call(Node, ejabberd_auth, try_register, [U, list_to_binary(Domain), P]) of
               ok -> registered;
               {error, exists} -> rpc:call(Node, ejabberd_auth, set_password, [U, list_to_binary(Domain), P]);
               Other -> Other
             end
           end || L <- Lines],
      io:format("~p~n", [R]),
      halt(case lists:all(fun(X) -> X == registered orelse X == ok end, R) of true -> 0; false -> 1 end).' \
    -extra "$dir/identities" "ej1@localhost" "$domain"
}

# haproxy_up: the number of servers its stats socket says are UP, per backend.
haproxy_state() {
  python3 - "$dir/haproxy.sock" <<'PY'
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(sys.argv[1])
    s.sendall(b"show stat\n"); data = b""
    while True:
        b = s.recv(65536)
        if not b: break
        data += b
except OSError:
    print("down"); sys.exit(0)
rows = [l.split(",") for l in data.decode().splitlines() if l and not l.startswith("#")]
print(" ".join(f"{r[0]}/{r[1]}={r[17]}" for r in rows if r[1] not in ("FRONTEND", "BACKEND")))
PY
}
start_haproxy() {
  alive haproxy && return 0
  setsid haproxy -db -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 < /dev/null &
  record haproxy $! "haproxy -db -f $dir/haproxy.cfg"
  wait_port "$LB_PORT" 10 "$(cat "$pids/haproxy.pid")" || { cat "$dir/haproxy.log" >&2; die "haproxy did not listen"; }
}
# await_haproxy N SECONDS: until N servers of the plain backend are UP.
await_haproxy() {
  local n=$1 deadline=$((SECONDS + $2)) st
  while :; do
    st=$(haproxy_state)
    [ "$(tr ' ' '\n' <<< "$st" | grep -c '^ejabberd_mqtt/.*=UP' || true)" -eq "$n" ] && return 0
    [ "$SECONDS" -lt "$deadline" ] || { say "haproxy: $st"; return 1; }
    sleep 0.1
  done
}

# ---- commands --------------------------------------------------------------
case "$cmd" in
start)
  for f in "$pids"/ej*.pid "$pids"/haproxy.pid "$pids"/epmd.pid; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .pid); alive "$n" && die "$n already runs (scripts/cluster.sh stop --dir $dir)"
  done
  t_all=$(now)
  install_missing
  configure
  load_env
  erl_env
  for k in $(seq 1 "$nodes"); do rm -rf "$dir/node$k/spool"; mkdir -p "$dir/node$k/spool"; done
  start_epmd
  for k in $(seq 1 "$nodes"); do
    s=$(start_node "$k")
    say "node $k (ej$k@localhost, MQTT $(node_field "$k" 4), TLS $(node_field "$k" 5)) listening after $s s, RSS $(rss_mb "$(cat "$pids/ej$k.pid")") MB"
  done
  for k in $(seq 2 "$nodes"); do
    t0=$(now)
    ctl "$k" join_cluster ej1@localhost >"$dir/node$k/join.log" 2>&1 || { cat "$dir/node$k/join.log" >&2; die "node $k did not join"; }
    say "node $k joined node 1 in $(since "$t0") s"
  done
  t0=$(now)
  await_cluster 1 "$nodes" 30 || die "the cluster did not form"
  say "node 1 lists $nodes nodes ($(ctl 1 list_cluster | tr '\n' ' ')) $(since "$t0") s after the last join"
  register_identities >"$dir/register.log" 2>&1 || { cat "$dir/register.log" >&2; die "registering the identities failed"; }
  say "identities registered: $(awk '{ printf "%s ", $1 }' "$dir/identities")"
  t0=$(now)
  start_haproxy
  await_haproxy "$nodes" 20 || die "haproxy does not see $nodes nodes up"
  say "haproxy on 127.0.0.1:$LB_PORT (MQTT) and :$LB_TLS_PORT (TLS passed through), $nodes servers UP after $(since "$t0") s"
  for k in $(seq 1 "$nodes"); do
    say "node $k RSS $(rss_mb "$(cat "$pids/ej$k.pid")") MB (PID $(cat "$pids/ej$k.pid"))"
  done
  say "started in $(since "$t_all") s; $env_file"
  ;;
stop)
  [ -s "$env_file" ] && load_env || true
  t0=$(now)
  stop_pid haproxy
  # SIGTERM to every node at once: each stops its applications (init:stop)
  # and exits; one still there after 10 s gets SIGKILL.
  running=()
  for f in "$pids"/ej*.pid; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .pid)
    if alive "$n"; then kill -TERM "$(cat "$f")" 2>/dev/null || true; running+=("$n"); else rm -f "$f"; fi
  done
  deadline=$((SECONDS + 10)) killed=()
  for n in "${running[@]}"; do
    pid=$(cat "$pids/$n.pid")
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$SECONDS" -ge "$deadline" ]; then kill -KILL "$pid" 2>/dev/null || true; killed+=("$n"); break; fi
      sleep 0.05
    done
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    rm -f "$pids/$n.pid"
  done
  stop_pid epmd
  say "stopped in $(since "$t0") s${killed[*]:+ (SIGKILL after 10 s: ${killed[*]})}"
  ;;
status)
  load_env
  erl_env
  rc=0
  for n in epmd $(for k in $(seq 1 "$nodes"); do echo "ej$k"; done) haproxy; do
    if alive "$n"; then
      pid=$(cat "$pids/$n.pid")
      extra=""
      case "$n" in ej*) extra=", RSS $(rss_mb "$pid") MB, lists $(cluster_nodes "${n#ej}") nodes" ;; esac
      say "$n runs (PID $pid$extra)"
    else
      say "$n does not run"; rc=1
    fi
  done
  alive haproxy && say "haproxy: $(haproxy_state)"
  exit "$rc"
  ;;
kill-node)
  load_env
  k=${args[0]:?kill-node K}
  alive "ej$k" || die "node $k does not run"
  stop_pid "ej$k" KILL
  say "node $k killed (SIGKILL)"
  ;;
start-node)
  load_env
  erl_env
  k=${args[0]:?start-node K}
  alive epmd || die "epmd does not run"
  s=$(start_node "$k")
  t0=$(now)
  # Asked of another node: the cluster, not the node's own view of it.
  o=1; [ "$k" -ne 1 ] || o=2
  await_cluster "$o" "$nodes" 30 || die "node $k did not come back into the cluster"
  say "node $k listening after $s s, in the cluster (node $o lists $nodes) $(since "$t0") s later, RSS $(rss_mb "$(cat "$pids/ej$k.pid")") MB"
  ;;
ctl)
  load_env
  erl_env
  k=${args[0]:?ctl K COMMAND}
  ctl "$k" "${args[@]:1}"
  ;;
esac
