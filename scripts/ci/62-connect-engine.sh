#!/usr/bin/env bash
# AeroStream's built-in Connect engine through Kafka Connect's REST API, with
# the real binary and a real S3 server (moto): a Datagen source writes
# 10,000 records that the object-storage sink writes as Parquet (read back
# with pyarrow: each record exactly once), pause and resume, then on three
# agents the agent running the sink's task is killed and the task goes on
# on another (each record at least once, no gaps); the HTTP sink against a
# real HTTP server (retries, a refusal failing the task or going to the
# dead-letter topic); the PostgreSQL sink (upserts, replay, deletes) and
# source (incrementing and timestamp modes, restarts) against a real
# PostgreSQL the tests start themselves; the Avro and JSON Schema converters
# through the agent's schema registry (values decoded into the bucket,
# Datagen's Avro records read back with Confluent's AvroDeserializer);
# exactly-once source delivery with the task's agent killed. About 3
# minutes.
# Needs: pip -r tests/requirements.txt (confluent-kafka, moto[server],
# boto3, pyarrow, pytest), PostgreSQL's server (scripts/setup.sh installs
# Debian's postgresql).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

cargo build -p agent --bin aerostream --features fault-injection
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
if ! python3 -c "import confluent_kafka, boto3, pyarrow, pytest, xdist" 2>/dev/null || ! command -v moto_server >/dev/null; then
    echo "python packages missing: installing tests/requirements.txt" >&2
    python3 -m pip install -q -r tests/requirements.txt
fi
timeout 900 python3 -m pytest tests/connect_engine -q -p no:warnings -p no:cacheprovider \
    -n 2 --dist loadfile --durations=5
