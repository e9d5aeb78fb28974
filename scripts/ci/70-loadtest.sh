#!/usr/bin/env bash
# CI: a short load-test run (about 20 s of traffic) against the real
# `aerostream` binary through librdkafka. Fails when consumers did not
# receive every acknowledged message intact, or on any client error.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh

target_dir=${CARGO_TARGET_DIR:-$root/target}
# Debug profile: reuses what `cargo test --workspace` already compiled.
cargo build -p agent -p loadtest --features agent/fault-injection
aerostream=$target_dir/debug/aerostream
loadtest=$target_dir/debug/loadtest

work=$(mktemp -d "${TMPDIR:-/tmp}/ci-loadtest.XXXXXX")
pid=
cleanup() {
    [ -n "$pid" ] && stop_pid "$pid"
    rm -rf "$work"
}
trap cleanup EXIT

port=$(free_port)
"$aerostream" serve --data-dir "$work/data" --kafka-addr "127.0.0.1:$port" \
    --advertised-kafka-addr "127.0.0.1:$port" --http-addr "127.0.0.1:$(free_port)" \
    --native-addr "127.0.0.1:$(free_port)" --shards 1 >"$work/broker.log" 2>&1 &
pid=$!
if ! wait_for_port "$port" "$pid" 60; then
    cat "$work/broker.log" >&2
    exit 1
fi

set +e
timeout 300 "$loadtest" run --workload loadtest/workloads/ci-smoke.yaml \
    --bootstrap "127.0.0.1:$port" --broker-label aerostream --broker-pid "$pid" \
    --json "$work/result.json" --progress 5s --strict
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
    echo "loadtest failed (exit $rc); broker log tail:" >&2
    tail -n 50 "$work/broker.log" >&2
    exit "$rc"
fi
echo "70-loadtest: ok"
