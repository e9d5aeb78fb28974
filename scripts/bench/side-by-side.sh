#!/usr/bin/env bash
# Side-by-side benchmark: AeroStream and the peer brokers Apache Kafka and
# tansu, started one after the other on this machine with the same CPU
# pinning, driven by the same `loadtest` workloads, and AeroStream reached
# by several ways in (the Kafka wire, the native protocol over TCP, and over
# QUIC). Writes raw JSON, logs and a markdown table with ratios to
# benchmarks/results/<date>-<machine>/.
#
# Usage: scripts/bench/side-by-side.sh [WORKLOAD...]
#   WORKLOAD  names under loadtest/workloads/ (default: small-20k small-50k small-max)
#
# AeroStream against Apache Kafka 4.1.1, one node and three, with a warm-up
# long enough for Kafka's JIT on one CPU (benchmarks/METHOD.md):
#   WARMUP=30s BROKERS="aerostream kafka aerostream-rf3 kafka-rf3" scripts/bench/side-by-side.sh small-20k small-50k small-max
#
# The ways in to one broker, side by side (scripts/bench/ways-in.sh does this):
#   BROKERS=aerostream DRIVERS="kafka native-tcp" scripts/bench/side-by-side.sh
#
# Environment:
#   DRIVERS         ways in, in order (default: "kafka"): "kafka" (librdkafka
#                   over the Kafka wire), "native-tcp" (the SDK over the
#                   native protocol, aero://), "native-quic" (aero+quic://,
#                   trusting each agent's own CA). Native ways in apply to the
#                   aerostream brokers only; other brokers skip them. Every
#                   (workload, broker, way in) gets a fresh broker.
#   BASELINE        row the ratios are taken against (default: aerostream when
#                   comparing brokers, kafka when comparing the ways in to one
#                   broker, "aerostream / kafka" when both vary)
#   NATIVE_RUNTIME  loadtest --native-runtime for native ways in (default:
#                   the tool's, shared:1)
#   BROKERS         which brokers, in order (default: "aerostream tansu-memory tansu-sqlite");
#                   "floor" is `loadtest mock-broker` (librdkafka's built-in mock
#                   cluster, a broker that does the least possible work), pinned
#                   like the others, so its row shows what the load generator
#                   itself costs: BROKERS="floor aerostream" gives a floor row
#                   per workload and a table of multiples of the floor;
#                   its consumers fetch with fetch.wait.max.ms=FLOOR_FETCH_WAIT_MS
#                   (default 1; the mock does not wake a waiting fetch);
#                   "aerostream-fsync" is AeroStream with --write-caching false
#                   (acks=all answered after a shared fdatasync);
#                   "aerostream-tls" is AeroStream with TLS on its Kafka
#                   listener (a test CA made with openssl), its clients on
#                   security.protocol=ssl (the loadtest is then built with
#                   --features tls, which needs libssl-dev);
#                   "aerostream-rf3" is three AeroStream agents forming a
#                   cluster, all on BROKER_CPUS, with the topic replicated
#                   three times (CPU and memory are the three agents' sum);
#                   "kafka" is Apache Kafka 4.1.1 (scripts/kafka.sh), one
#                   KRaft node that is broker and controller, its log dirs
#                   in the scratch folder where AeroStream keeps its data,
#                   no authorizer (as AeroStream without logins), Kafka's
#                   flush defaults (no fsync before acks=all: the peer of
#                   "aerostream", not of "aerostream-fsync"); "kafka-rf3" is
#                   three such nodes forming one controller quorum (three
#                   voters), all on BROKER_CPUS, the topic and the consumer
#                   offsets replicated three times (CPU and memory summed).
#                   The JVM's CPU and RSS are sampled from /proc like the
#                   others' (all its threads: GC, JIT, request handlers)
#   KAFKA_HEAP      heap of each Kafka JVM, as -Xms and -Xmx (default: 1g,
#                   the heap of Kafka's own kafka-server-start.sh)
#   JAVA_HOME       the JDK that runs Kafka (default: java on PATH)
#   TANSU_BIN       tansu binary (default: `tansu` on PATH). It is not built
#                   here; install it once with
#                   cargo install tansu --version 0.6.0 --locked --features libsql,dynostore --root DIR
#   AEROSTREAM_BIN  aerostream binary (default: built here with --release)
#   LOADTEST_BIN    loadtest binary (default: built here with --release)
#   BROKER_CPUS     taskset CPU list for the broker (default: 0)
#   LOADGEN_CPUS    taskset CPU list for the load generator (default: 1, or 0 on one CPU)
#   SHARDS          aerostream --shards (default: number of CPUs in BROKER_CPUS)
#   DURATION, WARMUP  override every workload's measurement / warm-up time (e.g. 30s)
#   SETTLE_SECONDS  pause after each broker's data is deleted and the page
#                   cache written back with sync (default: 5): on a filesystem
#                   mounted with `discard`, deleting gigabytes of segments
#                   sends discards for a while, and the next run's first
#                   seconds would measure them
#   RESULTS_DIR     output folder (default: benchmarks/results/<date>-<host>)
#   AUTOGROUP_NICE  scheduler weight of the benchmark's session (default: -10;
#                   empty to leave it alone). With autogroup scheduling every
#                   session gets an equal CPU share whatever its processes'
#                   nice values, so on a machine busy with other work (builds)
#                   a broker pinned to one CPU may get a fraction of it and
#                   every figure measures the contention instead.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh

