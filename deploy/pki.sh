# SPDX-License-Identifier: Apache-2.0

# The test and demo PKI's two steps, sourced by deploy/make-broker-config.sh
# and deploy/cluster/make-cluster-config.sh, which run them in the PKI
# folder under its lock (flock), with umask 077. Every certificate is
# written whole or not at all (a .tmp, then a rename), so a file that exists
# is complete; keys stay 0600 unless the caller opens them.

# pki_ca NAME SUBJECT_CN: a P-256 CA valid ten years, NAME.key and NAME.crt (0644).
pki_ca() {
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$1.key" -out "$1.crt.tmp" \
    -days 3650 -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  chmod 0644 "$1.crt.tmp"
  mv "$1.crt.tmp" "$1.crt"
}

# pki_leaf NAME SUBJECT_CN EXTENSIONS: NAME.key and NAME.crt (0644), signed by
# ca.crt for ten years, with EXTENSIONS (openssl extfile lines, \n between).
pki_leaf() {
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$1.key" -out "$1.csr" \
    -subj "/CN=$2" 2>/dev/null
  printf '%b\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt.tmp" -days 3650 \
    -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
  chmod 0644 "$1.crt.tmp"
  mv "$1.crt.tmp" "$1.crt"
}
