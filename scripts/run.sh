#!/usr/bin/env bash
# Builds and runs a single-node AeroStream broker on its embedded defaults:
# Kafka on 127.0.0.1:9092, data (log, metastore, object store) under ./data.
# Extra arguments are passed to `aerostream serve` (see `--help`).
# For trying things out: plaintext and without logins, so it listens on the
# loopback address only, and says so when it starts. docs/security.md turns
# security on; the deployments (terraform/, ansible/, the Dockerfile) do by
# default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --build-only
# setup.sh may just have installed Rust under ~/.cargo.
if ! command -v cargo >/dev/null 2>&1; then export PATH="$HOME/.cargo/bin:$PATH"; fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --locked -p agent --bin aerostream
secured=""
for arg in "$@"; do
    case "$arg" in --sasl-mechanisms*|--kafka-tls-cert*|--config*) secured=yes ;; esac
done
if [ -z "$secured" ] && [ -z "${AEROSTREAM_SASL_MECHANISMS:-}${AEROSTREAM_KAFKA_TLS_CERT:-}${AEROSTREAM_CONFIG:-}" ]; then
    cat >&2 <<'NOTE'
aerostream: plaintext and no logins, on 127.0.0.1 unless told otherwise (Kafka 9092,
native 9091, HTTP 9001): anyone on this machine can read, write and delete.
For trying things out. To turn security on, give it TLS and SCRAM logins, e.g.
  scripts/run.sh --kafka-tls-cert server.pem --kafka-tls-key server.key \
      --sasl-mechanisms SCRAM-SHA-512,SCRAM-SHA-256 --admin-user admin:PASSWORD
(docs/security.md; the REST API and console then need the same logins).
NOTE
fi
exec "$CARGO_TARGET_DIR/release/aerostream" serve "$@"