# Build first, at normal priority.
if [ -z "${BENCH_IN_SESSION:-}" ]; then
    target_dir=${CARGO_TARGET_DIR:-$root/target}
    need_build=()
    if [ -z "${AEROSTREAM_BIN:-}" ]; then
        need_build+=(-p agent)
        export AEROSTREAM_BUILT_HERE=1
    fi
    if [ -z "${LOADTEST_BIN:-}" ]; then
        need_build+=(-p loadtest)
        case " ${BROKERS:-} " in
            *" aerostream-tls "*) need_build+=(--features loadtest/tls) ;;
        esac
    fi
    if [ ${#need_build[@]} -gt 0 ]; then
        echo "building ${need_build[*]} (release)"
        cargo build --release "${need_build[@]}"
    fi
    export AEROSTREAM_BIN=${AEROSTREAM_BIN:-$target_dir/release/aerostream}
    export LOADTEST_BIN=${LOADTEST_BIN:-$target_dir/release/loadtest}
    # Run the measurements in a session of their own, with its weight raised.
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

workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(small-20k small-50k small-max)
read -r -a brokers <<<"${BROKERS:-aerostream tansu-memory tansu-sqlite}"
read -r -a ways <<<"${DRIVERS:-kafka}"
for way in "${ways[@]}"; do
    case $way in
        kafka | native-tcp | native-quic) ;;
        *) echo "unknown way in $way in DRIVERS (use kafka, native-tcp, native-quic)" >&2; exit 1 ;;
    esac
