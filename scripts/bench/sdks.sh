#!/usr/bin/env bash
# The SDKs side by side: the same workload shape (1 KiB values, 8
# partitions, 2 producers + 2 consumers, acks=all, linger 1 ms, batches of
# 128 KiB) against one AeroStream agent (a fresh one per run, pinned as
# side-by-side.sh pins it), written by each SDK over the native protocol
# and by librdkafka over the Kafka wire, at a fixed rate and flat out; one
# table with publish and end-to-end latency percentiles and rates.
#
# Usage: scripts/bench/sdks.sh [WAY...]
#   WAY: librdkafka, rust-tcp, rust-quic (the load generator: librdkafka,
#   or the Rust SDK), go-tcp, go-quic, java-tcp, java-quic, node-tcp (each
#   SDK's bin/bench). Default: all of them.
#
# Environment:
#   RATES      rates to run (default "20000 max")
#   WARMUP     seconds not counted (default 5)
#   DURATION   seconds measured (default 30)
#   MAX_WARMUP, MAX_DURATION  the same for the "max" runs (default: the
#              load generator's 30 s search warm-up, and DURATION). Flat
#              out, a run writes about 300 MB/s to the agent's data folder
#              (kept until the run ends): 60 s take some 18 GB of disk.
#   AEROSTREAM_BIN, LOADTEST_BIN  binaries (default: built here, release)
#   BROKER_CPUS, LOADGEN_CPUS     pinning (default 0 and 1)
#   RESULTS_DIR  where the reports and table.md go
#
# "max" differs by driver: the load generator searches for the highest rate
# at which its consumers keep up (loadtest/workloads/small-max.yaml); an
# SDK's bench sends as fast as its producers' buffers accept, and its
# consumers must then drain everything within 30 s. Both are the most the
# path carries on this machine; the table says which method each row used.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
# shellcheck source=lib.sh
. "$here/lib.sh"

ways=("$@")
[ ${#ways[@]} -gt 0 ] || ways=(librdkafka rust-tcp rust-quic go-tcp go-quic java-tcp java-quic node-tcp)
read -r -a rates <<<"${RATES:-20000 max}"
warmup=${WARMUP:-5}
duration=${DURATION:-30}
for way in "${ways[@]}"; do
    case $way in
        librdkafka | rust-tcp | rust-quic | go-tcp | go-quic | java-tcp | java-quic | node-tcp) ;;
        *) echo "unknown way $way (use librdkafka, rust-tcp, rust-quic, go-tcp, go-quic, java-tcp, java-quic, node-tcp)" >&2; exit 1 ;;
    esac
done

target_dir=${CARGO_TARGET_DIR:-$root/target}
if [ -z "${AEROSTREAM_BIN:-}" ] || [ -z "${LOADTEST_BIN:-}" ]; then
    echo "building aerostream and loadtest (release)"
    cargo build --release -p agent --bin aerostream -p loadtest --bin loadtest
fi
aerostream=${AEROSTREAM_BIN:-$target_dir/release/aerostream}
loadtest=${LOADTEST_BIN:-$target_dir/release/loadtest}
broker_cpus=${BROKER_CPUS:-0}
if [ "$(nproc)" -gt 1 ]; then loadgen_cpus=${LOADGEN_CPUS:-1}; else loadgen_cpus=${LOADGEN_CPUS:-0}; fi

# Each SDK's bench builds itself on first use: do it before measuring.
for way in "${ways[@]}"; do
    case $way in
        go-*) sdk-go/bin/bench --help >/dev/null 2>&1 || true ;;
        java-*) sdk-java/bin/bench --help >/dev/null 2>&1 || true ;;
        node-*) sdk-node/bin/bench --help >/dev/null 2>&1 || true ;;
    esac
done

out=${RESULTS_DIR:-benchmarks/results/$(date +%Y-%m-%d)-sdks}
mkdir -p "$out"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
    echo "aerostream: $aerostream built $(date -u -r "$aerostream" +%Y-%m-%dT%H:%M:%SZ) (checkout at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)), --shards 1, write caching on"
    echo "pinning: agent on CPUs $broker_cpus, load generator or SDK bench on CPUs $loadgen_cpus"
    echo "go: $(go version 2>/dev/null || echo none); java: $(java -version 2>&1 | head -n1); node: $(node --version 2>/dev/null || echo none)"
    echo "command: scripts/bench/sdks.sh ${ways[*]} (RATES=\"${rates[*]}\" WARMUP=$warmup DURATION=$duration MAX_WARMUP=${MAX_WARMUP:-default} MAX_DURATION=${MAX_DURATION:-default})"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"
