#!/usr/bin/env bash
# The client tests that run beside scripts/ci/40-clients.sh (in the
# background, started by scripts/test.sh), so that the two halves share the
# wall clock: transactions — librdkafka's own transaction tests (0061, 0103,
# 0129, 0137; built once from source by scripts/librdkafka-tests.sh, about
# 4 minutes the first time) on one agent and on three, confluent-kafka's
# transactional producer on one agent and on three with a coordinator
# killed, the Rust SDK's native transactions on three agents, the transaction history checker with agents killed, and with network links cut, under load —
# the static-membership and elasticity tests, and compacted topics. About 9 minutes once built.
# Needs: npm, gcc/g++, make, haproxy (scripts/setup.sh); pip -r tests/requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

scripts/librdkafka-tests.sh
cargo build -p agent --bin aerostream --features fault-injection
# test_cluster_transactions.py runs the SDK's produce example (native
# transactions on three agents)
cargo build -p sdk --examples
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
if ! python3 -c "import confluent_kafka, pytest, xdist" 2>/dev/null; then
    echo "python client packages missing: installing tests/requirements.txt" >&2
    python3 -m pip install -q -r tests/requirements.txt
fi
timeout 1500 python3 -m pytest -q -p no:warnings -p no:cacheprovider -n 2 --dist loadfile --durations=12 \
    tests/clients/test_librdkafka_suite.py \
    tests/clients/test_librdkafka_cluster.py \
    tests/clients/test_transactions.py \
    tests/clients/test_cluster_transactions.py \
    tests/clients/test_txn_history.py \
    tests/clients/test_txn_network_cuts.py \
    tests/clients/test_static_membership.py \
    tests/clients/test_elasticity.py \
    tests/clients/test_compaction.py
