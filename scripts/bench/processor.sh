#!/usr/bin/env bash
# The stream processor (`aerostream process`) against a Polars baseline
# (benchmarks/processor/polars_baseline.py) on synthetic ticks, one fresh
# AeroStream agent serving the topic (pinned to AGENT_CPUS), each engine
# pinned to ONE core (ENGINE_CPUS). For each pipeline and engine:
#
#   throughput  COUNT ticks pre-loaded (event times fixed by the seed); the
#               engine reads them all from the beginning: wall time until it
#               has processed them, its CPU seconds (utime + stime) and peak
#               RSS (VmHWM); events/s per core = COUNT / CPU seconds.
#   latency     ticks at RATE/s for DURATION s with ts = the wall clock, the
#               engine reading as they come: the percentiles its --stats
#               file reports (ingest->state and window result).
#   correctness the two engines' Parquet outputs of the throughput phase
#               are equal (same windows; integers equal, floats within 1e-9
#               relative); a mismatch is printed and the script exits 1.
#
# Usage: scripts/bench/processor.sh
#
# Environment:
#   COUNT        ticks pre-loaded (default 2000000)
#   RATE         paced ticks/s in the latency phase (default 50000)
#   DURATION     seconds of paced ticks (default 30)
#   SYMBOLS, SEED  the ticks (default 100 symbols, seed 1)
#   STEP_US      event-time step between pre-loaded ticks in microseconds
#                (default 20: 50,000 ticks per second of event time)
#   PIPELINES    names of benchmarks/processor/*.yaml (default
#                "vwap-tumbling vwap-sliding"; "volume-tumbling" uses only the
#                ops of the first processor release)
#   ENGINES      default "aerostream polars"
#   PHASES       default "throughput latency"
#   AEROSTREAM_BIN  the aerostream binary (default
#                $CARGO_TARGET_DIR/release/aerostream, $CARGO_TARGET_DIR
#                defaulting to ./target; not built here)
#   AGENT_CPUS, ENGINE_CPUS, PRODUCER_CPUS  taskset CPU lists (default 0, 1,
#                and the agent's for the paced producer)
#   LATENCY_WARMUP  seconds between an engine's start and the first paced
#                tick (default 3)
#   IDLE_TIMEOUT  overrides the pipelines' source.idle_timeout (default: the
#                pipeline's, 5s): how long after the last tick the throughput
#                phase's last windows close
#   RESULTS_DIR  default benchmarks/results/<date>-processor
#
# An engine that refuses a pipeline (a binary older than its window type or
# ops) is reported as not supported and its comparison skipped; an
# aerostream binary without `process --stats` gives throughput, CPU and RSS
# only. Needs python3 with confluent-kafka, pyarrow, PyYAML and polars
# (installed here with pip when missing).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
# shellcheck source=lib.sh
. "$here/lib.sh"

count=${COUNT:-2000000}
rate=${RATE:-50000}
duration=${DURATION:-30}
symbols=${SYMBOLS:-100}
seed=${SEED:-1}
step_us=${STEP_US:-20}
read -r -a pipelines <<<"${PIPELINES:-vwap-tumbling vwap-sliding}"
read -r -a engines <<<"${ENGINES:-aerostream polars}"
read -r -a phases <<<"${PHASES:-throughput latency}"
partitions=8

target_dir=${CARGO_TARGET_DIR:-$root/target}
aerostream=${AEROSTREAM_BIN:-$target_dir/release/aerostream}
if [ ! -x "$aerostream" ]; then
    echo "no aerostream binary at $aerostream: build one (cargo build --release -p agent --bin aerostream) or set AEROSTREAM_BIN" >&2
    exit 1
fi
for p in "${pipelines[@]}"; do
    [ -f "benchmarks/processor/$p.yaml" ] || { echo "no pipeline benchmarks/processor/$p.yaml" >&2; exit 1; }
done
agent_cpus=${AGENT_CPUS:-0}
if [ "$(nproc)" -gt 1 ]; then engine_cpus=${ENGINE_CPUS:-1}; else engine_cpus=${ENGINE_CPUS:-0}; fi
producer_cpus=${PRODUCER_CPUS:-$agent_cpus}

