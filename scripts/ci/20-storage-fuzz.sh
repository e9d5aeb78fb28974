#!/usr/bin/env bash
# Storage: bounded fuzz runs of batch validation and of recovery from
# damaged partition directories (cargo-fuzz / libFuzzer), then a longer
# property-test run of the same properties.
# The instrumented build and its flags: fuzz-env.sh.
# Knobs: FUZZ_SECONDS (per target, default 60), PROPTEST_CASES (default 600).
set -euo pipefail
cd "$(dirname "$0")/../.."

FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
PROPTEST_CASES="${PROPTEST_CASES:-600}"

# shellcheck source=scripts/ci/fuzz-env.sh
source scripts/ci/fuzz-env.sh
fuzz_env

for target in batch_validate segment_recovery; do
    echo "== cargo fuzz run ${target} for ${FUZZ_SECONDS}s"
    corpus="$CARGO_TARGET_DIR/corpus/${target}"
    mkdir -p "$corpus"
    cargo fuzz run "${FUZZ_BUILD_FLAGS[@]}" "${target}" "$corpus" -- \
        -max_total_time="${FUZZ_SECONDS}" -rss_limit_mb=2048 -print_final_stats=1
done

fuzz_env_done
echo "== property tests with PROPTEST_CASES=${PROPTEST_CASES}"
# the workspace build of the suite's cargo test step, so nothing is rebuilt
PROPTEST_CASES="${PROPTEST_CASES}" cargo test --workspace --locked --features agent/fault-injection --test bad_input
