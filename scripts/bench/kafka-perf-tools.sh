#!/usr/bin/env bash
# Apache Kafka's own performance tools against AeroStream and Apache Kafka:
# kafka-producer-perf-test and kafka-consumer-perf-test (the classes
# org.apache.kafka.tools.ProducerPerformance and ConsumerPerformance of
# kafka-tools 4.1.1, fetched through Maven by `scripts/kafka.sh
# tools-classpath`), run the same way against each broker in turn, each
# broker started fresh and pinned as scripts/bench/side-by-side.sh pins it.
# Prints a markdown table and writes it, with every tool's output and the
# brokers' logs, to benchmarks/results/<date>-<host>/.
#
# Usage: scripts/bench/kafka-perf-tools.sh
#
#   cargo build --release -p agent --bin aerostream
#   AEROSTREAM_BIN=<target>/release/aerostream scripts/bench/kafka-perf-tools.sh
#
# Per broker, in this order, each step one JVM of the tools pinned to
# LOADGEN_CPUS:
#   1. kafka-topics creates the topics perf-warmup, perf-max and perf-rate
#      (PARTITIONS partitions, RF 1, or 3 on kafka-rf3 / aerostream-rf3);
#   2. warm-up: WARMUP_RECORDS records to perf-warmup at full speed, not
#      reported (the JVMs' compilers, the broker's caches);
#   3. produce, unthrottled: RECORDS records of RECORD_SIZE bytes to
#      perf-max, one producer with acks=ACKS and otherwise the producer's
#      defaults (--throughput -1);
#   4. consume: one consumer reads those RECORDS records back from perf-max
#      (a new group, from the earliest offset);
#   5. produce, throttled: RATE_RECORDS records at THROUGHPUT records/s to
#      perf-rate, where the latency is not the producer's own queue.
#
# Latency is ProducerPerformance's: from send() to the acknowledgement's
# callback, so in the unthrottled run it includes the time a record waits
# in the producer's buffer; its percentiles are whole milliseconds. MB is
# 1024 * 1024 bytes (the tools' unit). Broker CPU is the broker processes'
# user + system time from /proc/PID/stat over the step (all threads; for
# Kafka the JVM's GC and compiler threads too), per record; RSS is VmRSS
# at the step's end, summed over the processes.
#
# Environment:
#   BROKERS         in order (default: "aerostream kafka"); also "kafka-rf3"
#                   and "aerostream-rf3" (three nodes on BROKER_CPUS, RF 3)
#   RECORDS         records of the unthrottled run and of the consumer (default 1000000)
#   RECORD_SIZE     bytes per record (default 100)
#   ACKS            producer acks (default all)
#   THROUGHPUT      records/s of the throttled run (default 50000; 0 skips it)
#   RATE_RECORDS    records of the throttled run (default RECORDS)
#   WARMUP_RECORDS  records of the warm-up (default 1000000, some 10 s at
#                   full speed on a 2-core VM, for the JIT of a JVM broker
#                   pinned to one CPU; 0 for none)
#   PARTITIONS      partitions of each topic (default 8)
#   PRODUCER_PROPS  more producer properties, KEY=VALUE separated by spaces
#                   (e.g. "linger.ms=1 batch.size=131072"), for every broker
#   KAFKA_HEAP      heap of each Kafka node's JVM, -Xms and -Xmx (default 1g)
#   TOOLS_HEAP      heap of the tools' JVM (default 512m, as the
#                   kafka-*-perf-test.sh scripts set it)
#   JAVA_HOME       the JDK for Kafka and the tools (default: java on PATH)
#   AEROSTREAM_BIN  aerostream binary (default: built here with --release)
#   BROKER_CPUS, LOADGEN_CPUS, SHARDS, SETTLE_SECONDS, AUTOGROUP_NICE,
#   RESULTS_DIR     as in scripts/bench/side-by-side.sh
#
# Flush settings are each broker's defaults: AeroStream with write caching
# on, Kafka with no log.flush.* settings; both answer acks=all once the
# leader's append is in the page cache (and, at RF 3, the followers have
# it), neither fsyncs per record.
# shellcheck disable=SC2317 # functions run by the EXIT trap and by step
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh

if [ -z "${BENCH_IN_SESSION:-}" ]; then
    if [ -z "${AEROSTREAM_BIN:-}" ]; then
        case " ${BROKERS:-aerostream kafka} " in
            *" aerostream"*)
                echo "building aerostream (release)"
                cargo build --release -p agent --bin aerostream
                export AEROSTREAM_BUILT_HERE=1
                ;;
        esac
        export AEROSTREAM_BIN=${CARGO_TARGET_DIR:-$root/target}/release/aerostream
    fi
    # Fetch the jars before anything is measured.
    scripts/kafka.sh classpath >/dev/null
    scripts/kafka.sh tools-classpath >/dev/null
    # The measurements in a session of their own, with its weight raised
    # (see AUTOGROUP_NICE in side-by-side.sh).
    if [ -n "${AUTOGROUP_NICE--10}" ] && [ -e /proc/self/autogroup ] && command -v setsid >/dev/null; then
        export BENCH_IN_SESSION=1
        exec setsid --wait "$0" "$@"
    fi
fi
autogroup="not changed"
if [ -n "${BENCH_IN_SESSION:-}" ]; then
    if echo "${AUTOGROUP_NICE--10}" >/proc/self/autogroup 2>/dev/null; then
        autogroup=$(cat /proc/self/autogroup)
    else
        autogroup="could not be raised (needs CAP_SYS_NICE)"
    fi
fi

read -r -a brokers <<<"${BROKERS:-aerostream kafka}"
records=${RECORDS:-1000000}
record_size=${RECORD_SIZE:-100}
acks=${ACKS:-all}
throughput=${THROUGHPUT:-50000}
rate_records=${RATE_RECORDS:-$records}
warmup_records=${WARMUP_RECORDS:-1000000}
partitions=${PARTITIONS:-8}
read -r -a producer_props <<<"${PRODUCER_PROPS:-}"
kafka_heap=${KAFKA_HEAP:-1g}
tools_heap=${TOOLS_HEAP:-512m}
broker_cpus=${BROKER_CPUS:-0}
if [ "$(nproc)" -gt 1 ]; then loadgen_cpus=${LOADGEN_CPUS:-1}; else loadgen_cpus=${LOADGEN_CPUS:-0}; fi
shards=${SHARDS:-$(python3 -c 'import sys
n=0
for part in sys.argv[1].split(","):
    a,_,b=part.partition("-"); n += (int(b)-int(a)+1) if b else 1
print(n)' "$broker_cpus")}
aerostream=${AEROSTREAM_BIN:-}
java_bin=java
if [ -n "${JAVA_HOME:-}" ]; then java_bin=$JAVA_HOME/bin/java; fi
for b in "${brokers[@]}"; do
    case $b in
        aerostream | aerostream-rf3) [ -x "$aerostream" ] || { echo "no aerostream binary at '$aerostream' (AEROSTREAM_BIN)" >&2; exit 1; } ;;
        kafka | kafka-rf3) ;;
        *) echo "unknown broker $b (use aerostream, aerostream-rf3, kafka, kafka-rf3)" >&2; exit 1 ;;
    esac