# Python packages: polars (the baseline's engine, which the test
# requirements do not bring), PyYAML (pipeline files), pyarrow (the
# comparison), confluent-kafka (ticks and the baseline's consumer)
for need in polars:polars yaml:pyyaml pyarrow:pyarrow confluent_kafka:confluent-kafka; do
    if ! python3 -c "import ${need%%:*}" 2>/dev/null; then
        echo "installing ${need#*:}"
        python3 -m pip install --quiet "${need#*:}"
    fi
done

out=${RESULTS_DIR:-benchmarks/results/$(date +%Y-%m-%d)-processor}
mkdir -p "$out"
rm -f "$out"/throughput-*.json "$out"/latency-*.json "$out"/compare-*.json "$out/failures.txt"
stats_note="supports --stats"
"$aerostream" process --help 2>&1 | grep -q -- '--stats' || stats_note="has no --stats: throughput, CPU and RSS only"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
    echo "aerostream: $aerostream built $(date -u -r "$aerostream" +%Y-%m-%dT%H:%M:%SZ) (checkout at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)); process $stats_note"
    echo "python: $(python3 --version 2>&1); polars $(python3 -c 'import polars; print(polars.__version__)'); confluent-kafka $(python3 -c 'import confluent_kafka as c; print(c.version()[0], "librdkafka", c.libversion()[0])')"
    echo "pinning: agent on CPUs $agent_cpus, engine on CPUs $engine_cpus, paced producer on CPUs $producer_cpus"
    echo "command: scripts/bench/processor.sh (COUNT=$count RATE=$rate DURATION=$duration SYMBOLS=$symbols SEED=$seed STEP_US=$step_us PIPELINES=\"${pipelines[*]}\" ENGINES=\"${engines[*]}\" PHASES=\"${phases[*]}\")"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"
cat "$out/machine.txt"

