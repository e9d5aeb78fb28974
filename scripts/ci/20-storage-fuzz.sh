#!/usr/bin/env bash
# Storage: bounded fuzz runs of batch validation and of recovery from
# damaged partition directories (cargo-fuzz / libFuzzer), then a longer
# property-test run of the same properties.
#
# cargo-fuzz needs nightly-only compiler flags; on a stable toolchain
# RUSTC_BOOTSTRAP=1 enables them for this step only.
# Knobs: FUZZ_SECONDS (per target, default 60), PROPTEST_CASES (default 600).
set -euo pipefail
cd "$(dirname "$0")/../.."

FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
PROPTEST_CASES="${PROPTEST_CASES:-600}"

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "== installing cargo-fuzz (one-off, a few minutes)"
    cargo install cargo-fuzz --locked
fi

# Keep the instrumented build apart from the workspace build.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/fuzz"
export RUSTC_BOOTSTRAP=1

for target in batch_validate segment_recovery; do
    echo "== cargo fuzz run ${target} for ${FUZZ_SECONDS}s"
    corpus="$CARGO_TARGET_DIR/corpus/${target}"
    mkdir -p "$corpus"
    cargo fuzz run --fuzz-dir fuzz "${target}" "$corpus" -- \
        -max_total_time="${FUZZ_SECONDS}" -rss_limit_mb=2048 -print_final_stats=1
done

unset RUSTC_BOOTSTRAP
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR%/fuzz}"
echo "== property tests with PROPTEST_CASES=${PROPTEST_CASES}"
PROPTEST_CASES="${PROPTEST_CASES}" cargo test -p storage --test bad_input
