#!/usr/bin/env bash
# Metastore: a short benchmark run, as a smoke test that the figures can be
# produced (the debug binary built by `cargo test` is reused, so its numbers
# are not representative; the figures in the docs come from a release build:
# `cargo run --release -p metastore --bin metabench`).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUST_LOG="${RUST_LOG:-off}" cargo run -q -p metastore --bin metabench -- --seconds 1 --writers 16 --trials 5 --heartbeat-ms 100
