#!/usr/bin/env bash
# Tiered-storage benchmark: produce/upload throughput and cold/warm reads
# through the release `aerostream` binary, first against moto S3 (started
# here), then against the local folder store for comparison (the uploader
# without an S3 server competing for the CPU), with the object-store
# requests the agent counted per GiB uploaded and read (PUT-class and
# GET-class, as S3 bills them; /metrics' aerostream_object_store_requests_total).
# Reports figures into
# benchmarks/results/2026-11-30-vm/tiering.txt (or BENCH_OUT); asserts
# nothing. Sizes: see scripts/bench/tiering.py (BENCH_MB, ...);
# BENCH_STORES picks the runs (default "s3 file").
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
out="${BENCH_OUT:-benchmarks/results/2026-11-30-vm/tiering.txt}"
mkdir -p "$(dirname "$out")"

cargo build --release -p agent --bin aerostream
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/release/aerostream"

{
    echo "# command: scripts/bench/tiering.sh   (BENCH_STORES=\"${BENCH_STORES:-s3 file}\" BENCH_MB=${BENCH_MB:-800} BENCH_RECORD_BYTES=${BENCH_RECORD_BYTES:-16384} BENCH_SEGMENT_BYTES=${BENCH_SEGMENT_BYTES:-4194304})"
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores shared by broker, producer/consumer and S3 server; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# commit $(git rev-parse --short HEAD), release build"
    for store in ${BENCH_STORES:-s3 file}; do
        echo
        echo "######## object store: $store"
        BENCH_STORE="$store" python3 scripts/bench/tiering.py
    done
} 2>&1 | tee "$out"
