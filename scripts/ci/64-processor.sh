#!/usr/bin/env bash
# The stream processor (`aerostream process`) end to end, with the real
# binary and a real S3 server (moto): 200,000 JSON events on a 4-partition
# topic counted per key in 1-second tumbling windows into Parquet files,
# read back with pyarrow and compared with the counts computed from the
# events produced; then the processor killed with SIGKILL mid-run (and a
# data file no checkpoint committed left behind) and restarted: the output
# is still exact; the broker killed and restarted under a running
# processor (it reconnects; still exact); a bad pipeline file refused.
# Then ticks read by two processors at once: sliding windows with a filter
# and weighted averages, and session windows, each row equal to what the
# test computes from the ticks; late records in the late output; the
# --stats file's counts. The output-topic sink killed with SIGKILL and
# restarted: a read_committed reader sees every window once. The live
# view's WebSocket streams every closed window while a stalled client
# holds nothing up. Avro values in the Confluent wire format, their
# schemas (two versions) fetched from the agent's schema registry, and
# fixed big-endian binary layouts, each with values that cannot be used
# among them: per-window counts equal the records', the bad ones counted
# as skipped; an unreachable registry waited out, nothing skipped.
# About 80 seconds.
# Needs: pip -r tests/requirements.txt (confluent-kafka, moto[server],
# boto3, pyarrow, pytest, websocket-client, fastavro).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

cargo build -p agent --bin aerostream --features fault-injection
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
if ! python3 -c "import confluent_kafka, boto3, pyarrow, pytest, websocket, fastavro" 2>/dev/null || ! command -v moto_server >/dev/null; then
    echo "python packages missing: installing tests/requirements.txt" >&2
    python3 -m pip install -q -r tests/requirements.txt
fi
start=$(date +%s)
timeout 900 python3 -m pytest tests/processor -q -p no:warnings -p no:cacheprovider --durations=5
echo "tests/processor: $(( $(date +%s) - start )) s"
