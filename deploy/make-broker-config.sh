#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Writes a secured mosquitto configuration for thingif into DIR:
#   DIR/mosquitto.conf            no anonymous clients, the dynamic-security
#                                 plugin, a plain listener (loopback only),
#                                 a TLS listener and a mutual-TLS listener,
#                                 with --cert-port the listener for
#                                 things with certificates from the hub,
#                                 and with --claim-port the listener for
#                                 claim certificates (fleet provisioning)
#   DIR/dynamic-security.json     the plugin's state, with one admin client
#                                 (the hub's identity); the hub creates every
#                                 other client and role over
#                                 $CONTROL/dynamic-security/v1
#   DIR/acl                       with --cert-port or --claim-port: the
#                                 rules of things that connect with a
#                                 certificate, as patterns on their
#                                 certificate's CN (= their mqttTopic), so
#                                 that a new thing needs no broker record,
#                                 and those of claim certificates;
#                                 with --no-plugin also the hub's and the
#                                 bootstrap identity's rules
#   DIR/passwd                    with --no-plugin: the hub's identity and the
#                                 app's bootstrap identity (--bootstrap-user),
#                                 for thingif-hub --broker-admin none
#   PKI/ca.crt ca.key server.crt server.key client.crt client.key
#                                 made with openssl when missing (EC P-256,
#                                 server SAN IP:127.0.0.1 and DNS:localhost)
#   PKI/things-ca.crt things-ca.key
#                                 with --cert-port, when missing: the CA with
#                                 which thingif-hub signs things' certificates
#                                 (--thing-ca-cert/--thing-ca-key)
#   DIR/things-crl.pem            with --cert-port, when missing: an empty CRL
#                                 signed by the things CA, the certificate
#                                 listener's crlfile (mosquitto does not start
#                                 without it); thingif-hub --thing-crl writes
#                                 it from then on
#   DIR/mosquitto.pid             with --cert-port: the broker's pid_file, for
#                                 thingif-hub --broker-pid-file (SIGHUP: read
#                                 the CRL and the acl file again)
#   PKI/claims-ca.crt claims-ca.key
#                                 with --claim-port, when missing: the CA of
#                                 claim certificates (thingif-hub
#                                 claim-certificate --claim-ca-cert/
#                                 --claim-ca-key); the hub does not hold it
#
# usage: make-broker-config.sh DIR --port P [--tls-port P] [--mtls-port P] [--cert-port P]
#          [--claim-port P]
#          [--bind ADDR] [--pki DIR] [--admin-user U] [--admin-password PW]
#          [--persistence] [--server-name NAME]
#          [--no-plugin [--bootstrap-user APPID --bootstrap-password APPKEY]]
# --no-plugin: a broker configured by files only, as a hub that administers
# nothing in its broker needs (thingif-hub --broker-admin none; things then
# connect with certificates, --cert-port): the plugin is not loaded, the
# hub's identity and the app's bootstrap identity are a password_file, and
# their rules are users in an acl_file (DIR/acl).
# --admin-password defaults to a random one, printed on stdout as the only
# output ("admin-password=..."), so a caller can read it.
# The demo, the tests and docs/SECURITY.md use this one script; a production
# broker uses deploy/mosquitto.conf, which has the same directives.
set -euo pipefail
. "$(dirname "$0")/pki.sh"

dir=""; port=""; tls_port=""; mtls_port=""; cert_port=""; claim_port=""; bind="127.0.0.1"; pki=""
admin_user="thingif-hub"; admin_password=""; persistence=false; server_name="localhost"
no_plugin=false; bootstrap_user=""; bootstrap_password=""
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --tls-port) tls_port=$2; shift 2 ;;
    --mtls-port) mtls_port=$2; shift 2 ;;
    --cert-port) cert_port=$2; shift 2 ;;
    --claim-port) claim_port=$2; shift 2 ;;
    --bind) bind=$2; shift 2 ;;
    --pki) pki=$2; shift 2 ;;
    --admin-user) admin_user=$2; shift 2 ;;
    --admin-password) admin_password=$2; shift 2 ;;
    --persistence) persistence=true; shift ;;
    --server-name) server_name=$2; shift 2 ;;
    --no-plugin) no_plugin=true; shift ;;
    --bootstrap-user) bootstrap_user=$2; shift 2 ;;
    --bootstrap-password) bootstrap_password=$2; shift 2 ;;
    -*) echo "make-broker-config: unknown option $1" >&2; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
