#!/usr/bin/env bash
# The container's start script: `aerostream serve` with security on.
#
# - The admin user comes from AEROSTREAM_ADMIN_USER (NAME:PASSWORD) or, better,
#   from a file holding NAME:PASSWORD: AEROSTREAM_ADMIN_USER_FILE, by default
#   /run/secrets/aerostream-admin (a Docker or Kubernetes secret).
# - With it, Kafka clients log in with SCRAM (AEROSTREAM_SASL_MECHANISMS,
#   default SCRAM-SHA-512,SCRAM-SHA-256); the native protocol, the REST API
#   and the console need the same logins (/health and /metrics stay open).
# - The Kafka listener speaks TLS: AEROSTREAM_KAFKA_TLS_CERT and _KEY (mounted
#   files), or else a certificate issued at every start from a CA kept in
#   DATA_DIR/kafka-tls/ (clients trust DATA_DIR/kafka-tls/ca.pem), naming
#   localhost, 127.0.0.1, the container's host name and the advertised Kafka
#   host.
# - OAUTHBEARER needs both an issuer and an audience: a token the identity
#   provider issued for another service must not log in here.
# - Listening beyond the loopback address without any login configured is
#   refused, unless AEROSTREAM_INSECURE=true says that is intended.
#
# Settings are read as the agent reads them: flags, then the environment,
# then the TOML file of --config / AEROSTREAM_CONFIG. Other subcommands
# (`topic list`, `cluster-ca`, ...) run as they are.
set -euo pipefail

if [ $# -eq 0 ]; then set -- serve; fi
case "$1" in
    serve) shift ;;
    -*) ;;
    *) exec aerostream "$@" ;;
esac
args=("$@")

die() {
    echo "aerostream-entrypoint: $*" >&2
    exit 64
}

