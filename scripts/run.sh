#!/usr/bin/env bash
# Builds and runs a single-node AeroStream broker on its embedded defaults:
# Kafka on 127.0.0.1:9092, data (log, metastore, object store) under ./data.
# Extra arguments are passed to `aerostream serve` (see `--help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --build-only
# setup.sh may just have installed Rust under ~/.cargo.
if ! command -v cargo >/dev/null 2>&1; then export PATH="$HOME/.cargo/bin:$PATH"; fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --locked -p agent --bin aerostream
exec "$CARGO_TARGET_DIR/release/aerostream" serve "$@"