done
broker_cpus=${BROKER_CPUS:-0}
if [ "$(nproc)" -gt 1 ]; then loadgen_cpus=${LOADGEN_CPUS:-1}; else loadgen_cpus=${LOADGEN_CPUS:-0}; fi
count_cpus() { python3 -c 'import sys
n=0
for part in sys.argv[1].split(","):
    a,_,b=part.partition("-"); n += (int(b)-int(a)+1) if b else 1
print(n)' "$1"; }
shards=${SHARDS:-$(count_cpus "$broker_cpus")}

aerostream=$AEROSTREAM_BIN
loadtest=$LOADTEST_BIN
tansu=${TANSU_BIN:-$(command -v tansu || true)}
kafka_heap=${KAFKA_HEAP:-1g}
kafka_jar=
kafka_version=
for b in "${brokers[@]}"; do
    case $b in
        tansu-*) [ -x "$tansu" ] || { echo "tansu not found: set TANSU_BIN (see the header of this script)" >&2; exit 1; } ;;
        kafka | kafka-rf3)
            # Kafka's jars, fetched through Maven the first time, before any
            # measurement.
            [ -n "$kafka_jar" ] || kafka_jar=$(scripts/kafka.sh classpath | tr ':' '\n' | grep '/kafka_2.13-' | xargs basename)
            kafka_version=${kafka_jar#kafka_2.13-}
            kafka_version=${kafka_version%.jar}
            ;;
    esac
done
java_bin=java
if [ -n "${JAVA_HOME:-}" ]; then java_bin=$JAVA_HOME/bin/java; fi

# A guest kernel's free page reporting (virtio-balloon) returns free memory
# to the hypervisor; where it is on, a run's page-cache writes may each
# fault on the host first, which makes the copy into the page cache several
# times slower and varies from run to run.
reporting=/sys/module/page_reporting/parameters
reported_kib() { cat "$reporting/reported_kib" 2>/dev/null || echo 0; }

out=${RESULTS_DIR:-benchmarks/results/$(date +%Y-%m-%d)-$(hostname -s)}
mkdir -p "$out"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname -s)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
    echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "kernel: $(uname -r)"
    head=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [ -n "${AEROSTREAM_BUILT_HERE:-}" ]; then
        echo "aerostream: $head ($aerostream, --shards $shards)"
    else
        echo "aerostream: $aerostream given by AEROSTREAM_BIN, built $(date -u -r "$aerostream" +%Y-%m-%dT%H:%M:%SZ) (checkout at $head; the binary may be older), --shards $shards"
    fi
    [ -x "${tansu:-}" ] && echo "tansu: $("$tansu" --version 2>/dev/null || echo unknown) ($tansu)"
    if [ -n "$kafka_jar" ]; then
        echo "kafka: Apache Kafka $kafka_version (scripts/kafka.sh), KRaft, broker and controller in one JVM per node; $("$java_bin" -version 2>&1 | head -n1) ($java_bin); heap -Xms$kafka_heap -Xmx$kafka_heap per node, G1 with Kafka's start-script flags; no authorizer; flush: Kafka's defaults (log.flush.interval.messages and .ms unset: acks=all is answered once the leader's log has the batch in the page cache and, at RF 3, every in-sync follower has fetched it; no fsync per message, as aerostream with write caching on; the peer of aerostream-fsync would be log.flush.interval.messages=1, not run)"
        case " ${brokers[*]} " in
            *" kafka-rf3 "*) echo "kafka-rf3: three nodes, three voters, topic and __consumer_offsets at RF 3, min.insync.replicas 1 (Kafka's default)" ;;
        esac
    fi
    case " ${brokers[*]} " in
        *" floor "*) echo "floor: $loadtest mock-broker (librdkafka's mock cluster), its consumers with fetch.wait.max.ms=${FLOOR_FETCH_WAIT_MS:-1}" ;;
    esac
    echo "pinning: broker on CPUs $broker_cpus, load generator on CPUs $loadgen_cpus"
    echo "broker data: scratch folders under ${TMPDIR:-/tmp} ($(df -PT "${TMPDIR:-/tmp}" | awk 'NR==2 {print $1 ", " $2}')), for every broker"
    echo "scheduler: benchmark session autogroup $autogroup"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other processes share these CPUs; figures are only comparable within one run)"
    if [ -r "$reporting/reported_kib" ]; then
        echo "free page reporting: on (order $(cat "$reporting/page_reporting_order" 2>/dev/null || echo '?'), min_free_ms $(cat "$reporting/min_free_ms" 2>/dev/null || echo '?')): this VM hands free memory back to its host, and the first write to each page-cache page afterwards faults on the host; each run's log says how much was handed back during it"
    fi
    echo "command: scripts/bench/side-by-side.sh ${workloads[*]} (BROKERS=\"${brokers[*]}\" DRIVERS=\"${ways[*]}\" NATIVE_RUNTIME=${NATIVE_RUNTIME:-default} DURATION=${DURATION:-file} WARMUP=${WARMUP:-file})"
} >"$out/machine.txt"
cat "$out/machine.txt"

broker_pid=
broker_pids=()
http_ports=()
bootstrap=
# Native listeners of the running aerostream agents (HOST:PORT, comma-separated).
native_hosts=
rf=1
scratch=
current=
stop_brokers() {
    local p
    # all at once: a Kafka node that outlives the quorum's majority waits
    # for it before it stops
    for p in "${broker_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${broker_pids[@]}"; do stop_pid "$p"; done
    broker_pids=()
    broker_pid=
}
cleanup() {
    # `if`, not `&&`: under set -e a false test as the trap's last command
    # would turn a successful run's exit status into 1.
    stop_brokers
    if [ -n "$scratch" ]; then rm -rf "$scratch"; fi
}

# way_url WAY: the --bootstrap of a way in to the running broker.
way_url() {
    case $1 in
        kafka) echo "$bootstrap" ;;
        native-tcp) echo "aero://$native_hosts" ;;
        # QUIC on the UDP port of the native TCP port's number
        native-quic) echo "aero+quic://$native_hosts" ;;
    esac
}
trap cleanup EXIT

# Extra `loadtest run` arguments the running broker needs (the floor's topic).
run_args=()