# setting FLAG ENV KEY DEFAULT: the value the agent will use
setting() {
    local flag=$1 env=$2 key=$3 default=$4 i a
    for ((i = 0; i < ${#args[@]}; i++)); do
        a=${args[$i]}
        if [ "$a" = "--$flag" ] && [ $((i + 1)) -lt ${#args[@]} ]; then
            printf '%s' "${args[$((i + 1))]}"
            return
        fi
        if [[ $a == --$flag=* ]]; then
            printf '%s' "${a#--"$flag"=}"
            return
        fi
    done
    if [ -n "${!env:-}" ]; then
        printf '%s' "${!env}"
        return
    fi
    local config
    config=$(setting_no_file config AEROSTREAM_CONFIG)
    if [ -n "$config" ] && [ -r "$config" ]; then
        local line
        line=$(grep -E "^[[:space:]]*${key}[[:space:]]*=" "$config" | tail -n1 || true)
        if [ -n "$line" ]; then
            line=${line#*=}
            line=$(printf '%s' "$line" | sed -E 's/^[[:space:]]*//; s/[[:space:]]*(#.*)?$//; s/^"(.*)"$/\1/')
            printf '%s' "$line"
            return
        fi
    fi
    printf '%s' "$default"
}
setting_no_file() { # the --config flag or its variable
    local flag=$1 env=$2 i a
    for ((i = 0; i < ${#args[@]}; i++)); do
        a=${args[$i]}
        if [ "$a" = "--$flag" ] && [ $((i + 1)) -lt ${#args[@]} ]; then printf '%s' "${args[$((i + 1))]}"; return; fi
        if [[ $a == --$flag=* ]]; then printf '%s' "${a#--"$flag"=}"; return; fi
    done
    printf '%s' "${!env:-}"
}
truthy() { case "${1,,}" in 1 | true | yes | on) return 0 ;; *) return 1 ;; esac; }
host_of() { # HOST:PORT, [V6]:PORT -> HOST
    local h=${1%:*}
    h=${h#[}
    printf '%s' "${h%]}"
}
loopback() {
    case "$1" in 127.* | ::1 | localhost) return 0 ;; *) return 1 ;; esac
}

insecure=""
if truthy "${AEROSTREAM_INSECURE:-false}"; then insecure=yes; fi

# The admin user, from a secret file when one is there.
admin=$(setting admin-user AEROSTREAM_ADMIN_USER admin_user "")
secret=${AEROSTREAM_ADMIN_USER_FILE:-/run/secrets/aerostream-admin}
if [ -z "$admin" ] && [ -r "$secret" ]; then
    admin=$(head -n1 "$secret" | tr -d '\r\n')
    [[ $admin == ?*:?* ]] || die "$secret must hold NAME:PASSWORD on its first line"
    export AEROSTREAM_ADMIN_USER="$admin"
elif [ -n "${AEROSTREAM_ADMIN_USER_FILE:-}" ] && [ -z "$admin" ]; then
    die "AEROSTREAM_ADMIN_USER_FILE=$AEROSTREAM_ADMIN_USER_FILE cannot be read"
fi

mechanisms=$(setting sasl-mechanisms AEROSTREAM_SASL_MECHANISMS sasl_mechanisms "")
client_ca=$(setting kafka-tls-client-ca AEROSTREAM_KAFKA_TLS_CLIENT_CA kafka_tls_client_ca "")
if [ -n "$admin" ] && [ -z "$mechanisms" ]; then
    mechanisms="SCRAM-SHA-512,SCRAM-SHA-256"
    export AEROSTREAM_SASL_MECHANISMS="$mechanisms"
fi

exposed=()
for l in "kafka-addr AEROSTREAM_KAFKA_ADDR kafka_addr 127.0.0.1:9092" \
    "native-addr AEROSTREAM_NATIVE_ADDR native_addr 127.0.0.1:9091" \
    "http-addr AEROSTREAM_HTTP_ADDR http_addr 127.0.0.1:9001"; do
    read -r flag env key default <<<"$l"
    addr=$(setting "$flag" "$env" "$key" "$default")
    if ! loopback "$(host_of "$addr")"; then exposed+=("$addr"); fi
done

if [ -z "$mechanisms" ] && [ -z "$client_ca" ]; then
    if [ ${#exposed[@]} -gt 0 ] && [ -z "$insecure" ]; then
        die "refusing to listen on ${exposed[*]} without logins: anyone who reaches these ports could read,
write and delete every topic and use the REST API and console. Give an admin user:
  docker run ... -v ./admin:/run/secrets/aerostream-admin:ro   (a file holding NAME:PASSWORD)
  or -e AEROSTREAM_ADMIN_USER_FILE=PATH, or -e AEROSTREAM_ADMIN_USER=NAME:PASSWORD;
or set AEROSTREAM_INSECURE=true to serve without logins on purpose (docs/deploy.md)."
    fi
    where=${exposed[*]:-}
    echo "aerostream-entrypoint: no logins and no TLS: anyone who reaches ${where:-the loopback address} can read, write and delete" >&2
    exec aerostream serve "$@"
fi

if [[ ${mechanisms^^} == *OAUTHBEARER* ]]; then
    issuer=$(setting sasl-oauthbearer-issuer AEROSTREAM_SASL_OAUTHBEARER_ISSUER sasl_oauthbearer_issuer "")
    audience=$(setting sasl-oauthbearer-audience AEROSTREAM_SASL_OAUTHBEARER_AUDIENCE sasl_oauthbearer_audience "")
    if { [ -z "$issuer" ] || [ -z "$audience" ]; } && [ -z "$insecure" ]; then
        die "OAUTHBEARER needs AEROSTREAM_SASL_OAUTHBEARER_ISSUER and AEROSTREAM_SASL_OAUTHBEARER_AUDIENCE:
without them a token the identity provider issued for any other service logs in here"
    fi
fi

cert=$(setting kafka-tls-cert AEROSTREAM_KAFKA_TLS_CERT kafka_tls_cert "")
if [ -z "$cert" ]; then
    data=$(setting data-dir AEROSTREAM_DATA_DIR data_dir ./data)
    advertised=$(setting advertised-kafka-addr AEROSTREAM_ADVERTISED_KAFKA_ADDR advertised_kafka_addr "")
    hosts=(--host localhost --host 127.0.0.1 --host "${HOSTNAME:-localhost}")
    if [ -n "$advertised" ]; then hosts+=(--host "$(host_of "$advertised")"); fi
    issue=${AEROSTREAM_KAFKA_TLS_ISSUER:-/usr/local/lib/aerostream/kafka-tls.sh}
    "$issue" --out "$data/kafka-tls" --name server "${hosts[@]}" >/dev/null
    export AEROSTREAM_KAFKA_TLS_CERT="$data/kafka-tls/server.pem" AEROSTREAM_KAFKA_TLS_KEY="$data/kafka-tls/server.key"
    echo "aerostream-entrypoint: Kafka over TLS with a certificate from $data/kafka-tls/ca.pem (give clients that file)" >&2
fi
echo "aerostream-entrypoint: logins required (${mechanisms:-mutual TLS}) on Kafka, native, the REST API and the console" >&2
exec aerostream serve "$@"
