#!/usr/bin/env bash
# What broker-side schema validation costs produce latency: one AeroStream
# agent (pinned as side-by-side.sh pins it), the same framed 1 KiB records
# at 20k msg/s to a topic without validation (framed-20k) and to one with
# `confluent.value.schema.validation=true` (validated-20k), in turns, ROUNDS
# times each, on the same agent. The schema (id 1) is registered under both
# topics' subjects first. Writes the loadtest JSON and logs and a markdown
# table to benchmarks/results/<date>-schema-validation/.
#
# Usage: scripts/bench/schema-validation.sh
# Environment: AEROSTREAM_BIN, LOADTEST_BIN (default: release builds in
#   $CARGO_TARGET_DIR or ./target), ROUNDS (default 2), BROKER_CPUS (0),
#   LOADGEN_CPUS (1), OUT (the results folder).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/bench/lib.sh
source "$here/lib.sh"

target=${CARGO_TARGET_DIR:-$repo/target}
aerostream=${AEROSTREAM_BIN:-$target/release/aerostream}
loadtest=${LOADTEST_BIN:-$target/release/loadtest}
if [ ! -x "$aerostream" ] || [ ! -x "$loadtest" ]; then
    echo "building release binaries (cargo build --release -p agent -p loadtest)" >&2
    (cd "$repo" && cargo build --release -p agent --bin aerostream -p loadtest --bin loadtest)
fi
rounds=${ROUNDS:-2}
broker_cpus=${BROKER_CPUS:-0}
loadgen_cpus=${LOADGEN_CPUS:-1}
out=${OUT:-$repo/benchmarks/results/$(date +%F)-schema-validation}
mkdir -p "$out"
scratch=$(mktemp -d)
port=$(free_port)
registry=$(free_port)
trap 'stop_pid "${broker_pid:-}" 2>/dev/null; rm -rf "$scratch"' EXIT

(cd "$scratch" && AEROSTREAM_LOG=${AEROSTREAM_LOG:-warn} exec taskset -c "$broker_cpus" "$aerostream" serve \
    --data-dir "$scratch/data" --kafka-addr "127.0.0.1:$port" \
    --http-addr "127.0.0.1:$(free_port)" --native-addr "127.0.0.1:$(free_port)" \
    --schema-registry-addr "127.0.0.1:$registry" --shards 1) >>"$out/broker.log" 2>&1 &
broker_pid=$!
wait_for_port "$port" "$broker_pid" 60
wait_for_port "$registry" "$broker_pid" 60

schema='{"schema": "{\"type\":\"record\",\"name\":\"Reading\",\"fields\":[{\"name\":\"payload\",\"type\":\"bytes\"}]}"}'
declare -A topics=([framed-20k]=bench-framed [validated-20k]=bench-validated)

for ((r = 1; r <= rounds; r++)); do
    # each round's topics are new, with subjects of their own (schema id 1)
    for w in framed-20k validated-20k; do
        curl -sf -X POST -H 'Content-Type: application/vnd.schemaregistry.v1+json' --data "$schema" \
            "http://127.0.0.1:$registry/subjects/${topics[$w]}-$r-value/versions" >/dev/null
    done
    for w in framed-20k validated-20k; do
        run="$w-round$r"
        echo "=== $run ==="
        taskset -c "$loadgen_cpus" "$loadtest" run --workload "$repo/loadtest/workloads/$w.yaml" \
            --bootstrap "127.0.0.1:$port" --broker-label aerostream --broker-pid "$broker_pid" \
            --topic "${topics[$w]}-$r" --json "$out/$run.json" 2>&1 | tee "$out/$run.log"
    done
done

python3 - "$out" "$rounds" <<'EOF' | tee "$out/README.md"
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print("# Broker-side schema validation at 20k msg/s\n")
print("One agent (one shard, CPU 0), the load generator on CPU 1; 1 KiB records framed with schema id 1;")
print("`validated-20k` appends to a topic with `confluent.value.schema.validation=true`, `framed-20k`")
print("the same records to a topic without it.\n")
print("Command: `scripts/bench/schema-validation.sh`\n")
print("| run | published msg/s | publish p50 ms | p99 ms | p99.9 ms | end-to-end p99 ms | broker CPU % | verdict |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for r in range(1, rounds + 1):
    for w in ("framed-20k", "validated-20k"):
        p = os.path.join(out, f"{w}-round{r}.json")
        if not os.path.exists(p):
            print(f"| {w} round {r} | | | | | | | no result (see {w}-round{r}.log) |")
            continue
        d = json.load(open(p))
        pub, e2e = d["publish_latency"], d["end_to_end_latency"]
        print(f"| {w} round {r} | {d['publish']['msgs_per_sec']:,.0f} | {pub['p50_ms']:.3f} | {pub['p99_ms']:.3f} | "
              f"{pub['p999_ms']:.3f} | {e2e['p99_ms']:.3f} | {d['broker_resources']['cpu_percent']:.1f} | "
              f"{d['verdict']['message']} |")
EOF
