#!/usr/bin/env bash
# What failed logins cost the clients that are logged in: the produce p99 of
# a rate-limited loadtest run (small-20k: 20k msg/s of 1 KiB, acks=all)
# against one agent with SASL on, once alone and once while
# scripts/bench/bad_logins.py sends wrong-password logins to its Kafka port
# (SASL/PLAIN, 100/s: 100 clients, each retrying its own wrong password) and
# its HTTP port (Basic, 100/s, a new password each time). Each run gets a fresh
# agent. Prints both p99s and the agent's login counters; writes the loadtest
# results and logs to RESULTS_DIR.
#
# Usage: scripts/bench/bad-logins.sh [WORKLOAD]   (default: small-20k)
#
# The loadtest's clients log in with SCRAM-SHA-512 as the admin: they share
# 127.0.0.1 with the Kafka flood (librdkafka cannot pick its source address),
# whose PLAIN failures soon use up that address's allowance of failed
# password checks, and SCRAM checks no password on the agent.
#
# Environment:
#   AEROSTREAM_BIN, LOADTEST_BIN  binaries (default: release builds in the
#                   target dir when there are, else the debug ones; build
#                   them first: cargo build --release -p agent -p loadtest
#                   --features loadtest/tls: SCRAM needs librdkafka with OpenSSL)
#   WARMUP, DURATION  loadtest warm-up and measured time (default 5s, 30s)
#   KAFKA_RATE, HTTP_RATE  failed logins a second on each port (default 100)
#   HTTP_SOURCES    loopback addresses the HTTP logins come from in turn
#                   (default 1; e.g. 5000 to stay under every address's
#                   allowance, so the agent checks each guess: a guesser with
#                   many addresses, the worst case for its CPU)
#   BROKER_CPUS, LOADGEN_CPUS  taskset CPU lists (default 0 and 1; the flood
#                   runs on LOADGEN_CPUS too)
#   SHARDS          aerostream --shards (default 1)
#   RESULTS_DIR     default benchmarks/results/<date>-bad-logins
#   TMPDIR          where each run's agent keeps its data (about 700 MB at
#                   20k msg/s for 35 s; /dev/shm keeps it in memory)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh

workload=${1:-small-20k}
file=loadtest/workloads/$workload.yaml
[ -r "$file" ] || { echo "no workload $file" >&2; exit 1; }
target_dir=${CARGO_TARGET_DIR:-$root/target}
pick() {
    if [ -x "$target_dir/release/$1" ]; then echo "$target_dir/release/$1"; else echo "$target_dir/debug/$1"; fi
}
aerostream=${AEROSTREAM_BIN:-$(pick aerostream)}
loadtest=${LOADTEST_BIN:-$(pick loadtest)}
for b in "$aerostream" "$loadtest"; do
    [ -x "$b" ] || { echo "no binary $b: cargo build --release -p agent -p loadtest --features loadtest/tls" >&2; exit 1; }
done
broker_cpus=${BROKER_CPUS:-0}
loadgen_cpus=${LOADGEN_CPUS:-1}
[ "$(nproc)" -lt 2 ] && loadgen_cpus=${LOADGEN_CPUS:-0}
out=${RESULTS_DIR:-benchmarks/results/$(date +%Y-%m-%d)-bad-logins}
mkdir -p "$out"
password=bench-admin-pw

echo "aerostream: $aerostream"
echo "loadtest:   $loadtest"
echo "workload:   $workload, warm-up ${WARMUP:-5s}, measured ${DURATION:-30s}"

scratch=
broker_pid=
flood_pid=
cleanup() {
    [ -n "$flood_pid" ] && kill -TERM "$flood_pid" 2>/dev/null || true
    [ -n "$broker_pid" ] && stop_pid "$broker_pid"
    [ -n "$scratch" ] && rm -rf "$scratch"
}
trap cleanup EXIT

# metric NAME: its value on the agent's /metrics (0 when absent)
metric() {
    python3 - "$http_port" "$1" <<'EOF'
import sys, urllib.request
port, name = sys.argv[1], sys.argv[2]
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
print(next((l.split()[-1] for l in text.splitlines() if l.startswith(name + " ")), "0"))
EOF
}