# wait_for_ready LOG OFFSET PATTERN PID SECONDS: prints the first line of LOG
# past byte OFFSET that contains PATTERN, once there is one; fails if process
# PID exits first or after SECONDS.
wait_for_ready() {
    local log=$1 offset=$2 pattern=$3 pid=$4 secs=$5 i line
    for ((i = 0; i < secs * 10; i++)); do
        line=$(tail -c "+$((offset + 1))" "$log" 2>/dev/null | grep -m1 -F "$pattern" || true)
        if [ -n "$line" ]; then
            echo "$line"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "broker process $pid exited before printing '$pattern'" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "no '$pattern' in $log after ${secs}s" >&2
    return 1
}

# make_test_certs DIR: a throw-away CA and a server certificate for 127.0.0.1.
make_test_certs() {
    local d=$1
    mkdir -p "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=bench CA" -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "/CN=127.0.0.1" -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/ext.cnf"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -days 2 -extfile "$d/ext.cnf" -out "$d/server.pem" 2>/dev/null
}

# start_broker NAME PORT WORKLOAD_FILE: starts it pinned, in a fresh scratch folder.
start_broker() {
    local name=$1 port=$2 workload_file=$3
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/bench-$name.XXXXXX")
    local log="$out/$current-broker.log"
    native_hosts=
    run_args=()
    local native_port
    case $name in
        aerostream | aerostream-fsync | aerostream-tls)
            local caching=true tls=()
            [ "$name" = aerostream-fsync ] && caching=false
            if [ "$name" = aerostream-tls ]; then
                make_test_certs "$scratch/tls"
                tls=(--kafka-tls-cert "$scratch/tls/server.pem" --kafka-tls-key "$scratch/tls/server.key")
                run_args=(--client-config security.protocol=ssl
                    --client-config "ssl.ca.location=$scratch/tls/ca.pem")
            fi
            native_port=$(free_port)
            native_hosts="127.0.0.1:$native_port"
            (cd "$scratch" && AEROSTREAM_LOG=${AEROSTREAM_LOG:-warn} exec taskset -c "$broker_cpus" "$aerostream" serve \
                --data-dir "$scratch/data" --kafka-addr "127.0.0.1:$port" \
                --advertised-kafka-addr "127.0.0.1:$port" --http-addr "127.0.0.1:$(free_port)" \
                --native-addr "127.0.0.1:$native_port" \
                --shards "$shards" --write-caching "$caching" "${tls[@]}") >>"$log" 2>&1 &
            broker_pid=$!
            broker_pids=("$broker_pid")
            bootstrap="127.0.0.1:$port"
            rf=1
            wait_for_port "$port" "$broker_pid" 60
            wait_for_port "$native_port" "$broker_pid" 60
            return 0
            ;;
        floor)
            # librdkafka's mock cluster picks its own port and does not
            # implement CreateTopics: it makes the run's topic, with the
            # workload's partitions, when it starts.
            local topic="floor-$current" offset=0 ready
            [ -f "$log" ] && offset=$(wc -c <"$log")
            (cd "$scratch" && exec taskset -c "$broker_cpus" "$loadtest" mock-broker \
                --topic "$topic" --workload "$root/$workload_file") >>"$log" 2>&1 &
            broker_pid=$!
            broker_pids=("$broker_pid")
            rf=1
            ready=$(wait_for_ready "$log" "$offset" "loadtest mock-broker listening kafka=" "$broker_pid" 60)
            bootstrap=$(echo "$ready" | sed -E 's/.* kafka=([^ ]+).*/\1/')
            # The mock holds a fetch that finds no data for the consumer's
            # whole fetch.wait.max.ms (500 ms by default) even when records
            # arrive meanwhile; a real broker answers as soon as they do.
            # A 1 ms wait stands in for that wake-up (at most one empty
            # fetch per millisecond per consumer, as a woken long poll).
            run_args=(--topic "$topic" --no-create
                --consumer-config "fetch.wait.max.ms=${FLOOR_FETCH_WAIT_MS:-1}")
            return 0
            ;;
        tansu-memory | tansu-sqlite)
            local engine="memory://tansu/"
            [ "$name" = tansu-sqlite ] && engine="sqlite://tansu.db"
            (cd "$scratch" && RUST_LOG=${RUST_LOG:-warn} exec taskset -c "$broker_cpus" "$tansu" broker \
                --kafka-listener-url "tcp://127.0.0.1:$port" \
                --kafka-advertised-listener-url "tcp://127.0.0.1:$port" \
                --storage-engine "$engine") >>"$log" 2>&1 &
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
            broker_pid=$(IFS=,; echo "${broker_pids[*]}")
            return 0
            ;;
        aerostream-rf3)
            # three agents, voters 1-3, on the same CPUs; Kafka on PORT and two more
            "$aerostream" cluster-ca --out "$scratch/certs" --nodes 1,2,3 >/dev/null
            local ports=("$port" "$(free_port)" "$(free_port)") udp=() voters="" n
            for n in 1 2 3; do
                udp+=("$(python3 -c 'import socket; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')")
                voters+="${voters:+,}$n@127.0.0.1:${udp[$((n - 1))]}"
            done
            bootstrap=""
            http_ports=()
            local natives=()
            for n in 1 2 3; do
                local kp=${ports[$((n - 1))]} hp
                hp=$(free_port)
                http_ports+=("$hp")
                native_port=$(free_port)
                natives+=("$native_port")
                native_hosts+="${native_hosts:+,}127.0.0.1:$native_port"
                (cd "$scratch" && AEROSTREAM_LOG=${AEROSTREAM_LOG:-warn} exec taskset -c "$broker_cpus" "$aerostream" serve \
                    --node-id "$n" --data-dir "$scratch/data-$n" --kafka-addr "127.0.0.1:$kp" \
                    --advertised-kafka-addr "127.0.0.1:$kp" --http-addr "127.0.0.1:$hp" \
                    --native-addr "127.0.0.1:$native_port" \
                    --cluster-addr "127.0.0.1:${udp[$((n - 1))]}" --voters "$voters" \
                    --cluster-certs "$scratch/certs" --shards "$shards") >>"${log%.log}-$n.log" 2>&1 &
                broker_pids+=($!)
                bootstrap+="${bootstrap:+,}127.0.0.1:$kp"
            done
            rf=3
            for n in 0 1 2; do
                wait_for_port "${ports[$n]}" "${broker_pids[$n]}" 120
                wait_for_port "${natives[$n]}" "${broker_pids[$n]}" 120
            done
            broker_pid=$(IFS=,; echo "${broker_pids[*]}")
            return 0
            ;;
        *) echo "unknown broker $name" >&2; exit 1 ;;
    esac
    broker_pid=$!
    broker_pids=("$broker_pid")
    bootstrap="127.0.0.1:$port"
    rf=1
    wait_for_port "$port" "$broker_pid" 60
}

