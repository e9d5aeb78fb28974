#!/usr/bin/env bash
# Profiles the aerostream broker under one load-test workload, pinned as in
# side-by-side.sh (broker on CPU 0, load generator on CPU 1). During the
# measurement window it records, one after the other:
#   1. on-CPU samples of the broker with call stacks (perf record -e cpu-clock,
#      DWARF unwinding; hardware counters are often unavailable in VMs);
#   2. scheduler events on every CPU (perf sched), for run-queue delays of the
#      broker's threads and what else ran on its CPU;
#   3. where the broker's threads block (context-switch samples with stacks);
#   4. what ran on each CPU, by process (machine-wide cpu-clock, no stacks);
#   5. the broker's slow file syscalls (fsync, fdatasync, sync_file_range,
#      fadvise, pwrite, ftruncate, openat taking 1 ms or more) with perf trace,
#      long enough to include segment rolls;
#   6. on-CPU samples of the load generator with call stacks (its clients:
#      librdkafka over the Kafka wire, or the Rust SDK over the native
#      protocol), so both ends of a way in are seen.
# Text reports go to OUT/; the perf.data files are left in a scratch folder
# (they are large) unless KEEP_PERF_DATA=1.
#
# Usage: scripts/bench/profile.sh [WORKLOAD] (default small-50k)
#   WAY=native-tcp scripts/bench/profile.sh small-max   (the SDK over aero://)
# Environment: AEROSTREAM_BIN, LOADTEST_BIN (default: built here, release),
#   OUT (default benchmarks/results/<date>-<host>/profile-<workload>),
#   BROKER_CPUS (0), LOADGEN_CPUS (1), PERF_CPUS (where perf itself runs:
#   LOADGEN_CPUS, so that draining its buffers and writing its files does
#   not take the broker's core), CPU_SECONDS (20), SCHED_SECONDS (5),
#   SWITCH_SECONDS (10), WIDE_SECONDS (10), TRACE_SECONDS (45),
#   LOADGEN_SECONDS (20), FREQ (sampling Hz, 999). A step given 0 seconds
#   is skipped. WAY: kafka (default), native-tcp or native-quic.
# Needs perf (Debian: linux-perf) and permission to use it (root, or
# kernel.perf_event_paranoid <= 1 and tracefs readable for perf sched).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh

workload=${1:-small-50k}
file=loadtest/workloads/$workload.yaml
[ -f "$file" ] || { echo "no workload $file" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf not found (apt-get install linux-perf)" >&2; exit 1; }

target_dir=${CARGO_TARGET_DIR:-$root/target}
if [ -z "${AEROSTREAM_BIN:-}" ] || [ -z "${LOADTEST_BIN:-}" ]; then
    # the release build with line tables (Cargo.toml's `profiling` profile),
    # so perf can name functions and lines
    cargo build --profile profiling -p agent -p loadtest
fi
aerostream=${AEROSTREAM_BIN:-$target_dir/profiling/aerostream}
loadtest=${LOADTEST_BIN:-$target_dir/profiling/loadtest}
broker_cpus=${BROKER_CPUS:-0}
loadgen_cpus=${LOADGEN_CPUS:-1}
perf_cpus=${PERF_CPUS:-$loadgen_cpus}
cpu_s=${CPU_SECONDS:-20}
sched_s=${SCHED_SECONDS:-5}
switch_s=${SWITCH_SECONDS:-10}
wide_s=${WIDE_SECONDS:-10}
trace_s=${TRACE_SECONDS:-45}
loadgen_s=${LOADGEN_SECONDS:-20}
way=${WAY:-kafka}
case $way in
    kafka | native-tcp | native-quic) ;;
    *) echo "unknown WAY $way (use kafka, native-tcp, native-quic)" >&2; exit 1 ;;
