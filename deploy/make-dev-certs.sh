#!/usr/bin/env bash
# Makes a development CA and one cluster certificate for gradsync's mutual TLS:
#   DIR/ca.pem       the cluster CA certificate (--tls_ca on every process)
#   DIR/ca-key.pem   its key (keep it off the cluster; signs more certs)
#   DIR/cert.pem     a certificate with SAN DNS:gradsync, for server and client
#                    use (--tls_cert)
#   DIR/key.pem      its key (--tls_key)
# Keys are written 0600. Every gradsync channel expects the name "gradsync"
# (not the dialled host), so the one certificate serves every process: any
# holder of a certificate signed by this CA is a cluster member (the cluster
# token is still required on every call). For production, sign one
# certificate per host with the same SAN from your own CA.
# Usage: bash deploy/make-dev-certs.sh DIR [DAYS]
set -euo pipefail
dir=${1:?usage: make-dev-certs.sh DIR [DAYS]}
days=${2:-365}
mkdir -p "$dir"
umask 077
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

openssl ecparam -name prime256v1 -genkey -noout -out "$dir/ca-key.pem"
openssl req -x509 -new -key "$dir/ca-key.pem" -sha256 -days "$days" \
  -subj "/CN=gradsync dev CA" -out "$dir/ca.pem" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/key.ec"
# PKCS#8, which every TLS stack reads.
openssl pkcs8 -topk8 -nocrypt -in "$tmp/key.ec" -out "$dir/key.pem"
openssl req -new -key "$dir/key.pem" -subj "/CN=gradsync" -out "$tmp/req.csr"
cat > "$tmp/ext.cnf" <<'EXT'
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:gradsync
EXT
openssl x509 -req -in "$tmp/req.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" \
  -CAcreateserial -CAserial "$tmp/ca.srl" -days "$days" -sha256 \
  -extfile "$tmp/ext.cnf" -out "$dir/cert.pem" 2>/dev/null
chmod 0600 "$dir/ca-key.pem" "$dir/key.pem"
chmod 0644 "$dir/ca.pem" "$dir/cert.pem"
openssl verify -CAfile "$dir/ca.pem" "$dir/cert.pem" >/dev/null
echo "wrote $dir/{ca.pem,ca-key.pem,cert.pem,key.pem} (SAN DNS:gradsync, $days days)"