# run LABEL FLOOD(0|1)
run() {
    local label=$1 flood=$2
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/bench-bad-logins.XXXXXX")
    kafka_port=$(free_port)
    http_port=$(free_port)
    (cd "$scratch" && AEROSTREAM_LOG=${AEROSTREAM_LOG:-warn} exec taskset -c "$broker_cpus" "$aerostream" serve \
        --data-dir "$scratch/data" --kafka-addr "127.0.0.1:$kafka_port" \
        --advertised-kafka-addr "127.0.0.1:$kafka_port" --http-addr "127.0.0.1:$http_port" \
        --native-addr "127.0.0.1:$(free_port)" --shards "${SHARDS:-1}" \
        --sasl-mechanisms SCRAM-SHA-512,PLAIN --admin-user "admin:$password") \
        >>"$out/$label-agent.log" 2>&1 &
    broker_pid=$!
    wait_for_port "$kafka_port" "$broker_pid" 60
    wait_for_port "$http_port" "$broker_pid" 60
    if [ "$flood" = 1 ]; then
        taskset -c "$loadgen_cpus" python3 scripts/bench/bad_logins.py \
            --kafka "127.0.0.1:$kafka_port" --http "127.0.0.1:$http_port" \
            --kafka-rate "${KAFKA_RATE:-100}" --http-rate "${HTTP_RATE:-100}" \
            --http-sources "${HTTP_SOURCES:-1}" >"$out/$label-flood.log" 2>&1 &
        flood_pid=$!
        sleep 5
    fi
    local before_failures before_refused before_iterations
    before_failures=$(metric aerostream_kafka_sasl_failures_total)
    before_refused=$(metric aerostream_login_password_checks_refused_total)
    before_iterations=$(metric aerostream_login_pbkdf2_iterations_total)
    local started=$SECONDS
    echo "=== $label ==="
    taskset -c "$loadgen_cpus" "$loadtest" run --workload "$file" \
        --bootstrap "127.0.0.1:$kafka_port" --broker-label "aerostream" --broker-pid "$broker_pid" \
        --client-config security.protocol=sasl_plaintext \
        --client-config sasl.mechanism=SCRAM-SHA-512 \
        --client-config sasl.username=admin --client-config "sasl.password=$password" \
        --warmup "${WARMUP:-5s}" --duration "${DURATION:-30s}" \
        --json "$out/$label.json" >"$out/$label.log" 2>&1 || echo "!!! $label: loadtest exited $?" | tee -a "$out/$label.log"
    grep -E "p99" "$out/$label.log" | tail -n 3
    local secs=$((SECONDS - started))
    if [ "$flood" = 1 ]; then
        local failures refused iterations
        failures=$(($(metric aerostream_kafka_sasl_failures_total) - before_failures))
        refused=$(($(metric aerostream_login_password_checks_refused_total) - before_refused))
        iterations=$(($(metric aerostream_login_pbkdf2_iterations_total) - before_iterations))
        kill -TERM "$flood_pid" 2>/dev/null || true
        wait "$flood_pid" 2>/dev/null || true
        flood_pid=
        echo "during the run (${secs}s): Kafka SASL failures $failures ($((failures / (secs > 0 ? secs : 1)))/s)," \
            "password checks refused unchecked $refused, PBKDF2 iterations run $iterations" | tee -a "$out/$label.log"
        tail -n 1 "$out/$label-flood.log" | tee -a "$out/$label.log"
    fi
    stop_pid "$broker_pid"
    broker_pid=
    rm -rf "$scratch"
    scratch=
}

run quiet 0
run bad-logins 1

python3 - "$out/quiet.json" "$out/bad-logins.json" <<'EOF' | tee "$out/summary.md"
import json, sys
rows = []
for label, path in zip(["no bad logins", "200 bad logins/s"], sys.argv[1:]):
    r = json.load(open(path))
    p, e = r["publish_latency"], r["end_to_end_latency"]
    rows.append((label, r["publish"]["msgs_per_sec"], p["p50_ms"], p["p99_ms"], e["p99_ms"]))
print("| run | publish msg/s | publish p50 ms | publish p99 ms | end-to-end p99 ms |")
print("|---|---|---|---|---|")
for label, rate, p50, p99, e99 in rows:
    print(f"| {label} | {rate:.0f} | {p50:.2f} | {p99:.2f} | {e99:.2f} |")
EOF