# replication_bytes: replica fetch bytes the agents' leaders sent, per record
# byte they appended (from each agent's /metrics).
replication_bytes() {
    local hp sent=0 produced=0 m
    for hp in "${http_ports[@]}"; do
        m=$(curl -s "http://127.0.0.1:$hp/metrics") || return 1
        sent=$((sent + $(echo "$m" | awk '/^aerostream_replica_fetch_bytes_sent_total/ {print $2}')))
        produced=$((produced + $(echo "$m" | awk '/^aerostream_produced_bytes_total/ {print $2}')))
    done
    python3 -c "import sys; s,p=int(sys.argv[1]),int(sys.argv[2]); print(f'replication: {s} replica fetch bytes sent for {p} bytes produced ({s/max(p,1):.2f} per byte)')" "$sent" "$produced"
}

# broker_note BROKER: what the broker of a row is, for the table's notes.
broker_note() {
    case $1 in
        aerostream) echo "AeroStream, one agent, --shards $shards, write caching on (acks=all answered once the append is in the page cache, before fsync)" ;;
        aerostream-fsync) echo "AeroStream, one agent, write caching off (acks=all answered after a shared fdatasync)" ;;
        aerostream-tls) echo "AeroStream, one agent, TLS on its Kafka listener" ;;
        aerostream-rf3) echo "three AeroStream agents on the broker's CPUs, topic at RF 3; CPU and RSS are their sum" ;;
        kafka) echo "Apache Kafka $kafka_version, KRaft, one node as broker and controller, JVM heap -Xms$kafka_heap -Xmx$kafka_heap (G1), flush defaults: acks=all answered before fsync, as aerostream" ;;
        kafka-rf3) echo "three Apache Kafka $kafka_version nodes (broker and controller each, three voters) on the broker's CPUs, heap -Xms$kafka_heap -Xmx$kafka_heap each, topic and consumer offsets at RF 3, flush defaults; CPU and RSS are their sum" ;;
        tansu-memory) echo "tansu, in-memory engine (no durability work)" ;;
        tansu-sqlite) echo "tansu, SQLite engine (WAL, synchronous=normal)" ;;
        floor) echo "loadtest mock-broker (librdkafka's mock cluster), consumers with fetch.wait.max.ms=${FLOOR_FETCH_WAIT_MS:-1}" ;;
        *) echo "$1" ;;
    esac
}

