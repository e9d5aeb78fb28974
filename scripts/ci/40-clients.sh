#!/usr/bin/env bash
# Real Kafka clients against the real `aerostream` binary: kcat (Debian's,
# librdkafka 2.0.2), confluent-kafka (librdkafka 2.16), kafka-python 3.0 and
# kafkajs 2.2.4 (and jsdom for the web console). Each test starts its own broker on free ports;
# test_cluster.py starts three and four agents forming one cluster (about
# 25 s); test_elasticity.py (run by 44-clients-beside.sh) adds a fourth agent under load and drains it;
# test_load_balancer.py puts haproxy in front of three agents (about 25 s);
# test_static_membership.py (also in 44-clients-beside.sh) restarts static group members on one agent,
# three, and three behind haproxy (about 60 s);
# test_network_partition.py runs agents in network namespaces (needs root);
# test_native.py drives the native protocol with the SDK's examples (and
# test_cluster.py native group members across agents); test_cli.py runs the
# admin command line (`aerostream topic|group|produce|consume|cluster`);
# test_observability.py checks the OTLP export against a receiver that
# decodes it with opentelemetry-proto, and the Grafana dashboard's queries
# against /metrics (about 10 s together); test_rest_api.py checks the REST
# admin API against what confluent-kafka produced and consumed;
# tests/js/console.test.js loads the web console in jsdom against the binary;
# test_tls.py, test_sasl.py and tests/js/kafkajs_security.test.js check TLS
# and SASL on the Kafka listener (about 2 minutes together).
# Needs: apt kcat haproxy openssl; pip -r tests/requirements.txt; npm install in tests/js.
# Bounded: about 4-5 minutes on 2 cores once the binary is built.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

cargo build -p agent --bin aerostream --features fault-injection
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
# the native protocol's clients in test_native.py: the SDK's examples
cargo build -p sdk --examples

if ! command -v kcat >/dev/null; then
    echo "kcat is missing: installing Debian's kcat" >&2
    apt-get install -y kcat >/dev/null
fi
if ! command -v haproxy >/dev/null && [ ! -x /usr/sbin/haproxy ]; then
    echo "haproxy is missing: installing Debian's haproxy (the load balancer of test_load_balancer.py)" >&2
    apt-get install -y haproxy >/dev/null
fi
if ! command -v openssl >/dev/null; then
    echo "openssl is missing: installing Debian's openssl (kafkajs_security.test.js makes its certificates with it)" >&2
    apt-get install -y openssl >/dev/null
fi
if ! python3 -c "import confluent_kafka, kafka, aiokafka, pytest, xdist, lz4, snappy, zstandard, opentelemetry.proto, cryptography, fastavro, jsonschema, google.protobuf" 2>/dev/null; then
    echo "python client packages missing: installing tests/requirements.txt" >&2
    python3 -m pip install -q -r tests/requirements.txt
fi
if [ ! -d tests/js/node_modules/kafkajs ] || [ ! -d tests/js/node_modules/jsdom ] \
    || [ ! -d tests/js/node_modules/@kafkajs/confluent-schema-registry ]; then
    (cd tests/js && npm install --no-audit --no-fund --silent)
fi

echo "== python clients (confluent-kafka, kafka-python, kcat)"
# the files scripts/ci/44-clients-beside.sh runs beside this one are left out;
# two files at a time (each test starts its own brokers on free ports, and
# most of a test's time is spent waiting on them)
timeout 900 python3 -m pytest tests/clients -q -p no:warnings -p no:cacheprovider \
    -n 2 --dist loadfile --durations=12 \
    --ignore=tests/clients/test_librdkafka_suite.py \
    --ignore=tests/clients/test_librdkafka_cluster.py \
    --ignore=tests/clients/test_transactions.py \
    --ignore=tests/clients/test_cluster_transactions.py \
    --ignore=tests/clients/test_txn_history.py \
    --ignore=tests/clients/test_txn_network_cuts.py \
    --ignore=tests/clients/test_static_membership.py \
    --ignore=tests/clients/test_elasticity.py \
    --ignore=tests/clients/test_compaction.py

echo "== kafkajs"
(cd tests/js && timeout 300 node --test --test-concurrency=1 kafkajs.test.js)
echo "== @kafkajs/confluent-schema-registry against the built-in schema registry"
(cd tests/js && timeout 180 node --test --test-concurrency=1 schema_registry.test.js)
echo "== kafkajs over TLS and SASL"
(cd tests/js && timeout 180 node --test --test-concurrency=1 kafkajs_security.test.js)
echo "== web console (jsdom running the console's scripts against the binary)"
(cd tests/js && timeout 120 node --test --test-concurrency=1 console.test.js)