esac
freq=${FREQ:-999}
suffix=
[ "$way" = kafka ] || suffix=-$way
out=${OUT:-benchmarks/results/$(date +%Y-%m-%d)-$(hostname -s)/profile-$workload$suffix}
mkdir -p "$out"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/profile-$workload.XXXXXX")
broker_pid=
load_pid=
cleanup() {
    [ -n "$load_pid" ] && kill -TERM "$load_pid" 2>/dev/null
    [ -n "$broker_pid" ] && stop_pid "$broker_pid"
    if [ "${KEEP_PERF_DATA:-0}" = 1 ]; then
        echo "perf data kept in $scratch"
    else
        rm -rf "$scratch"
    fi
}
trap cleanup EXIT

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "workload: $workload"
    echo "way in: $way"
    echo "aerostream: $aerostream"
    echo "pinning: broker on CPUs $broker_cpus, load generator on CPUs $loadgen_cpus, perf on CPUs $perf_cpus"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "perf: $(perf version) cpu-clock at $freq Hz"
} | tee "$out/machine.txt"

port=$(free_port)
http_port=$(free_port)
native_port=$(free_port)
(cd "$scratch" && AEROSTREAM_LOG=${AEROSTREAM_LOG:-warn} exec taskset -c "$broker_cpus" "$aerostream" serve \
    --data-dir "$scratch/data" --kafka-addr "127.0.0.1:$port" \
    --advertised-kafka-addr "127.0.0.1:$port" --http-addr "127.0.0.1:$http_port" \
    --native-addr "127.0.0.1:$native_port" --shards 1) >"$out/broker.log" 2>&1 &
broker_pid=$!
wait_for_port "$port" "$broker_pid" 60
wait_for_port "$native_port" "$broker_pid" 60
case $way in
    kafka) driver_args=(--driver kafka --bootstrap "127.0.0.1:$port") ;;
    native-tcp) driver_args=(--driver native --bootstrap "aero://127.0.0.1:$native_port") ;;
    # QUIC listens on the UDP port of the native TCP port's number
    native-quic) driver_args=(--driver native --bootstrap "aero+quic://127.0.0.1:$native_port"
        --native-tls-ca "$scratch/data/native-tls/ca.pem") ;;
esac

# Long enough for every recording below, plus the workload's warm-up.
duration=$((cpu_s + sched_s + switch_s + wide_s + trace_s + loadgen_s + 15))
taskset -c "$loadgen_cpus" "$loadtest" run --workload "$file" "${driver_args[@]}" \
    --broker-label aerostream --broker-pid "$broker_pid" \
    --duration "${duration}s" --json "$out/loadtest.json" >"$out/loadtest.log" 2>&1 &
load_pid=$!

# Wait until the measurement window opens.
for _ in $(seq 1 600); do
    grep -q "warm-up done" "$out/loadtest.log" 2>/dev/null && break
    kill -0 "$load_pid" 2>/dev/null || { cat "$out/loadtest.log" >&2; exit 1; }
    sleep 0.1
done
sleep 2

# The broker's request and byte counters, to turn the profile into work per request.
metrics() {
    echo "at $(date +%s.%N)"
    python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
        "http://127.0.0.1:$http_port/metrics" | grep -E '^aerostream_(kafka_requests|produced_bytes|fetched_bytes)' || true
}
metrics >"$out/metrics-start.txt"

# record SECONDS WHAT COMMAND...: runs one recording unless SECONDS is 0.
record() {
    local secs=$1 what=$2
    shift 2
    [ "$secs" -gt 0 ] || return 0
    echo "recording $what for ${secs}s"
    taskset -c "$perf_cpus" "$@" 2>>"$out/perf-record.err" || true
}
record "$cpu_s" "on-CPU stacks" perf record -q -e cpu-clock -F "$freq" --call-graph dwarf,16384 \
    -p "$broker_pid" -o "$scratch/cpu.data" -- sleep "$cpu_s"
record "$sched_s" "scheduler events" perf sched record -q -o "$scratch/sched.data" -- sleep "$sched_s"
record "$switch_s" "context switches of the broker" perf record -q -e context-switches -c 1 \
    --call-graph dwarf,16384 -p "$broker_pid" -o "$scratch/switch.data" -- sleep "$switch_s"
