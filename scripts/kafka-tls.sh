#!/usr/bin/env bash
# Issues a certificate for an agent's Kafka listener from a CA of its own,
# for deployments that bring no certificate (the ansible role, the
# container's start script, or by hand for scripts/run.sh):
#
#   scripts/kafka-tls.sh --out DIR --name NAME --host HOST [--host HOST ...]
#   scripts/kafka-tls.sh --out DIR --ca-only
#
# DIR/ca.pem and DIR/ca.key (owner-only) are made on first use and reused
# after; DIR/NAME.pem and DIR/NAME.key (owner-only) name every HOST (a DNS
# name or an IP address) in their subject alternative names. An existing
# certificate for the same names is kept, so a second run changes nothing;
# each file written is printed as "wrote FILE". Clients trust DIR/ca.pem.
# Needs: openssl 1.1.1 or later.
set -euo pipefail
umask 077

out="" name="" ca_only="" hosts=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:?--out needs a folder}; shift 2 ;;
        --name) name=${2:?--name needs a name}; shift 2 ;;
        --host) hosts+=("${2:?--host needs a name or an address}"); shift 2 ;;
        --ca-only) ca_only=yes; shift ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "kafka-tls.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
    esac
done
[ -n "$out" ] || { echo "kafka-tls.sh: --out DIR is required" >&2; exit 2; }
if [ -z "$ca_only" ]; then
    if [ -z "$name" ] || [ ${#hosts[@]} -eq 0 ]; then
        echo "kafka-tls.sh: --name and at least one --host are required" >&2
        exit 2
    fi
    case "$name" in */*|.*) echo "kafka-tls.sh: --name must be a plain file name" >&2; exit 2 ;; esac
fi
command -v openssl >/dev/null || { echo "kafka-tls.sh: openssl is not installed" >&2; exit 1; }

mkdir -p "$out"
conf=$(mktemp)
trap 'rm -f "$conf" "$out"/.issue.*' EXIT
cat >"$conf" <<'CONF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = $ENV::AEROSTREAM_TLS_CN
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = $ENV::AEROSTREAM_TLS_SAN
CONF
# every variable the file names must be set whichever section a command reads
export AEROSTREAM_TLS_SAN="DNS:unused" AEROSTREAM_TLS_CN="AeroStream"
# openssl's progress on stderr is noise; its errors are shown when it fails
quiet() { "$@" 2>"$out/.issue.err" || { cat "$out/.issue.err" >&2; return 1; }; }

if [ ! -s "$out/ca.pem" ] || [ ! -s "$out/ca.key" ]; then
    AEROSTREAM_TLS_CN="AeroStream Kafka CA" quiet openssl req -x509 -new -config "$conf" -extensions ca \
        -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
        -keyout "$out/.issue.ca.key" -out "$out/.issue.ca.pem"
    chmod 600 "$out/.issue.ca.key"
    chmod 644 "$out/.issue.ca.pem"
    mv "$out/.issue.ca.key" "$out/ca.key"
    mv "$out/.issue.ca.pem" "$out/ca.pem"
    echo "wrote $out/ca.pem"
    echo "wrote $out/ca.key"
fi
[ -z "$ca_only" ] || exit 0

# the names, each once, in the order given: what the certificate must carry
san=""
declare -A seen=()
for h in "${hosts[@]}"; do
    h=${h#[}; h=${h%]}
    if [ -z "$h" ] || [ -n "${seen[$h]:-}" ]; then continue; fi
    seen[$h]=1
    if [[ $h =~ ^[0-9.]+$ || $h == *:* ]]; then san="$san,IP:$h"; else san="$san,DNS:$h"; fi
done
san=${san#,}

if [ -s "$out/$name.pem" ] && [ -s "$out/$name.key" ] && [ "$(cat "$out/$name.names" 2>/dev/null)" = "$san" ] \
    && openssl verify -CAfile "$out/ca.pem" "$out/$name.pem" >/dev/null 2>&1 \
    && openssl x509 -checkend 2592000 -noout -in "$out/$name.pem" >/dev/null 2>&1; then
    exit 0 # the same names, from this CA, valid for 30 days more: keep it
fi
AEROSTREAM_TLS_CN=${hosts[0]} quiet openssl req -new -config "$conf" \
    -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$out/.issue.key" -out "$out/.issue.csr"
AEROSTREAM_TLS_SAN=$san quiet openssl x509 -req -in "$out/.issue.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 825 -extfile "$conf" -extensions server \
    -out "$out/.issue.pem"
chmod 600 "$out/.issue.key"
chmod 644 "$out/.issue.pem"
mv "$out/.issue.key" "$out/$name.key"
mv "$out/.issue.pem" "$out/$name.pem"
printf '%s\n' "$san" >"$out/$name.names"
echo "wrote $out/$name.pem"
echo "wrote $out/$name.key"
