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