broker_pid=
fg_pid=
scratch=$(mktemp -d "${TMPDIR:-/tmp}/bench-processor.XXXXXX")
cleanup() {
    local f pid
    # a run interrupted: it stops what it started
    if [ -n "$fg_pid" ] && kill -0 "$fg_pid" 2>/dev/null; then stop_pid "$fg_pid"; fi
    # an engine an interrupted run left behind
    for f in "$scratch"/*/engine.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then stop_pid "$pid"; fi
    done
    if [ -n "$broker_pid" ]; then stop_pid "$broker_pid"; fi
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

script_start=$(date +%s)
step_start=0
step() {
    step_start=$(date +%s%N)
    echo
    echo "=== [$(date -u +%H:%M:%S)] $* ==="
}
step_done() {
    local now
    now=$(date +%s%N)
    echo "=== step took $(awk -v d="$((now - step_start))" 'BEGIN { printf "%.1f", d / 1e9 }') s ($(($(date +%s) - script_start)) s since start) ==="
}

# run CMD...: runs it in the background and waits, so that a signal to this
# script is handled at once (bash runs traps only between commands)
run() {
    "$@" &
    fg_pid=$!
    local rc=0
    wait "$fg_pid" || rc=$?
    fg_pid=
    return "$rc"
}

declare -A unsupported=()
status=0
fail() {
    echo "!!! $*" | tee -a "$out/failures.txt"
    status=1
}

step "starting a fresh agent on CPUs $agent_cpus"
kafka_port=$(free_port)
(cd "$scratch" && AEROSTREAM_LOG=${AEROSTREAM_LOG:-warn} exec taskset -c "$agent_cpus" "$aerostream" serve \
    --data-dir "$scratch/data" --kafka-addr "127.0.0.1:$kafka_port" \
    --advertised-kafka-addr "127.0.0.1:$kafka_port" --http-addr "127.0.0.1:$(free_port)" \
    --native-addr "127.0.0.1:$(free_port)" --shards 1 --write-caching true \
    --schema-registry-addr off --connect-addr off) >>"$out/agent.log" 2>&1 &
broker_pid=$!
wait_for_port "$kafka_port" "$broker_pid" 60
bootstrap="127.0.0.1:$kafka_port"
echo "agent pid $broker_pid on $bootstrap"
step_done

run_args=(--bin "$aerostream" --bootstrap "$bootstrap" --cpus "$engine_cpus" --logs "$out")
[ -n "${IDLE_TIMEOUT:-}" ] && run_args+=(--idle-timeout "$IDLE_TIMEOUT")

if [[ " ${phases[*]} " == *" throughput "* ]]; then
    step "pre-loading $count ticks ($symbols symbols, seed $seed, $step_us µs apart in event time) into topic ticks ($partitions partitions)"
    run python3 benchmarks/processor/ticks.py --bootstrap "$bootstrap" --topic ticks --create "$partitions" \
        --count "$count" --symbols "$symbols" --seed "$seed" --step-us "$step_us"
    step_done
    for p in "${pipelines[@]}"; do
        ok=()
        for e in "${engines[@]}"; do
            step "throughput: $e, $p, $count ticks, engine on CPUs $engine_cpus"
            set +e
            run python3 "$here/processor_run.py" throughput --engine "$e" --pipeline "benchmarks/processor/$p.yaml" \
                --topic ticks --count "$count" --workdir "$scratch/tp-$p-$e" \
                --json "$out/throughput-$p-$e.json" "${run_args[@]}"
            rc=$?
            set -e
            case $rc in
                0) ok+=("$e") ;;
                3)
                    echo "--- $e does not support $p: skipped" | tee -a "$out/failures.txt"
                    unsupported[$p-$e]=1
                    ;;
                *) fail "throughput $p $e exited $rc" ;;
            esac
            step_done
        done
        if [ ${#ok[@]} -ge 2 ]; then
            step "correctness: ${ok[0]} and ${ok[1]} outputs of $p"
            if ! run python3 "$here/processor_run.py" compare "$scratch/tp-$p-${ok[0]}/out" "$scratch/tp-$p-${ok[1]}/out" \
                --label-a "${ok[0]}" --label-b "${ok[1]}" --json "$out/compare-$p.json"; then
                fail "the outputs of $p differ (see above)"
            fi
            step_done
        else
            echo "--- correctness of $p not checked: ${#ok[@]} engine(s) ran it (${ok[*]:-none})"
        fi
        rm -rf "$scratch"/tp-"$p"-*
    done
    python3 "$here/processor_run.py" delete-topic --bootstrap "$bootstrap" --topic ticks
fi

if [[ " ${phases[*]} " == *" latency "* ]]; then
    for p in "${pipelines[@]}"; do
        for e in "${engines[@]}"; do
            topic="live-$p-$e"
            if [ -n "${unsupported[$p-$e]:-}" ]; then
                echo "--- latency: $e does not support $p (see the throughput phase): skipped"
                continue
            fi
            step "latency: $e, $p, $rate ticks/s for $duration s, engine on CPUs $engine_cpus, producer on CPUs $producer_cpus"
            python3 benchmarks/processor/ticks.py --bootstrap "$bootstrap" --topic "$topic" --create "$partitions" --count 0 >/dev/null
            set +e
            run python3 "$here/processor_run.py" latency --engine "$e" --pipeline "benchmarks/processor/$p.yaml" \
                --topic "$topic" --rate "$rate" --duration "$duration" --symbols "$symbols" --seed "$seed" \
                --producer-cpus "$producer_cpus" --workdir "$scratch/lat-$p-$e" \
                --json "$out/latency-$p-$e.json" "${run_args[@]}"
            rc=$?
            set -e
            case $rc in
                0) ;;
                3) echo "--- $e does not support $p: skipped" | tee -a "$out/failures.txt" ;;
                *) fail "latency $p $e exited $rc" ;;
            esac
            rm -rf "$scratch/lat-$p-$e"
            python3 "$here/processor_run.py" delete-topic --bootstrap "$bootstrap" --topic "$topic"
            python3 "$here/processor_run.py" delete-topic --bootstrap "$bootstrap" --topic "$topic-warmup"
            step_done
        done
    done
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

step "results in $out"
python3 "$here/processor_table.py" "$out"
step_done
exit "$status"
