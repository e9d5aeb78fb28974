#!/usr/bin/env bash
# Builds the release binary and runs a three-agent AeroStream cluster on this
# machine, every agent a metastore voter:
#
#   agent  kafka            http             cluster (UDP, QUIC)
#   1      127.0.0.1:19092  127.0.0.1:19001  127.0.0.1:19093
#   2      127.0.0.1:29092  127.0.0.1:29001  127.0.0.1:29093
#   3      127.0.0.1:39092  127.0.0.1:39001  127.0.0.1:39093
#
# Data, certificates, logs and pid files go under $AEROSTREAM_CLUSTER_DIR
# (default ./cluster-data). Certificates are created once, on first start.
# Extra arguments go to every `aerostream serve`.
#
#   scripts/cluster.sh          start (or restart what is not running)
#   scripts/cluster.sh stop     stop all three (SIGTERM, clean shutdown)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${AEROSTREAM_CLUSTER_DIR:-$PWD/cluster-data}"
NODES=(1 2 3)
VOTERS="1@127.0.0.1:19093,2@127.0.0.1:29093,3@127.0.0.1:39093"

running() { [ -f "$DIR/agent-$1.pid" ] && kill -0 "$(cat "$DIR/agent-$1.pid")" 2>/dev/null; }

if [ "${1:-}" = "stop" ]; then
  for n in "${NODES[@]}"; do
    if running "$n"; then
      pid=$(cat "$DIR/agent-$n.pid")
      kill -TERM "$pid"
      for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      echo "agent $n stopped"
    fi
    rm -f "$DIR/agent-$n.pid"
  done
  exit 0
fi

scripts/setup.sh --build-only
# setup.sh may just have installed Rust under ~/.cargo.
if ! command -v cargo >/dev/null 2>&1; then export PATH="$HOME/.cargo/bin:$PATH"; fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --locked -p agent --bin aerostream
BIN="$CARGO_TARGET_DIR/release/aerostream"

mkdir -p "$DIR"
missing=()
for n in "${NODES[@]}"; do [ -f "$DIR/certs/node-$n.pem" ] || missing+=("$n"); done
if [ "${#missing[@]}" -gt 0 ]; then
  "$BIN" cluster-ca --out "$DIR/certs" --nodes "$(IFS=,; echo "${missing[*]}")"
fi

for n in "${NODES[@]}"; do
  if running "$n"; then
    echo "agent $n is already running (pid $(cat "$DIR/agent-$n.pid"))"
    continue
  fi
  nohup "$BIN" serve \
    --node-id "$n" \
    --data-dir "$DIR/agent-$n" \
    --kafka-addr "127.0.0.1:${n}9092" \
    --http-addr "127.0.0.1:${n}9001" \
    --native-addr "127.0.0.1:${n}9091" \
    --cluster-addr "127.0.0.1:${n}9093" \
    --voters "$VOTERS" \
    --cluster-certs "$DIR/certs" \
    --rack "rack-$n" \
    "$@" >>"$DIR/agent-$n.log" 2>&1 &
  echo $! >"$DIR/agent-$n.pid"
done

# Agents wait for each other; each answers /health once it serves Kafka.
deadline=$(( $(date +%s) + 120 ))
for n in "${NODES[@]}"; do
  until curl -sf "http://127.0.0.1:${n}9001/health" >/dev/null 2>&1; do
    if ! running "$n"; then
      echo "agent $n exited; its log:" >&2
      tail -n 20 "$DIR/agent-$n.log" >&2
      exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "agent $n does not serve after 120 s; see $DIR/agent-$n.log" >&2
      exit 1
    fi
    sleep 0.2
  done
done

cat <<EOF
three agents serve (logs in $DIR/agent-N.log):
  bootstrap servers: 127.0.0.1:19092,127.0.0.1:29092,127.0.0.1:39092
  try:  kcat -b 127.0.0.1:19092 -L
  stop: scripts/cluster.sh stop
EOF
