#!/usr/bin/env bash
# Gateway: bounded libFuzzer runs of Kafka request decoding and dispatch
# (fuzz/fuzz_targets/kafka_request.rs) and of native-protocol frames
# (fuzz/fuzz_targets/native_request.rs; both share one instrumented build),
# then a longer run of the property test that throws random frames at the
# dispatcher.
# The instrumented build and its flags: fuzz-env.sh.
# Knobs: FUZZ_SECONDS (default 60), NATIVE_FUZZ_SECONDS (default 45),
# PROPTEST_CASES (default 2000).
set -euo pipefail
cd "$(dirname "$0")/../.."

FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
NATIVE_FUZZ_SECONDS="${NATIVE_FUZZ_SECONDS:-45}"
PROPTEST_CASES="${PROPTEST_CASES:-2000}"

# shellcheck source=scripts/ci/fuzz-env.sh
source scripts/ci/fuzz-env.sh
fuzz_env
corpus="$CARGO_TARGET_DIR/corpus/kafka_request"
mkdir -p "$corpus"
# seeds for the SASL inputs (see the target): a SCRAM first message for the
# fixture's user, a PLAIN token and an OAUTHBEARER initial response
printf 'SASL\002n,,n=fuzz,r=abc' > "$corpus/seed-sasl-scram"
printf 'SASL\000\000fuzz\000fuzz-password' > "$corpus/seed-sasl-plain"
printf 'SASL\003n,,\001auth=Bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJmdXp6In0.c2ln\001\001' > "$corpus/seed-sasl-oauthbearer"
echo "== cargo fuzz run kafka_request for ${FUZZ_SECONDS}s"
cargo fuzz run "${FUZZ_BUILD_FLAGS[@]}" kafka_request "$corpus" -- \
    -max_total_time="${FUZZ_SECONDS}" -rss_limit_mb=2048 -print_final_stats=1
native_corpus="$CARGO_TARGET_DIR/corpus/native_request"
mkdir -p "$native_corpus"
echo "== cargo fuzz run native_request for ${NATIVE_FUZZ_SECONDS}s"
cargo fuzz run "${FUZZ_BUILD_FLAGS[@]}" native_request "$native_corpus" -- \
    -max_total_time="${NATIVE_FUZZ_SECONDS}" -rss_limit_mb=2048 -print_final_stats=1

fuzz_env_done
echo "== dispatcher property test with PROPTEST_CASES=${PROPTEST_CASES}"
# the workspace build of the suite's cargo test step, so nothing is rebuilt
PROPTEST_CASES="${PROPTEST_CASES}" cargo test --workspace --locked --features agent/fault-injection --lib random_frames_never_panic_the_dispatcher