[ -n "$dir" ] && [ -n "$port" ] || { echo "usage: make-broker-config.sh DIR --port P [options]" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pki=${pki:-$dir/pki}
mkdir -p "$pki"
pki=$(cd "$pki" && pwd)

[ -z "$bootstrap_user" ] || $no_plugin || { echo "make-broker-config: --bootstrap-user needs --no-plugin" >&2; exit 2; }
[ -z "$bootstrap_user" ] || [ -n "$bootstrap_password" ] \
  || { echo "make-broker-config: --bootstrap-user needs --bootstrap-password" >&2; exit 2; }
plugin=""
for p in /usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so /usr/lib/aarch64-linux-gnu/mosquitto_dynamic_security.so \
         /usr/lib/mosquitto_dynamic_security.so /usr/local/lib/mosquitto_dynamic_security.so \
         /usr/lib/"$(uname -m)"-linux-gnu/mosquitto_dynamic_security.so; do
  [ -f "$p" ] && { plugin=$p; break; }
done
$no_plugin || [ -n "$plugin" ] || { echo "make-broker-config: mosquitto_dynamic_security.so not found (Debian: package mosquitto)" >&2; exit 1; }

# The PKI: made once, then reused (a lock keeps parallel callers apart).
if [ -n "$tls_port$mtls_port$cert_port$claim_port" ]; then
  (
    flock 9
    if [ ! -s "$pki/client.crt" ]; then
      cd "$pki"
      umask 077
      pki_ca ca "thingif test CA"
      pki_leaf server "$server_name" "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:$server_name\nextendedKeyUsage=serverAuth"
      # The broker may run as another user: it must read its own key.
      chmod 0640 server.key
      # Last: client.crt says the set is complete.
      pki_leaf client "thingif test device" "extendedKeyUsage=clientAuth"
    fi
  ) 9>"$pki/.lock"
fi
# The things CA (--cert-port) and the claims CA (--claim-port): two CAs, so
# that a thing's certificate is refused on the claim listener (where a
# client chooses its client ID) and a claim certificate on the things'.
if [ -n "$cert_port$claim_port" ]; then
  (
    flock 9
    cd "$pki"
    umask 077
    for ca in ${cert_port:+things} ${claim_port:+claims}; do
      [ -s "$ca-ca.crt" ] || pki_ca "$ca-ca" "thingif $ca CA"
    done
  ) 9>"$pki/.lock"
  # The first CRL: empty, valid 10 years (the hub's, valid 7 days and
  # re-signed daily, replaces it; OpenSSL takes the later thisUpdate). Kept
  # when present: the hub's may list revoked certificates.
  if [ ! -s "$dir/things-crl.pem" ]; then
    gen=$(mktemp -d)
    : > "$gen/index.txt"
    echo 01 > "$gen/crlnumber"
    printf '[ca]\ndefault_ca = things\n[things]\ndatabase = %s/index.txt\ncrlnumber = %s/crlnumber\ndefault_md = sha256\ndefault_crl_days = 3650\n' \
      "$gen" "$gen" > "$gen/ca.cnf"
    openssl ca -batch -gencrl -config "$gen/ca.cnf" -cert "$pki/things-ca.crt" -keyfile "$pki/things-ca.key" \
      -out "$dir/things-crl.pem.tmp" 2>"$gen/log" \
      || { cat "$gen/log" >&2; rm -rf "$gen"; echo "make-broker-config: cannot make the things CRL" >&2; exit 1; }
    rm -rf "$gen"
    chmod 0644 "$dir/things-crl.pem.tmp"
    mv "$dir/things-crl.pem.tmp" "$dir/things-crl.pem"
  fi
fi
# One acl_file (mosquitto reads one, for every listener), when there is a
# certificate listener, a claim listener or no plugin. The things' patterns: a thing's client ID and username are
# its mqttTopic, the CN of its certificate; the same rules as the hub gives
# a thing with a password (BrokerAdmin.thingACLs): read its command topic,
# its replies and its configuration; write its requests and its status;
# and a gateway's two: read its end nodes' commands, write their statuses.
# mosquitto 2.0.11 asks this file whenever the plugin has no rule of its
# own for a client (the plugin's default deny defers), and the file allows
# every subscription; so every role the hub makes ends in a deny of the
# rest (BrokerAdmin.denyTheRest) and the plugin decides for its clients.
# A claim certificate (thingif-hub claim-certificate, the claims CA, the
# claim listener) is a certificate client too: it writes only
# c/{CN}/{its client ID}/onboardings and reads only c/{CN}/{its client ID}/resp
# (mosquitto refuses pattern rules to a client ID or username with + or #;
# one with / yields topics no answer uses). Its client ID is its own (the
# claim listener has no use_username_as_clientid), so devices sharing a
# claim certificate stay apart. It also matches the things' patterns on
# p/{CN}/..., where nothing is answered (the hub drops requests whose
# client ID is a claim name).
# Without the plugin, the file also holds the rules it would hold for the
# hub (role thingif-hub) and the bootstrap identity
# (BrokerAdmin.onboardingACLs); a bootstrap client reads only the replies
# to its own client ID.
acl=""
if [ -n "$cert_port$claim_port" ] || $no_plugin; then
  acl=$dir/acl
  {
    if [ -n "$cert_port$claim_port" ]; then
      echo "# Things with a certificate (CN = mqttTopic = username, use_identity_as_username)."
      echo "pattern read %u"
      echo "pattern read p/%u/resp"
      echo "pattern read p/%u/config"
      echo "pattern write p/%u/status"
      echo "pattern write p/%u/thing-if/#"
      echo "pattern write p/%u/api/#"
      echo "# A gateway's end nodes (docs/GATEWAYS.md §4.3) are no pattern: a pattern knows no"
      echo "# layout, and would let every thing certificate publish retained end-node statuses."
      echo "# thingif-hub --broker-acl THIS-FILE gives each gateway with a certificate its two"
      echo "# rules, as a user of its own, in a section it keeps at the end of this file."
      echo "# Claim certificates (CN = claim.APPID.BATCH, fleet provisioning, the claim"
      echo "# listener): one onboarding request and its answer, under the CN and the client's"
      echo "# own ID, so that devices sharing a claim certificate read no other's answer."
      echo "# Thing certificates match these too (their client ID is their CN); the hub"
      echo "# refuses any CN that is not one of its app's claims."
      echo "pattern write c/%u/%c/onboardings"
      echo "pattern read c/%u/%c/resp"
    fi
    if $no_plugin; then
      echo "# Bootstrap clients read the replies to their own client ID."
      echo "pattern read p/%c/resp"
      echo
      echo "user $admin_user"
      echo "topic readwrite #"
      if [ -n "$bootstrap_user" ]; then
        echo
        echo "user $bootstrap_user"
        echo "topic write p/+/thing-if/apps/$bootstrap_user/onboardings"
        echo "topic write p/+/api/apps/$bootstrap_user/installations"
        echo "topic write p/+/api/apps/$bootstrap_user/installations/+/mqtt-endpoint"
      fi
    fi
  } > "$acl"
  chmod 0644 "$acl"
fi

if [ -z "$admin_password" ]; then
  admin_password=$(openssl rand -hex 16)
  echo "admin-password=$admin_password"
fi
rm -f "$dir/dynamic-security.json" "$dir/passwd"
if $no_plugin; then
  mosquitto_passwd -c -b "$dir/passwd" "$admin_user" "$admin_password" 2>/dev/null
  [ -z "$bootstrap_user" ] || mosquitto_passwd -b "$dir/passwd" "$bootstrap_user" "$bootstrap_password" 2>/dev/null
  chmod 0600 "$dir/passwd"
else
  mosquitto_ctrl dynsec init "$dir/dynamic-security.json" "$admin_user" "$admin_password" >/dev/null
  # The hub's client also publishes commands, configurations and replies: the
  # role "thingif-hub" (as `mosquitto_ctrl dynsec createRole thingif-hub`,
  # `addRoleACL thingif-hub publishClientSend '#' allow` and
  # `addClientRole <admin> thingif-hub` would make it on a running broker).
  python3 - "$dir/dynamic-security.json" "$admin_user" <<'PY'
import json, sys
path, admin = sys.argv[1], sys.argv[2]
with open(path) as f:
    d = json.load(f)
d["roles"].append({"rolename": "thingif-hub", "acls": [
    {"acltype": "publishClientSend", "topic": "#", "priority": 0, "allow": True},
    {"acltype": "subscribePattern", "topic": "#", "priority": 0, "allow": True}]})
for c in d["clients"]:
    if c["username"] == admin:
        c["roles"].append({"rolename": "thingif-hub"})
with open(path, "w") as f:
    json.dump(d, f, indent=2)
PY
  chmod 0600 "$dir/dynamic-security.json"
fi

{
  echo "# thingif: secured broker (see docs/SECURITY.md). Made by deploy/make-broker-config.sh."
  echo "per_listener_settings false"
  echo "allow_anonymous false"
  if $no_plugin; then
    echo "password_file $dir/passwd"
  else
    echo "plugin $plugin"
    echo "plugin_opt_config_file $dir/dynamic-security.json"
  fi
  [ -z "$acl" ] || echo "acl_file $acl"
  echo "max_packet_size 1048576"
  echo "# Commands and replies are small: send each at once (no Nagle delay)."
  echo "set_tcp_nodelay true"
  if [ "$(id -u)" -eq 0 ]; then
    # Run by root (CI, a container): mosquitto would switch to the user
    # "mosquitto", which cannot read this private folder. A production
    # broker (deploy/mosquitto.conf) runs as "mosquitto" and owns its files.
    echo "user root"
  fi
  if $persistence; then
    echo "persistence true"
    echo "persistence_location $dir/"
    echo "autosave_interval 1800"
  else
    echo "persistence false"
  fi
  # thingif-hub --broker-pid-file sends this process SIGHUP after writing
  # the things' CRL (--thing-crl): mosquitto then reads its crlfile again.
  [ -z "$cert_port" ] || echo "pid_file $dir/mosquitto.pid"
  echo "log_dest stdout"
  echo "log_type error"
  echo "log_type warning"
  echo "log_type notice"
  echo "log_type information"
  echo
  echo "# Plain MQTT, on $bind only."
  echo "listener $port $bind"
  if [ -n "$tls_port" ]; then
    echo
    echo "# TLS: the server is verified by its certificate."
    echo "listener $tls_port $bind"
      echo "cafile $pki/ca.crt"
    echo "certfile $pki/server.crt"
    echo "keyfile $pki/server.key"
    echo "tls_version tlsv1.2"
  fi
  if [ -n "$mtls_port" ]; then
    echo
    echo "# Mutual TLS: the client must present a certificate signed by the CA."
    echo "listener $mtls_port $bind"
      echo "cafile $pki/ca.crt"
    echo "certfile $pki/server.crt"
    echo "keyfile $pki/server.key"
    echo "require_certificate true"
    echo "tls_version tlsv1.2"
  fi
  if [ -n "$cert_port" ]; then
    echo
    echo "# Things with a certificate from the hub's things CA: the certificate's"
    echo "# CN (the thing's mqttTopic) is the username and the client ID, whatever"
    echo "# client ID the thing sends (so no certificate takes over another thing's"
    echo "# session); no password, no record."
    echo "listener $cert_port $bind"
    echo "cafile $pki/things-ca.crt"
    echo "certfile $pki/server.crt"
    echo "keyfile $pki/server.key"
    echo "require_certificate true"
    echo "use_identity_as_username true"
    echo "use_username_as_clientid true"
    echo "# Certificates of deleted things: written by thingif-hub --thing-crl."
    echo "crlfile $dir/things-crl.pem"
    echo "tls_version tlsv1.2"
  fi
  if [ -n "$claim_port" ]; then
    echo
    echo "# Claim certificates (fleet provisioning) from the claims CA, and only"
    echo "# those: the CN (claim.APPID.BATCH) is the username; the client ID is the"
    echo "# device's own (random), so that devices sharing a claim certificate keep"
    echo "# their sessions and answers apart (c/%u/%c/...). No thing certificate"
    echo "# connects here, where it could choose another thing's client ID."
    echo "listener $claim_port $bind"
    echo "cafile $pki/claims-ca.crt"
    echo "certfile $pki/server.crt"
    echo "keyfile $pki/server.key"
    echo "require_certificate true"
    echo "use_identity_as_username true"
    echo "tls_version tlsv1.2"
  fi
  echo
} > "$dir/mosquitto.conf"