record "$wide_s" "every CPU" perf record -q -e cpu-clock -F "$freq" -a -o "$scratch/wide.data" \
    -- sleep "$wide_s"
record "$trace_s" "slow file syscalls" perf trace -S --duration 1 -p "$broker_pid" \
    -e fsync,fdatasync,sync_file_range,fadvise64,pwrite64,ftruncate,openat \
    -o "$out/slow-syscalls.txt" -- sleep "$trace_s"
record "$loadgen_s" "on-CPU stacks of the load generator" perf record -q -e cpu-clock -F "$freq" \
    --call-graph dwarf,16384 -p "$load_pid" -o "$scratch/loadgen.data" -- sleep "$loadgen_s"

metrics >"$out/metrics-end.txt"

wait "$load_pid" || echo "loadtest exited $? (see $out/loadtest.log)" >&2
load_pid=

echo "writing reports to $out"
report() { perf report --no-inline --stdio "$@" 2>/dev/null; }
if [ -f "$scratch/cpu.data" ]; then
    report -i "$scratch/cpu.data" --no-children --sort symbol --percent-limit 0.3 -g none \
        >"$out/cpu-symbols.txt" || true
    report -i "$scratch/cpu.data" --no-children --sort dso --percent-limit 0.3 -g none \
        >"$out/cpu-dso.txt" || true
    report -i "$scratch/cpu.data" --children --sort symbol --percent-limit 2 -g none \
        >"$out/cpu-inclusive.txt" || true
    report -i "$scratch/cpu.data" --no-children --sort symbol --percent-limit 2 \
        -g caller,0.5,callee,function,percent --max-stack 40 >"$out/cpu-callers.txt" || true
fi
if [ -f "$scratch/loadgen.data" ]; then
    report -i "$scratch/loadgen.data" --no-children --sort symbol --percent-limit 0.3 -g none \
        >"$out/loadgen-symbols.txt" || true
    report -i "$scratch/loadgen.data" --no-children --sort dso --percent-limit 0.3 -g none \
        >"$out/loadgen-dso.txt" || true
    report -i "$scratch/loadgen.data" --children --sort symbol --percent-limit 2 -g none \
        >"$out/loadgen-inclusive.txt" || true
fi
if [ -f "$scratch/sched.data" ]; then
    perf sched latency -i "$scratch/sched.data" --sort max 2>/dev/null | head -60 \
        >"$out/sched-latency.txt" || true
    perf sched timehist -i "$scratch/sched.data" -s 2>/dev/null | tail -80 >"$out/sched-summary.txt" || true
    # Per wake-up of the broker's shard threads: wait, scheduling delay, run time (ms).
    perf sched timehist -i "$scratch/sched.data" 2>/dev/null |
        awk '$3 ~ /^shard-/ {print $4, $5, $6}' >"$scratch/shard.txt" || true
    python3 - "$scratch/shard.txt" >"$out/sched-shard.txt" <<'PY'
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 3]
def q(a, f):
    return a[min(len(a) - 1, int(f * len(a)))] if a else float("nan")
print("shard threads, per scheduling (ms)")
for i, name in ((0, "blocked or idle before waking"), (1, "runnable but waiting for a CPU"), (2, "running")):
    a = sorted(r[i] for r in rows)
    print(f"{name:32} n={len(a)} total={sum(a):.0f} p50={q(a, .5):.3f} p90={q(a, .9):.3f} p99={q(a, .99):.3f} max={q(a, 1):.3f}")
PY
fi
if [ -f "$scratch/switch.data" ]; then
    report -i "$scratch/switch.data" --no-children --sort symbol --percent-limit 1 \
        -g caller,0.5,callee,function,percent --max-stack 40 >"$out/switch-callers.txt" || true
fi
if [ -f "$scratch/wide.data" ]; then
    report -i "$scratch/wide.data" --sort cpu,comm --percent-limit 0.5 -g none >"$out/wide-by-cpu.txt" || true
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
echo "done: $out"
