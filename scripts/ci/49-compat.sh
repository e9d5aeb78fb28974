#!/usr/bin/env bash
# The client compatibility matrix (tests/compat/matrix.py): the same
# scenarios (produce and consume, compression, idempotence, classic and
# KIP-848 groups, transactions, admin) with confluent-kafka, kafka-python,
# aiokafka, kcat and kafkajs, against AeroStream on one agent, on three, and
# against Apache Kafka 4.1.1 (scripts/kafka.sh, jars cached in
# ~/.cache/aerostream/m2) as the reference. Fails when a scenario fails on
# AeroStream but passes on Kafka, or fails on Kafka. Runs in the background
# beside the other suites (scripts/test.sh). About 4 minutes.
# Needs: java 17+ and mvn (Kafka), kcat, node with tests/js's node_modules,
# pip -r tests/requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

cargo build -p agent --bin aerostream --features fault-injection
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
if ! command -v kcat >/dev/null; then
    echo "kcat is missing: installing Debian's kcat" >&2
    apt-get install -y kcat >/dev/null
fi
if ! python3 -c "import confluent_kafka, kafka, aiokafka" 2>/dev/null; then
    echo "python client packages missing: installing tests/requirements.txt" >&2
    python3 -m pip install -q -r tests/requirements.txt
fi
if [ ! -d tests/js/node_modules/kafkajs ]; then
    (cd tests/js && npm install --no-audit --no-fund --silent)
fi
t0=$(date +%s)
timeout 1200 python3 tests/compat/matrix.py
echo "49-compat: matrix in $(( $(date +%s) - t0 ))s"