cat "$out/machine.txt"

broker_pid=
scratch=
cleanup() {
    if [ -n "$broker_pid" ]; then stop_pid "$broker_pid"; fi
    if [ -n "$scratch" ]; then rm -rf "$scratch"; fi
}
trap cleanup EXIT

start_agent() { # start_agent LOG: sets kafka_port, native_port, broker_pid, scratch
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/bench-sdks.XXXXXX")
    kafka_port=$(free_port)
    native_port=$(free_port)
    (cd "$scratch" && AEROSTREAM_LOG=${AEROSTREAM_LOG:-warn} exec taskset -c "$broker_cpus" "$aerostream" serve \
        --data-dir "$scratch/data" --kafka-addr "127.0.0.1:$kafka_port" \
        --advertised-kafka-addr "127.0.0.1:$kafka_port" --http-addr "127.0.0.1:$(free_port)" \
        --native-addr "127.0.0.1:$native_port" --shards 1 --write-caching true \
        --schema-registry-addr off --connect-addr off) >>"$1" 2>&1 &
    broker_pid=$!
    wait_for_port "$kafka_port" "$broker_pid" 60
    wait_for_port "$native_port" "$broker_pid" 60
}

status=0
for rate in "${rates[@]}"; do
    for way in "${ways[@]}"; do
        run=$way-$rate
        start_agent "$out/$run-broker.log"
        ca="$scratch/data/native-tls/ca.pem"
        echo "=== $way at $rate msg/s ==="
        set +e
        case $way in
            librdkafka | rust-*)
                workload=loadtest/workloads/small-20k.yaml
                [ "$rate" = max ] && workload=loadtest/workloads/small-max.yaml
                args=(--driver kafka --bootstrap "127.0.0.1:$kafka_port")
                case $way in
                    rust-tcp) args=(--driver native --bootstrap "aero://127.0.0.1:$native_port") ;;
                    rust-quic) args=(--driver native --bootstrap "aero+quic://127.0.0.1:$native_port" --native-tls-ca "$ca") ;;
                esac
                # the search for the maximum keeps its workload's longer warm-up
                if [ "$rate" = max ]; then args+=(--warmup "${MAX_WARMUP:-30}s" --duration "${MAX_DURATION:-$duration}s"); else args+=(--rate "$rate" --warmup "${warmup}s" --duration "${duration}s"); fi
                taskset -c "$loadgen_cpus" "$loadtest" run --workload "$workload" "${args[@]}" \
                    --broker-label aerostream --broker-pid "$broker_pid" \
                    --json "$out/$run.loadtest.json" 2>&1 | tee "$out/$run.log"
                ;;
            *)
                sdk=${way%-*}
                run_warmup=$warmup
                run_duration=$duration
                if [ "$rate" = max ]; then run_warmup=${MAX_WARMUP:-$warmup}; run_duration=${MAX_DURATION:-$duration}; fi
                url="aero://127.0.0.1:$native_port"
                tls=()
                if [ "${way#*-}" = quic ]; then url="aero+quic://127.0.0.1:$native_port"; tls=(--tls-ca "$ca"); fi
                taskset -c "$loadgen_cpus" "sdk-$sdk/bin/bench" --bootstrap "$url" "${tls[@]}" \
                    --topic "bench-$run" --partitions 8 --size 1024 --producers 2 --consumers 2 \
                    --rate "$rate" --warmup "$run_warmup" --duration "$run_duration" \
                    --json "$out/$run.sdk.json" 2>&1 | tee "$out/$run.log"
                ;;
        esac
        rc=${PIPESTATUS[0]}
        set -e
        if [ "$rc" -ne 0 ]; then
            echo "!!! $run exited $rc" | tee -a "$out/failures.txt"
            status=1
        fi
        stop_pid "$broker_pid"
        broker_pid=
        rm -rf "$scratch"
        scratch=
        sync
        sleep "${SETTLE_SECONDS:-3}"
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

python3 "$here/sdks_table.py" "$out" | tee "$out/table.md"
exit "$status"