done
tools_cp=$(scripts/kafka.sh tools-classpath)
kafka_jar=$(scripts/kafka.sh classpath | tr ':' '\n' | grep '/kafka_2.13-' | xargs basename)
kafka_version=${kafka_jar#kafka_2.13-}
kafka_version=${kafka_version%.jar}
tools_jar=$(tr ':' '\n' <<<"$tools_cp" | grep '/kafka-tools-[0-9]' | xargs basename)
# the JVM flags of Kafka's kafka-run-class.sh, the heap of its perf-test scripts
tools_java=(taskset -c "$loadgen_cpus" "$java_bin" -Xmx"$tools_heap" -server -XX:+UseG1GC
    -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$root/scripts/bench/kafka-tools/log4j2.properties"
    -cp "$tools_cp")

out=${RESULTS_DIR:-benchmarks/results/$(date +%Y-%m-%d)-$(hostname -s)}
mkdir -p "$out"
table="$out/kafka-perf-tools.md"
header=$(
    echo "# Apache Kafka's perf tools: $(IFS=' / '; echo "${brokers[*]}")"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname -s), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r)"
    echo "- tools: ${tools_jar%.jar} (ProducerPerformance, ConsumerPerformance), $("$java_bin" -version 2>&1 | head -n1), -Xmx$tools_heap"
    echo "- runs: $records records of $record_size bytes unthrottled, then consumed; $rate_records at $throughput records/s; acks=$acks${PRODUCER_PROPS:+, $PRODUCER_PROPS}; producer defaults otherwise; $partitions partitions; warm-up $warmup_records records first, not reported"
    for b in "${brokers[@]}"; do
        case $b in
            aerostream) echo "- aerostream: $aerostream, one agent, --shards $shards, write caching on (acks=all answered before fsync)" ;;
            aerostream-rf3) echo "- aerostream-rf3: three agents on the broker's CPUs, topics at RF 3, --shards $shards each" ;;
            kafka) echo "- kafka: Apache Kafka $kafka_version, KRaft, one node as broker and controller, heap -Xms$kafka_heap -Xmx$kafka_heap (G1, Kafka's start-script flags), no log.flush.* settings (acks=all answered before fsync), no authorizer" ;;
            kafka-rf3) echo "- kafka-rf3: three Apache Kafka $kafka_version nodes (broker and controller each, three voters), heap -Xms$kafka_heap -Xmx$kafka_heap each, topics and consumer offsets at RF 3, min.insync.replicas 1" ;;
        esac
    done
    echo "- pinning: broker(s) on CPUs $broker_cpus, the tools' JVM on CPUs $loadgen_cpus; data under ${TMPDIR:-/tmp} ($(df -PT "${TMPDIR:-/tmp}" | awk 'NR==2 {print $1 ", " $2}')); scheduler: session autogroup $autogroup"
    echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- command: scripts/bench/kafka-perf-tools.sh (BROKERS=\"${brokers[*]}\" RECORDS=$records RECORD_SIZE=$record_size THROUGHPUT=$throughput RATE_RECORDS=$rate_records WARMUP_RECORDS=$warmup_records PARTITIONS=$partitions ACKS=$acks)"
)
echo "$header"

scratch=
broker_pids=()
stop_brokers() {
    local p
    for p in "${broker_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${broker_pids[@]}"; do stop_pid "$p"; done
    broker_pids=()
}
cleanup() {
    stop_brokers
    if [ -n "$scratch" ]; then rm -rf "$scratch"; fi
}
trap cleanup EXIT

# start_broker NAME LOG: starts it pinned in a fresh scratch folder; sets
# broker_pids, bootstrap and rf.
start_broker() {
    local name=$1 log=$2 port n
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/perf-$name.XXXXXX")
    port=$(free_port)
    case $name in
        aerostream)
            (cd "$scratch" && AEROSTREAM_LOG=${AEROSTREAM_LOG:-warn} exec taskset -c "$broker_cpus" "$aerostream" serve \
                --data-dir "$scratch/data" --kafka-addr "127.0.0.1:$port" \
                --advertised-kafka-addr "127.0.0.1:$port" --http-addr "127.0.0.1:$(free_port)" \
                --native-addr "127.0.0.1:$(free_port)" \
                --shards "$shards" --write-caching true) >>"$log" 2>&1 &
            broker_pids=($!)
            bootstrap="127.0.0.1:$port"
            rf=1
            wait_for_port "$port" "${broker_pids[0]}" 60
            ;;
        aerostream-rf3)
            "$aerostream" cluster-ca --out "$scratch/certs" --nodes 1,2,3 >/dev/null
            local ports=("$port" "$(free_port)" "$(free_port)") udp=() voters=""
            for n in 1 2 3; do
                udp+=("$(python3 -c 'import socket; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')")
                voters+="${voters:+,}$n@127.0.0.1:${udp[$((n - 1))]}"
            done
            bootstrap=""
            broker_pids=()
            for n in 1 2 3; do
                local kp=${ports[$((n - 1))]}
                (cd "$scratch" && AEROSTREAM_LOG=${AEROSTREAM_LOG:-warn} exec taskset -c "$broker_cpus" "$aerostream" serve \
                    --node-id "$n" --data-dir "$scratch/data-$n" --kafka-addr "127.0.0.1:$kp" \
                    --advertised-kafka-addr "127.0.0.1:$kp" --http-addr "127.0.0.1:$(free_port)" \
                    --native-addr "127.0.0.1:$(free_port)" \
                    --cluster-addr "127.0.0.1:${udp[$((n - 1))]}" --voters "$voters" \
                    --cluster-certs "$scratch/certs" --shards "$shards") >>"${log%.log}-$n.log" 2>&1 &
                broker_pids+=($!)
                bootstrap+="${bootstrap:+,}127.0.0.1:$kp"
            done
            rf=3
            for n in 0 1 2; do wait_for_port "${ports[$n]}" "${broker_pids[$n]}" 120; done
            ;;
        kafka | kafka-rf3)
            local nodes=1
            [ "$name" = kafka-rf3 ] && nodes=3
            if ! start_kafka "$nodes" "$scratch" "$log" "$port" "$broker_cpus" "$kafka_heap"; then
                broker_pids=("${kafka_pids[@]}")
                echo "$name did not start; see $log" >&2
                exit 1
            fi
            broker_pids=("${kafka_pids[@]}")
            bootstrap=$kafka_bootstrap
            rf=$nodes
            ;;
    esac
}

