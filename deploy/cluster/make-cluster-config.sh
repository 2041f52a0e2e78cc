#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Writes the configuration of an ejabberd (mod_mqtt) cluster for thingif,
# N nodes (default 3) behind one haproxy, secured as the mosquitto of
# deploy/make-broker-config.sh --cert-port --no-plugin is (docs/SECURITY.md,
# docs/SCALING.md "A three-node cluster (ejabberd)"):
#
#   DIR/nodeK/ejabberd.yml   node K's configuration: mod_mqtt only (no XMPP
#                            listener, no HTTP API), a plain MQTT listener
#                            and a TLS one (tls_verify: things log in with a
#                            certificate of the things CA, CN = username),
#                            internal authentication (SCRAM, in Mnesia, so
#                            replicated to every node), no anonymous login,
#                            the limits raised that are too small for the
#                            hub, and the topic rules (access_publish /
#                            access_subscribe) of mosquitto's acl patterns
#   DIR/nodeK/node.env       node K's Erlang name, its ports and its
#                            distribution port (read by scripts/cluster.sh;
#                            an operator copies the values into ejabberdctl.cfg)
#   DIR/nodeK/ejabberdctl.cfg  the same for Debian's ejabberdctl (one node a host)
#   DIR/acl.yml              the lists the rules name: revoked users (a
#                            deleted thing's CN), gateways (end-node rights);
#                            included by every node, rewritten at run time
#                            and read again by `ejabberdctl reload_config`
#   DIR/.erlang.cookie       the cluster's shared secret (0400): who holds
#                            it controls every node. Debian's ejabberd reads
#                            /var/lib/ejabberd/.erlang.cookie
#   DIR/identities           "user password" per line (0600): the hub's login,
#                            the app's bootstrap login, Home Assistant's;
#                            registered once on any node (replicated)
#   DIR/client-cas.pem       c2s_cafile: the things CA (+ the claims CA with
#                            --claims): ejabberd has one client CA per
#                            domain, not one per listener
#   DIR/haproxy.cfg          haproxy in TCP mode: MQTT and MQTT/TLS (passed
#                            through, TLS ends on the nodes), least
#                            connections, an MQTT CONNECT/CONNACK health check
#   PKI/ca.crt ca.key server.crt server.key things-ca.crt things-ca.key
#   (claims-ca.crt claims-ca.key)  made with openssl when missing, the same
#                            names as deploy/make-broker-config.sh, so one
#                            PKI folder serves both brokers (--pki)
#
# usage: make-cluster-config.sh DIR [--nodes N] [--hosts H1,H2,...]
#          [--mqtt-ports P,...] [--tls-ports P,...] [--dist-ports P,...]
#          [--lb-host H] [--lb-plain-host H] [--lb-port P] [--lb-tls-port P] [--epmd-port P]
#          [--domain D] [--pki DIR] [--install-dir DIR]
#          [--hub-user U] [--hub-password PW]
#          [--bootstrap-user APPID --bootstrap-password APPKEY]
#          [--ha-user U --ha-password PW [--ha-prefix homeassistant]]
#          [--claims] [--log-dir DIR]
# --hosts: one address per node (its listeners bind there, its node name is
#   ejabberd@HOST); default every node on 127.0.0.1 as ejK@localhost.
# Ports: a list with one per node, or one port that every node uses (on
#   separate hosts). Defaults: one host: 18831+K, 18881+K, 47400+K; hosts:
#   1883, 8883, 4370.
# --lb-host: where haproxy's TLS front listens (one host: 127.0.0.1; hosts:
#   0.0.0.0). --lb-plain-host: where its plain front listens, 127.0.0.1 unless
#   given: passwords cross it in clear, so by default only a hub on the
#   balancer's machine uses it (as mosquitto's plain listener is loopback only).
# --epmd-port: the port of the Erlang port mapper every node and ejabberdctl
#   use (one host: a private one, default 47369; hosts: 4369).
# --install-dir: where DIR will be on the nodes (the paths the files name);
#   default DIR itself.
# --hub-password defaults to a random one, printed on stdout as the only
# output ("hub-password=..."), as make-broker-config.sh prints admin-password.
set -euo pipefail
. "$(dirname "$0")/../pki.sh"

