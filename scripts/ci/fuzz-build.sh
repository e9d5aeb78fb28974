#!/usr/bin/env bash
# Builds every cargo-fuzz target once (fuzz/Cargo.toml: the storage and the
# gateway targets share one dependency tree), so the time-bounded runs of
# 20-storage-fuzz.sh and 41-gateway-fuzz.sh only run.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/ci/fuzz-env.sh
source scripts/ci/fuzz-env.sh
fuzz_env
cargo fuzz build "${FUZZ_BUILD_FLAGS[@]}"