# broker_usage: "CPU-TICKS RSS-KIB", summed over the broker processes.
broker_usage() {
    local p ticks=0 rss=0 t r
    for p in "${broker_pids[@]}"; do
        # utime and stime are fields 14 and 15; the name (field 2) may hold spaces
        t=$(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')
        r=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status")
        ticks=$((ticks + t))
        rss=$((rss + r))
    done
    echo "$ticks $rss"
}
clk_tck=$(getconf CLK_TCK)

# step NAME LOG COMMAND...: runs a measured step, its output to LOG (and the
# terminal); sets step_cpu_us (broker CPU µs per record, of N records in
# step_records) and step_rss_mib.
step_records=0
step() {
    local name=$1 log=$2 before after rc
    shift 2
    echo "--- $name" | tee -a "$log"
    before=$(broker_usage)
    set +e
    "$@" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    set -e
    after=$(broker_usage)
    if [ "$rc" -ne 0 ]; then
        echo "!!! $name exited $rc" | tee -a "$log" "$out/kafka-perf-tools-failures.txt"
        status=1
    fi
    read -r t0 _ <<<"$before"
    read -r t1 r1 <<<"$after"
    step_cpu_us=$(python3 -c "import sys; t,hz,n=map(int,sys.argv[1:]); print(f'{t*1e6/hz/max(n,1):.1f}')" "$((t1 - t0))" "$clk_tck" "$step_records")
    step_rss_mib=$((r1 / 1024))
    echo "broker CPU: $((t1 - t0)) ticks ($step_cpu_us µs/record), RSS $step_rss_mib MiB" | tee -a "$log"
}

# parse_producer LOG: "records/s | MB/s | avg | p50 | p99 | p99.9" from the
# last summary line, e.g. "1000000 records sent, 245338.6 records/sec
# (23.40 MB/sec), 112.27 ms avg latency, 516.00 ms max latency, 96 ms 50th,
# 270 ms 95th, 419 ms 99th, 502 ms 99.9th."
parse_producer() {
    grep -E '^[0-9]+ records sent, .* 99\.9th\.$' "$1" | tail -n1 | sed -E \
        's/^[0-9]+ records sent, ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\), ([0-9.]+) ms avg latency, [0-9.]+ ms max latency, ([0-9]+) ms 50th, [0-9]+ ms 95th, ([0-9]+) ms 99th, ([0-9]+) ms 99\.9th\.$/\1 | \2 | \3 | \4 | \5 | \6/'
}

# parse_consumer LOG: "records/s | MB/s | join ms | total MB/s" from the CSV
# line after ConsumerPerformance's header (start.time, end.time,
# data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
# rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec).
parse_consumer() {
    grep -A1 '^start.time, end.time' "$1" | tail -n1 | awk -F', *' '{printf "%.1f | %.2f | %d | %.2f", $10, $9, $7, $4}'
}

producer() {
    local topic=$1 n=$2 tput=$3
    "${tools_java[@]}" org.apache.kafka.tools.ProducerPerformance --topic "$topic" \
        --num-records "$n" --record-size "$record_size" --throughput "$tput" \
        --producer-props "bootstrap.servers=$bootstrap" "acks=$acks" "${producer_props[@]}"
}

status=0
produce_rows=()
consume_rows=()
sync
sleep "${SETTLE_SECONDS:-5}"
for b in "${brokers[@]}"; do
    echo "=== $b"
    blog="$out/perf-$b-broker.log"
    start_broker "$b" "$blog"
    echo "$b serves on $bootstrap (pids ${broker_pids[*]})"
    tlog="$out/perf-$b-topics.log"
    for t in perf-warmup perf-max perf-rate; do
        "${tools_java[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
            --topic "$t" --partitions "$partitions" --replication-factor "$rf" >>"$tlog" 2>&1 \
            || { echo "creating $t on $b failed; see $tlog" >&2; tail -n 5 "$tlog" >&2; exit 1; }
    done
    if [ "$warmup_records" -gt 0 ]; then
        step_records=$warmup_records
        step "$b: warm-up, $warmup_records records (not reported)" "$out/perf-$b-warmup.log" \
            producer perf-warmup "$warmup_records" -1
    fi
    step_records=$records
    plog="$out/perf-$b-produce.log"
    step "$b: produce $records records, unthrottled" "$plog" producer perf-max "$records" -1
    produce_rows+=("| $b | unthrottled | $records | $(parse_producer "$plog" || echo 'n/a | n/a | n/a | n/a | n/a | n/a') | $step_cpu_us | $step_rss_mib |")
    clog="$out/perf-$b-consume.log"
    step "$b: consume $records records" "$clog" "${tools_java[@]}" org.apache.kafka.tools.ConsumerPerformance \
        --bootstrap-server "$bootstrap" --topic perf-max --messages "$records" --timeout 60000 \
        --group "perf-consumer-$b-$$"
    consume_rows+=("| $b | $records | $(parse_consumer "$clog" || echo 'n/a | n/a | n/a | n/a') | $step_cpu_us | $step_rss_mib |")
    if [ "$throughput" -gt 0 ]; then
        step_records=$rate_records
        rlog="$out/perf-$b-produce-rate.log"
        step "$b: produce $rate_records records at $throughput records/s" "$rlog" \
            producer perf-rate "$rate_records" "$throughput"
        produce_rows+=("| $b | $throughput/s | $rate_records | $(parse_producer "$rlog" || echo 'n/a | n/a | n/a | n/a | n/a | n/a') | $step_cpu_us | $step_rss_mib |")
    fi
    du -sh "$scratch" 2>/dev/null | awk '{print "data on disk: " $1}'
    stop_brokers
    case $b in kafka*) keep_kafka_logs "$scratch" "$blog" ;; esac
    rm -rf "$scratch"
    scratch=
    sync
    sleep "${SETTLE_SECONDS:-5}"
done

{
    echo "$header"
    echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "Produce (kafka-producer-perf-test; latency from send() to the acknowledgement, in ms):"
    echo
    echo "| broker | rate | records | records/s | MB/s | avg ms | p50 ms | p99 ms | p99.9 ms | broker CPU µs/record | broker RSS MiB |"
    echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
    # rows by run, brokers side by side
    for kind in unthrottled "$throughput/s"; do
        for row in "${produce_rows[@]}"; do
            case $row in *"| $kind |"*) echo "$row" ;; esac
        done
    done
    echo
    echo "Consume (kafka-consumer-perf-test; records/s and MB/s over the fetch time, after the group join; total MB/s includes the join):"
    echo
    echo "| broker | records | records/s | MB/s | join ms | total MB/s | broker CPU µs/record | broker RSS MiB |"
    echo "|---|--:|--:|--:|--:|--:|--:|--:|"
    printf '%s\n' "${consume_rows[@]}"
} >"$table"
echo
sed -n '/^Produce/,$p' "$table"
echo "results in $table (and perf-*.log)"
exit $status