dir=""; nodes=3; hosts=""; mqtt_ports=""; tls_ports=""; dist_ports=""
lb_host=""; lb_plain_host=127.0.0.1; lb_port=1883; lb_tls_port=8883; epmd_port=""; domain="localhost"; pki=""; install_dir=""
hub_user="thingif-hub"; hub_password=""; bootstrap_user=""; bootstrap_password=""
ha_user=""; ha_password=""; ha_prefix="homeassistant"; claims=false; log_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --mqtt-ports) mqtt_ports=$2; shift 2 ;;
    --tls-ports) tls_ports=$2; shift 2 ;;
    --dist-ports) dist_ports=$2; shift 2 ;;
    --lb-host) lb_host=$2; shift 2 ;;
    --lb-plain-host) lb_plain_host=$2; shift 2 ;;
    --lb-port) lb_port=$2; shift 2 ;;
    --lb-tls-port) lb_tls_port=$2; shift 2 ;;
    --epmd-port) epmd_port=$2; shift 2 ;;
    --domain) domain=$2; shift 2 ;;
    --pki) pki=$2; shift 2 ;;
    --install-dir) install_dir=$2; shift 2 ;;
    --hub-user) hub_user=$2; shift 2 ;;
    --hub-password) hub_password=$2; shift 2 ;;
    --bootstrap-user) bootstrap_user=$2; shift 2 ;;
    --bootstrap-password) bootstrap_password=$2; shift 2 ;;
    --ha-user) ha_user=$2; shift 2 ;;
    --ha-password) ha_password=$2; shift 2 ;;
    --ha-prefix) ha_prefix=$2; shift 2 ;;
    --claims) claims=true; shift ;;
    --log-dir) log_dir=$2; shift 2 ;;
    -h|--help) sed -n '4,60s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "make-cluster-config: unknown option $1" >&2; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || { echo "usage: make-cluster-config.sh DIR [--nodes N] [options] (--help)" >&2; exit 2; }
[ -z "$bootstrap_user" ] || [ -n "$bootstrap_password" ] \
  || { echo "make-cluster-config: --bootstrap-user needs --bootstrap-password" >&2; exit 2; }
[ -z "$ha_user" ] || [ -n "$ha_password" ] \
  || { echo "make-cluster-config: --ha-user needs --ha-password" >&2; exit 2; }
case "$nodes" in ''|*[!0-9]*|0) echo "make-cluster-config: --nodes takes a number > 0" >&2; exit 2 ;; esac
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pki=${pki:-$dir/pki}
mkdir -p "$pki"
pki=$(cd "$pki" && pwd)
install_dir=${install_dir:-$dir}
log_dir=${log_dir:-$install_dir}
# Paths as the nodes will see them: under --install-dir when DIR is copied.
ipath() { local p=$1; case "$p" in "$dir"*) printf '%s%s' "$install_dir" "${p#"$dir"}" ;; *) printf '%s' "$p" ;; esac; }

