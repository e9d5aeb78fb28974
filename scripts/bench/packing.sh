#!/usr/bin/env bash
# Object-store requests per GiB sealed with and without packed objects,
# counted from moto's own request log, with the release `aerostream`
# binary: 100 partitions written at a steady rate until more than 1 GiB is
# sealed, every record read back with the local log deleted, and retention
# emptying the bucket. See scripts/bench/packing.py for the settings
# (BENCH_PARTITIONS, BENCH_MB, BENCH_RATE_MB, BENCH_SEGMENT_BYTES,
# BENCH_MODES). Writes benchmarks/results/2026-12-07-vm/packing.txt (or
# BENCH_OUT). Needs what scripts/ci/60-tiering.sh needs (moto, confluent-kafka).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
out="${BENCH_OUT:-benchmarks/results/2026-12-07-vm/packing.txt}"
mkdir -p "$(dirname "$out")"

cargo build --release -p agent --bin aerostream
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/release/aerostream"

{
    echo "# command: scripts/bench/packing.sh"
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores shared by broker, producer/consumer and S3 server"
    echo "# commit $(git rev-parse --short HEAD), release build"
    python3 scripts/bench/packing.py
} 2>&1 | tee "$out"
