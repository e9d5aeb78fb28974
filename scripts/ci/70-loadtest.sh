#!/usr/bin/env bash
# CI: short load-test runs against the real `aerostream` binary: ci-smoke
# through librdkafka (the Kafka wire, about 20 s of traffic), then a
# shorter ci-smoke through the Rust SDK (the native protocol over TCP and
# over QUIC).
# Fails when consumers did not receive every acknowledged message intact,
# on any client error, or when the native run's ledger shows a duplicate.
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
native_port=$(free_port)
"$aerostream" serve --data-dir "$work/data" --kafka-addr "127.0.0.1:$port" \
    --advertised-kafka-addr "127.0.0.1:$port" --http-addr "127.0.0.1:$(free_port)" \
    --native-addr "127.0.0.1:$native_port" --shards 1 >"$work/broker.log" 2>&1 &
pid=$!
if ! wait_for_port "$port" "$pid" 60 || ! wait_for_port "$native_port" "$pid" 60; then
    cat "$work/broker.log" >&2
    exit 1
fi

# smoke NAME ARGS...: one ci-smoke run; fails the step on a bad exit.
smoke() {
    local name=$1 rc start=$SECONDS
    shift
    set +e
    timeout 300 "$loadtest" run --workload loadtest/workloads/ci-smoke.yaml \
        --broker-label aerostream --broker-pid "$pid" \
        --json "$work/$name.json" --progress 5s --strict "$@"
    rc=$?
    set -e
    echo "70-loadtest: $name took $((SECONDS - start)) s"
    if [ "$rc" -ne 0 ]; then
        echo "loadtest ($name) failed (exit $rc); broker log tail:" >&2
        tail -n 50 "$work/broker.log" >&2
        exit "$rc"
    fi
}

smoke kafka --driver kafka --bootstrap "127.0.0.1:$port"
# Native TCP: shorter (the Kafka run already covered the broker's write and
# read paths at length); the point is the SDK's delivery ledger.
smoke native-tcp --driver native --bootstrap "aero://127.0.0.1:$native_port" \
    --warmup 2s --duration 8s
# Native QUIC (UDP, same port number), trusting the CA the agent wrote.
smoke native-quic --driver native --bootstrap "aero+quic://127.0.0.1:$native_port" \
    --native-tls-ca "$work/data/native-tls/ca.pem" --warmup 2s --duration 8s

# --strict fails on lost, corrupt, failed or unflushed messages; duplicates
# are not errors to it (at-least-once allows them), but nothing in these
# runs retries, so the native ledgers must be exact: every ack received once.
for way in native-tcp native-quic; do
    python3 - "$work/$way.json" "$way" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["delivery"]
print(f"{sys.argv[2]} ledger: {d['acked']} acked, {d['received']} received, "
      f"{d['lost']} lost, {d['duplicates']} duplicates, {d['received_unacked']} received unacked")
ok = d["acked"] > 0 and d["lost"] == 0 and d["duplicates"] == 0 \
    and d["received_unacked"] == 0 and d["received"] == d["acked"]
sys.exit(0 if ok else 1)
PY
done
echo "70-loadtest: ok in ${SECONDS} s"
