#!/usr/bin/env bash
# Tiered storage end to end with the real `aerostream` binary and librdkafka
# (confluent-kafka): S3 (moto) with 300 MB, GCS (object_store's GCS client
# against moto's XML API), Azure Blob (Azurite) and the local folder with
# 40 MB each; then the fault tests (store unreachable for a minute, full local
# disk budget, the S3 server stopped and started again); `aerostream
# bucket check` with the start-up lifecycle warning against moto (about 10 s);
# a compacted topic whose objects in S3 shrink as the leader replaces
# them by compacted copies (about 15 s); the cost report's request
# counts against moto's request recorder (about 30 s); and three agents
# sharing one bucket with packed segments, the leader killed and retention
# emptying the bucket (about 60 s).
# Each test starts the servers it needs on free ports and stops them.
# Needs: pip -r tests/requirements.txt (confluent-kafka, moto[server], boto3,
# pytest); npm install in tests/js (azurite).
# Bounded: about 3-5 minutes on 2 cores once the binary is built.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

cargo build -p agent --bin aerostream --features fault-injection
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"

if ! python3 -c "import confluent_kafka, boto3, pytest, xdist" 2>/dev/null || ! command -v moto_server >/dev/null; then
    echo "python packages missing: installing tests/requirements.txt" >&2
    python3 -m pip install -q -r tests/requirements.txt
fi
if [ ! -x tests/js/node_modules/.bin/azurite-blob ] && ! command -v azurite-blob >/dev/null; then
    (cd tests/js && npm install --no-audit --no-fund --silent)
fi

export AEROSTREAM_TIERING_S3_MB="${AEROSTREAM_TIERING_S3_MB:-300}"
export AEROSTREAM_TIERING_MB="${AEROSTREAM_TIERING_MB:-40}"
echo "== tiering end to end (S3 ${AEROSTREAM_TIERING_S3_MB} MB; GCS, Azure, local ${AEROSTREAM_TIERING_MB} MB each)"
# two files at a time: the fault tests mostly wait on a stopped or stalled
# object store while the end-to-end test moves its data
timeout 1500 python3 -m pytest tests/tiering -q -p no:warnings -p no:cacheprovider \
    -n 2 --dist loadfile --durations=12