# settle_disk: writes back everything dirty (sync returns once it is on
# disk), then waits SETTLE_SECONDS more, so one run's deleted data is not
# still being written back or discarded while the next is measured.
settle_disk() {
    sync
    sleep "${SETTLE_SECONDS:-5}"
}

overrides=()
[ -n "${DURATION:-}" ] && overrides+=(--duration "$DURATION")
[ -n "${WARMUP:-}" ] && overrides+=(--warmup "$WARMUP")

status=0
settle_disk
for w in "${workloads[@]}"; do
    file=loadtest/workloads/$w.yaml
    [ -f "$file" ] || { echo "no workload $file" >&2; exit 1; }
    for b in "${brokers[@]}"; do
        for way in "${ways[@]}"; do
            case $way-$b in
                native-*-aerostream*) ;;
                native-*)
                    echo "=== $w on $b: $way skipped ($b does not speak the native protocol) ==="
                    continue
                    ;;
            esac
            # Kafka-wire results keep their historical names.
            run=$w-$b
            [ "$way" = kafka ] || run=$w-$b-$way
            current=$run
            port=$(free_port)
            start_broker "$b" "$port" "$file"
            driver_args=(--driver kafka)
            case $way in
                native-*)
                    driver_args=(--driver native)
                    [ -n "${NATIVE_RUNTIME:-}" ] && driver_args+=(--native-runtime "$NATIVE_RUNTIME")
                    # each agent's own CA, written into its data folder
                    for ca in "$scratch"/data*/native-tls/ca.pem; do
                        [ -e "$ca" ] && driver_args+=(--native-tls-ca "$ca")
                    done
                    ;;
            esac
            if ! url=$(way_url "$way"); then
                echo "!!! $run: no URL for $way" | tee -a "$out/failures.txt"
                status=1
                stop_brokers
                rm -rf "$scratch"
                scratch=
                continue
            fi
            echo "=== $w on $b via $way ($url) ==="
            reported_before=$(reported_kib)
            set +e
            taskset -c "$loadgen_cpus" "$loadtest" run --workload "$file" "${driver_args[@]}" \
                --bootstrap "$url" --broker-label "$b" --broker-pid "$broker_pid" \
                --replication-factor "$rf" "${run_args[@]}" \
                --json "$out/$run.json" "${overrides[@]}" 2>&1 | tee "$out/$run.log"
            rc=${PIPESTATUS[0]}
            set -e
            if [ -r "$reporting/reported_kib" ]; then
                echo "free page reporting: $(( ($(reported_kib) - reported_before) / 1024 )) MiB handed back to the host during the run" | tee -a "$out/$run.log"
            fi
            if [ "$rc" -ne 0 ]; then
                echo "!!! $run: loadtest exited $rc" | tee -a "$out/failures.txt"
                status=1
            fi
            if [ "$b" = aerostream-rf3 ]; then
                # bytes the leaders sent to followers, per byte produced
                replication_bytes | tee -a "$out/$run.log" || true
            fi
            stop_brokers
            case $b in kafka*) keep_kafka_logs "$scratch" "$out/$current-broker.log" ;; esac
            rm -rf "$scratch"
            scratch=
            settle_disk
        done
    done
done

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

shopt -s nullglob
results=("$out"/*.json)
if [ ${#results[@]} -gt 0 ]; then
    # Rows are brokers, or ways in when one broker was reached several
    # ways (ratios against aerostream, or against kafka); BASELINE overrides.
    "$loadtest" compare ${BASELINE:+--baseline "$BASELINE"} --out "$out/table.md" "${results[@]}"
    {
        echo
        echo "Brokers of this run (broker on CPUs $broker_cpus, load generator on CPUs $loadgen_cpus; more in machine.txt):"
        echo
        for b in "${brokers[@]}"; do echo "- $b: $(broker_note "$b")"; done
    } >>"$out/table.md"
    echo "results in $out (table.md, *.json, *.log)"
fi
exit $status
