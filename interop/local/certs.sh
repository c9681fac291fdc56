#!/bin/bash
# certs.sh DIR [CHAINLEN]
# Writes a throwaway root CA and a certificate chain for the local interop runner:
#   DIR/ca.pem     the root (clients may trust it; most run with --insecure anyway)
#   DIR/cert.pem   leaf first, then the intermediates (CHAINLEN certificates in all)
#   DIR/priv.key   the leaf's key
# CHAINLEN (default 1) > 1 inserts CHAINLEN-1 intermediates, which makes the server's first
# flight large: the amplificationlimit case relies on that (the runner uses 9) so the server
# cannot fit its Handshake flight into 3x the client's Initial.
# The leaf names the runner's hosts plus localhost / 127.0.0.1 / ::1 for local runs.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 DIR [CHAINLEN]" >&2
  exit 2
fi
dir=$1
chainlen=${2:-1}
if ! [[ $chainlen =~ ^[1-9][0-9]*$ ]]; then
  echo "$0: CHAINLEN must be a positive integer" >&2
  exit 2
fi
mkdir -p "$dir"
work=$(mktemp -d "$dir/.certs.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Extensions: CA certificates may sign (pathlen unbounded so long chains verify); the leaf is
# a TLS server certificate with the names the clients connect to.
cat >"$work/ext.cnf" <<'CNF'
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[leaf_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = DNS:server, DNS:server4, DNS:server6, DNS:server46, DNS:localhost, IP:127.0.0.1, IP:::1
CNF

quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }; }

# Root (self-signed). RSA-2048 like the runner, so the chain has the runner's size.
quiet openssl req -x509 -sha256 -nodes -days 30 -newkey rsa:2048 \
  -keyout "$work/key_0.pem" -out "$work/cert_0.pem" \
  -subj "/O=Petrel local interop root CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign"

for ((i = 1; i <= chainlen; i++)); do
  if ((i == chainlen)); then
    subj="/O=Petrel local interop leaf/CN=server"
    ext=leaf_ext
  else
    subj="/O=Petrel local interop intermediate $i"
    ext=ca_ext
  fi
  quiet openssl req -new -nodes -newkey rsa:2048 -keyout "$work/key_$i.pem" \
    -out "$work/req_$i.csr" -subj "$subj"
  quiet openssl x509 -req -sha256 -days 30 -in "$work/req_$i.csr" \
    -CA "$work/cert_$((i - 1)).pem" -CAkey "$work/key_$((i - 1)).pem" \
    -set_serial "0x$(openssl rand -hex 8)" \
    -extfile "$work/ext.cnf" -extensions "$ext" -out "$work/cert_$i.pem"
done

cp "$work/cert_0.pem" "$dir/ca.pem"
cp "$work/key_$chainlen.pem" "$dir/priv.key"
: >"$dir/cert.pem.tmp"
for ((i = chainlen; i >= 1; i--)); do cat "$work/cert_$i.pem" >>"$dir/cert.pem.tmp"; done
mv "$dir/cert.pem.tmp" "$dir/cert.pem"
chmod 600 "$dir/priv.key"

# Self-check: the chain must verify against the root for the leaf's name.
untrusted=()
if ((chainlen > 1)); then untrusted=(-untrusted "$dir/cert.pem"); fi
quiet openssl verify -CAfile "$dir/ca.pem" "${untrusted[@]}" "$dir/cert.pem"