# The N hosts, node names and ports.
one_host=true
if [ -n "$hosts" ]; then
  one_host=false
  IFS=, read -r -a host_list <<< "$hosts"
  [ "${#host_list[@]}" -eq "$nodes" ] || [ "$nodes" -eq 3 ] \
    || { echo "make-cluster-config: --hosts names ${#host_list[@]} hosts for $nodes nodes" >&2; exit 2; }
  nodes=${#host_list[@]}
fi
# nth LIST K DEFAULT: the K-th (1-based) of a comma list, its only entry, or DEFAULT.
nth() {
  local list=$1 k=$2 def=$3 a
  [ -n "$list" ] || { echo "$def"; return; }
  IFS=, read -r -a a <<< "$list"
  if [ "${#a[@]}" -eq 1 ]; then echo "${a[0]}"
  elif [ "${#a[@]}" -ge "$k" ]; then echo "${a[$((k - 1))]}"
  else echo "make-cluster-config: a port list names fewer than $nodes ports" >&2; exit 2; fi
}
epmd_port=${epmd_port:-$($one_host && echo 47369 || echo 4369)}
lb_host=${lb_host:-$($one_host && echo 127.0.0.1 || echo 0.0.0.0)}

# The PKI: the same files and the same way as deploy/make-broker-config.sh,
# so that one folder serves mosquitto and the cluster (a lock keeps
# parallel callers apart). The server certificate names every node's host.
san="IP:127.0.0.1,DNS:localhost"
if ! $one_host; then
  for h in "${host_list[@]}"; do
    if [[ $h =~ ^[0-9.]+$ || $h == *:* ]]; then san="$san,IP:$h"; else san="$san,DNS:$h"; fi
  done
  [ "$lb_host" = 0.0.0.0 ] || san="$san,$([[ $lb_host =~ ^[0-9.]+$ ]] && echo IP || echo DNS):$lb_host"
fi
(
  flock 9
  cd "$pki"
  umask 077
  [ -s ca.crt ] || pki_ca ca "thingif test CA"
  if [ ! -s server.crt ]; then
    pki_leaf server localhost "subjectAltName=$san\nextendedKeyUsage=serverAuth"
    chmod 0640 server.key
  fi
  for ca in things $($claims && echo claims); do
    [ -s "$ca-ca.crt" ] || pki_ca "$ca-ca" "thingif $ca CA"
  done
) 9>"$pki/.lock"
# One client-CA bundle: ejabberd 23.01 takes the client CA from the global
# c2s_cafile (mod_mqtt_session:starttls), not per listener.
cat "$pki/things-ca.crt" $($claims && echo "$pki/claims-ca.crt") > "$dir/client-cas.pem"
chmod 0644 "$dir/client-cas.pem"

# The cookie: made once, kept (every node of the cluster needs the same).
if [ ! -s "$dir/.erlang.cookie" ]; then
  (umask 077; openssl rand -hex 20 | tr -d '\n' > "$dir/.erlang.cookie")
fi
chmod 0400 "$dir/.erlang.cookie"

# The identities with a password. Things log in with certificates only.
if [ -z "$hub_password" ]; then
  hub_password=$(openssl rand -hex 16)
  echo "hub-password=$hub_password"
fi
(
  umask 077
  {
    echo "$hub_user $hub_password"
    [ -z "$bootstrap_user" ] || echo "$bootstrap_user $bootstrap_password"
    [ -z "$ha_user" ] || echo "$ha_user $ha_password"
  } > "$dir/identities.tmp"
  mv "$dir/identities.tmp" "$dir/identities"
)

# The lists the rules name. Kept when present: the hub rewrites it (a
# deleted thing's CN in revoked, a gateway's CN in gateways), then runs
# reload_config on each node. "-" is no user (nodeprep refuses no
# character of it, and no certificate has that CN): ejabberd's acl wants
# a non-empty list.
if [ ! -s "$dir/acl.yml" ]; then
  cat > "$dir/acl.yml" <<EOF
# SPDX-License-Identifier: Apache-2.0
# thingif: the user lists of the topic rules (deploy/cluster/make-cluster-config.sh).
# Rewritten at run time; every node reads it again on \`ejabberdctl reload_config\`.
acl:
  hub:
    user: "$hub_user"
  bootstrap:
    user: "${bootstrap_user:--}"
  homeassistant:
    user: "${ha_user:--}"
  # Deleted things' certificates (CN = mqttTopic): denied first in every
  # thing rule. ejabberd has no CRL: such a certificate still logs in, but
  # publishes nothing and subscribes to nothing.
  revoked:
    user: ["-"]
  # Gateways with a certificate (CN = mqttTopic): their end nodes' topics.
  gateways:
    user: ["-"]
EOF
  chmod 0644 "$dir/acl.yml"
fi

# The rules. check_access (mod_mqtt.erl, 23.01): a topic is allowed when
# one listed filter matches it and that filter's rule allows the user; no
# listed filter matching means deny. %u is the user (the certificate's
# CN), %c the client ID; both are matched after nodeprep / resourceprep
# (a user name is lower case). A "+" or "#" in a listed filter matches
# a "+" or "#" of the subscribed filter too.
rules() {
  cat <<EOF
    access_publish:
      # Things with a certificate: their status, their requests.
      "p/%u/status": thing
      "p/%u/thing-if/#": thing
      "p/%u/api/#": thing
      # A gateway's end nodes' statuses (gateways listed in acl.yml).
      "p/%u/end-nodes/+/status": gateway
      # Claim certificates: one onboarding under the CN and the device's own client ID.
      "c/%u/%c/onboardings": thing
EOF
  if [ -n "$bootstrap_user" ]; then
    cat <<EOF
      # The app's bootstrap identity (appID / app key).
      "p/+/thing-if/apps/$bootstrap_user/onboardings": bootstrap
      "p/+/api/apps/$bootstrap_user/installations": bootstrap
      "p/+/api/apps/$bootstrap_user/installations/+/mqtt-endpoint": bootstrap
EOF
  fi
  if [ -n "$ha_user" ]; then
    cat <<EOF
      # Home Assistant: its birth and its commands (the hub checks each).
      "$ha_prefix/status": homeassistant
      "thingif/+/set/+": homeassistant
EOF
  fi
  cat <<EOF
      # The hub: everything (ejabberd refuses every publish to a \$ topic, to anyone).
      "#": hub
    access_subscribe:
      # Things: their commands, their replies, their configuration.
      "%u": thing
      "p/%u/resp": thing
      "p/%u/config": thing
      "p/%u/end-nodes/+/commands": gateway
      "p/%u/end-nodes/+/events": gateway
      "c/%u/%c/resp": thing
EOF
  if [ -n "$bootstrap_user" ]; then
    cat <<EOF
      # Bootstrap clients read the replies to their own client ID.
      "p/%c/resp": bootstrap
EOF
  fi
  if [ -n "$ha_user" ]; then
    cat <<EOF
      "$ha_prefix/#": homeassistant
      "thingif/+/state": homeassistant
      "thingif/+/availability": homeassistant
EOF
  fi
  cat <<EOF
      "#": hub
EOF
}

: > "$dir/nodes"
for k in $(seq 1 "$nodes"); do
  nd=$dir/node$k
  mkdir -p "$nd/spool"
  if $one_host; then
    host=127.0.0.1; name="ej$k@localhost"
    mqtt=$(nth "$mqtt_ports" "$k" $((18830 + k))); tls=$(nth "$tls_ports" "$k" $((18880 + k)))
    dist=$(nth "$dist_ports" "$k" $((47400 + k)))
  else
    host=${host_list[$((k - 1))]}; name="ejabberd@$host"
    mqtt=$(nth "$mqtt_ports" "$k" 1883); tls=$(nth "$tls_ports" "$k" 8883); dist=$(nth "$dist_ports" "$k" 4370)
  fi
  echo "$k $name $host $mqtt $tls $dist" >> "$dir/nodes"
  cat > "$nd/node.env" <<EOF
# SPDX-License-Identifier: Apache-2.0
NODE_NAME=$name
NODE_HOST=$host
MQTT_PORT=$mqtt
TLS_PORT=$tls
DIST_PORT=$dist
EPMD_PORT=$epmd_port
EOF
  cat > "$nd/ejabberdctl.cfg" <<EOF
# SPDX-License-Identifier: Apache-2.0
# Node $k for Debian's ejabberdctl (/etc/ejabberd/ejabberdctl.cfg), one node a host.
ERLANG_NODE=$name
INET_DIST_INTERFACE=$host
FIREWALL_WINDOW=$dist-$dist
EJABBERD_CONFIG_PATH=$(ipath "$nd")/ejabberd.yml
ERL_OPTIONS="-env ERL_CRASH_DUMP_BYTES 0"
EOF
  {
    cat <<EOF
# SPDX-License-Identifier: Apache-2.0
# thingif: ejabberd node $k of $nodes ($name), MQTT only. Made by
# deploy/cluster/make-cluster-config.sh; docs/SCALING.md "A three-node cluster (ejabberd)".
hosts:
  - "$domain"
loglevel: info
hide_sensitive_log_data: true
log_rotate_count: 1
log_rotate_size: 10485760
# No certificate requests to the outside, no contributed modules.
acme:
  auto: false
allow_contrib_modules: false
# The server certificate and its CA (TLS listener), and the CA of client certificates:
# things (and claims) log in with a certificate whose CN is the username,
# or the client ID when no username is sent; no password, no record.
certfiles:
  - "$(ipath "$pki")/server.crt"
  - "$(ipath "$pki")/server.key"
  - "$(ipath "$pki")/ca.crt"
c2s_cafile: "$(ipath "$dir")/client-cas.pem"
# Passwords (the hub, the bootstrap identity, Home Assistant) in Mnesia,
# replicated to every node, as SCRAM hashes. No anonymous login: a client
# with no password needs a verified certificate.
auth_method: [internal]
auth_password_format: scram
auth_scram_hash: sha256
include_config_file:
  - "$(ipath "$dir")/acl.yml"
access_rules:
  thing:
    - deny: revoked
    - allow: all
  gateway:
    - deny: revoked
    - allow: gateways
  hub:
    - allow: hub
  bootstrap:
    - allow: bootstrap
  homeassistant:
    - allow: homeassistant
listen:
  # Plain MQTT: the hub and the bootstrap identity, with a password.
  - port: $mqtt
    ip: "$host"
    module: mod_mqtt
    backlog: 1024
    max_payload_size: 1048576
  # MQTT over TLS: passwords, and certificates of the CA bundle.
  - port: $tls
    ip: "$host"
    module: mod_mqtt
    backlog: 1024
    max_payload_size: 1048576
    tls: true
    tls_verify: true
modules:
  mod_mqtt:
    # The defaults are too small for thingif: a thing's session lives 7
    # days (5 minutes), a request path has 10 levels (8), a hub reads
    # every status at subscribe (1,000) and queues up to 50,000 requests
    # (5,000 a session, then "quota exceeded").
    session_expiry: 604800
    max_topic_depth: 16
    match_retained_limit: infinity
    max_queue: 100000
    queue_type: ram
EOF
    rules
  } > "$nd/ejabberd.yml"
done

# haproxy: TCP, least connections (MQTT links are long), TLS passed through
# to the nodes (the certificate login needs the client's certificate on
# the node). The health check is MQTT itself: a 3.1.1 CONNECT without
# credentials, and a CONNACK (0x20 0x02, any return code) back; a node
# whose port is open but whose mod_mqtt does not answer is down. The TLS
# servers follow the plain ones' state (track). A node marked down has
# its clients' links cut (on-marked-down shutdown-sessions), so that they
# reconnect to a live node.
{
  echo "# SPDX-License-Identifier: Apache-2.0"
  echo "# thingif: haproxy in front of the $nodes ejabberd nodes. Made by deploy/cluster/make-cluster-config.sh."
  echo "global"
  echo "    # maxconn follows the file descriptor limit (ulimit -n, systemd LimitNOFILE):"
  echo "    # two descriptors a client; raise that limit for a large fleet."
  echo "    stats socket $(ipath "$dir")/haproxy.sock mode 600 level admin"
  echo "defaults"
  echo "    mode tcp"
  echo "    timeout connect 2s"
  echo "    # Longer than any MQTT keep-alive (libthingif's is 60 s)."
  echo "    timeout client 10m"
  echo "    timeout server 10m"
  echo "    timeout check 2s"
  echo "    retries 2"
  echo "    option redispatch"
  echo "frontend mqtt"
  echo "    bind $lb_plain_host:$lb_port"
  echo "    default_backend ejabberd_mqtt"
  echo "frontend mqtts"
  echo "    bind $lb_host:$lb_tls_port"
  echo "    default_backend ejabberd_mqtts"
  echo "backend ejabberd_mqtt"
  echo "    balance leastconn"
  echo "    option tcp-check"
  echo "    tcp-check connect"
  echo "    # CONNECT, MQTT 3.1.1, clean session, keep-alive 60, client ID \"hc\", no credentials"
  echo "    tcp-check send-binary 100e00044d5154540402003c00026863"
  echo "    tcp-check expect binary 2002"
  echo "    default-server inter 2s fastinter 500ms downinter 1s fall 2 rise 2 on-marked-down shutdown-sessions"
  while read -r k name host mqtt tls dist; do
    echo "    server ej$k $host:$mqtt check"
  done < "$dir/nodes"
  echo "backend ejabberd_mqtts"
  echo "    balance leastconn"
  echo "    default-server on-marked-down shutdown-sessions"
  while read -r k name host mqtt tls dist; do
    echo "    server ej$k $host:$tls track ejabberd_mqtt/ej$k"
  done < "$dir/nodes"
} > "$dir/haproxy.cfg"
