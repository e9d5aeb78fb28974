# Helpers shared by the benchmark and CI load-test scripts (sourced).

# Prints a free TCP port on 127.0.0.1 (the kernel picks it).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_for_port PORT PID SECONDS: waits until something accepts on the port;
# fails early if process PID died.
wait_for_port() {
    local port=$1 pid=$2 secs=$3 i
    for ((i = 0; i < secs * 10; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "broker process $pid exited before listening on $port" >&2
            return 1
        fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "nothing listens on 127.0.0.1:$port after ${secs}s" >&2
    return 1
}

# stop_pid PID: SIGTERM, then SIGKILL after 15 s.
stop_pid() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 150; i++)); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
        sleep 0.1
    done
    echo "process $pid ignored SIGTERM for 15s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# start_kafka NODES DIR LOG PORT CPUS HEAP: Apache Kafka (scripts/kafka.sh)
# as NODES KRaft nodes that are broker and controller each, every one a
# voter of the one controller quorum, each pinned with taskset to CPUS (the
# JVM inherits the affinity and sizes its GC and compiler threads to it),
# node n in DIR/kafka-n with the heap HEAP (-Xms and -Xmx), the first on
# PORT. kafka.sh's output goes to LOG, or LOG-n.log for several nodes. No
# authorizer, as AeroStream without logins; flush settings are Kafka's
# defaults; with 3 nodes or more the consumer offsets and transaction state
# are replicated three times. Sets kafka_pids (the java processes, to sample
# and stop) and kafka_bootstrap.
start_kafka() {
    local nodes=$1 dir=$2 log=$3 port=$4 cpus=$5 heap=$6
    local kafka_sh n id voters="" nlog cports=() kports=("$port")
    local extra=(--config authorizer.class.name=)
    kafka_sh="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/kafka.sh"
    for ((n = 1; n <= nodes; n++)); do
        [ "$n" -gt 1 ] && kports+=("$(free_port)")
        cports+=("$(free_port)")
        voters+="${voters:+,}$n@127.0.0.1:${cports[$((n - 1))]}"
    done
    if [ "$nodes" -ge 3 ]; then
        extra+=(--config offsets.topic.replication.factor=3
            --config transaction.state.log.replication.factor=3
            --config transaction.state.log.min.isr=2
            --config share.coordinator.state.topic.replication.factor=3
            --config share.coordinator.state.topic.min.isr=2)
    fi
    # a cluster id is 16 random bytes in URL-safe base64 without padding
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    id="A${id:1}"
    kafka_pids=()
    kafka_bootstrap=""
    for ((n = 1; n <= nodes; n++)); do
        nlog=$log
        [ "$nodes" -gt 1 ] && nlog="${log%.log}-$n.log"
        taskset -c "$cpus" "$kafka_sh" --dir "$dir/kafka-$n" \
            --port "${kports[$((n - 1))]}" --controller-port "${cports[$((n - 1))]}" \
            --node-id "$n" --voters "$voters" --cluster-id "$id" --heap "$heap" \
            "${extra[@]}" --no-wait >>"$nlog" 2>&1 || return 1
        kafka_pids+=("$(cat "$dir/kafka-$n/kafka.pid")")
        kafka_bootstrap+="${kafka_bootstrap:+,}127.0.0.1:${kports[$((n - 1))]}"
    done
    # a node serves once a majority of the voters is up
    for ((n = 1; n <= nodes; n++)); do
        nlog=$log
        [ "$nodes" -gt 1 ] && nlog="${log%.log}-$n.log"
        "$kafka_sh" wait --dir "$dir/kafka-$n" --timeout 300 >>"$nlog" 2>&1 || return 1
        wait_for_port "${kports[$((n - 1))]}" "${kafka_pids[$((n - 1))]}" 60 || return 1
    done
}

# keep_kafka_logs DIR LOG: keeps each node's own logs, about to be deleted
# with DIR: server.log is appended to LOG (LOG-n.log for several nodes),
# the GC log copied beside it (LOG-gc.log, LOG-n-gc.log).
keep_kafka_logs() {
    local dir=$1 log=$2 d n nodes nlog
    nodes=$(find "$dir" -maxdepth 1 -name 'kafka-*' | wc -l)
    for d in "$dir"/kafka-*; do
        n=${d##*-}
        nlog=$log
        [ "$nodes" -gt 1 ] && nlog="${log%.log}-$n.log"
        if [ -f "$d/logs/server.log" ]; then cat "$d/logs/server.log" >>"$nlog"; fi
        if [ -f "$d/logs/gc.log" ]; then cp "$d/logs/gc.log" "${nlog%.log}-gc.log"; fi
    done
    return 0
}
