#!/usr/bin/env bash
# Metastore: a short benchmark run, as a smoke test that the figures can be
# produced (a debug build, so its numbers are not representative; the figures
# in the docs come from a release build:
# `cargo run --release -p metastore --features bench --bin metabench`).
# metabench and its dependencies (clap, anyhow, hdrhistogram,
# tracing-subscriber) sit behind the `bench` feature.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUST_LOG="${RUST_LOG:-off}" cargo run -q -p metastore --features bench --bin metabench -- --seconds 1 --writers 16 --trials 5 --heartbeat-ms 100
