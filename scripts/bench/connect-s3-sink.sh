#!/usr/bin/env bash
# Throughput of the Connect engine's object-storage sink (Parquet to S3 on
# moto) on one agent: scripts/bench/connect_s3_sink.py fills a topic with a
# Datagen source, then times the sink until every record is written.
# Writes result.json and broker.log to benchmarks/results/<date>-connect-s3-sink/.
#
# Usage: scripts/bench/connect-s3-sink.sh
# Environment: AEROSTREAM_BIN (default: the release build in
#   $CARGO_TARGET_DIR or ./target), RECORDS (500000), FLUSH_SIZE (50000),
#   OUT (the results folder).
# Needs: pip -r tests/requirements.txt (moto[server], boto3, pyarrow).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
aerostream=${AEROSTREAM_BIN:-$target/release/aerostream}
if [ ! -x "$aerostream" ]; then
    echo "building the release binary (cargo build --release -p agent)" >&2
    (cd "$repo" && cargo build --release -p agent --bin aerostream)
fi
out=${OUT:-$repo/benchmarks/results/$(date +%F)-connect-s3-sink}
python3 "$here/connect_s3_sink.py" --binary "$aerostream" --records "${RECORDS:-500000}" \
    --flush-size "${FLUSH_SIZE:-50000}" --out "$out"
