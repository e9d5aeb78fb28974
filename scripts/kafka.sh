#!/usr/bin/env bash
# Runs Apache Kafka's own broker on this machine, as the reference that
# AeroStream's client tests are checked against (tests/java/) and the peer
# of its benchmarks (scripts/bench/side-by-side.sh, kafka-perf-tools.sh):
# by default one KRaft node that is broker and controller at once,
# plaintext on 127.0.0.1.
#
# Kafka's jars come from Maven Central through tests/java/kafka-broker/pom.xml
# into a Maven repository outside the clone ($AEROSTREAM_M2, default
# ~/.cache/aerostream/m2); the classpath is kept beside it, so a second start
# runs no Maven at all and the broker serves within seconds. Needs a JDK 17+
# ($JAVA_HOME/bin/java if JAVA_HOME is set, else java) and, the first time,
# Maven (mvn).
#
#   scripts/kafka.sh [--port 9092] [--controller-port PORT+1] [--dir DIR] [--heap 1g]
#                    [--node-id 1] [--voters ID@HOST:PORT,...] [--cluster-id ID]
#                    [--config KEY=VALUE]... [--no-wait] [--timeout 120]
#       formats DIR (default ./kafka-data) the first time, starts the broker
#       in the background, waits until it serves and prints where its logs
#       are; a broker already running from DIR is left alone
#   scripts/kafka.sh wait [--dir DIR] [--timeout 120]
#                                          waits until the broker from DIR serves
#   scripts/kafka.sh stop [--dir DIR]      stops it (SIGTERM, clean shutdown)
#   scripts/kafka.sh classpath             fetches the jars, prints the classpath
#   scripts/kafka.sh tools-classpath       the same for Kafka's command-line
#                                          tools (scripts/bench/kafka-tools/pom.xml)
#
# The JVM gets the heap of --heap (or $KAFKA_HEAP) as both -Xms and -Xmx and
# the garbage-collector flags and GC log (DIR/logs/gc.log) of Kafka's own
# start script (kafka-run-class.sh: G1, 20 ms pause goal, IHOP 35%).
#
# A cluster: start each node with its own --dir, --port, --controller-port
# and --node-id, the same --voters (every node is a voter, e.g.
# 1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097), the same
# --cluster-id (22 characters of URL-safe base64, used when formatting)
# and --no-wait, then `wait` for each: a node serves only once a majority
# of the voters is up. --config lines are appended to server.properties
# and override what is above them (e.g. offsets.topic.replication.factor=3).
#
# The broker has Kafka's StandardAuthorizer with User:ANONYMOUS as a
# superuser: every request is allowed, and the ACL APIs work, as they do on
# a secured cluster (--config authorizer.class.name= turns it off).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
POM_DIR="$ROOT/tests/java/kafka-broker"
M2="${AEROSTREAM_M2:-$HOME/.cache/aerostream/m2}"
CACHE="$(dirname "$M2")/kafka"

cmd=start
case "${1:-}" in start|wait|stop|classpath|tools-classpath) cmd=$1; shift ;; esac
PORT=9092 CONTROLLER_PORT="" DIR="$ROOT/kafka-data" HEAP="${KAFKA_HEAP:-1g}"
NODE_ID=1 VOTERS="" CLUSTER_ID="" WAIT=yes TIMEOUT=120 EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT=$2; shift 2 ;;
    --controller-port) CONTROLLER_PORT=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --heap) HEAP=$2; shift 2 ;;
    --node-id) NODE_ID=$2; shift 2 ;;
    --voters) VOTERS=$2; shift 2 ;;
    --cluster-id) CLUSTER_ID=$2; shift 2 ;;
    --config) EXTRA+=("$2"); shift 2 ;;
    --no-wait) WAIT=no; shift ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    *) echo "kafka.sh: unknown argument $1 (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
CONTROLLER_PORT=${CONTROLLER_PORT:-$((PORT + 1))}
VOTERS=${VOTERS:-$NODE_ID@127.0.0.1:$CONTROLLER_PORT}
JAVA=java
if [ -n "${JAVA_HOME:-}" ]; then JAVA="$JAVA_HOME/bin/java"; fi

# The classpath of the pom in folder $1, resolved once per pom: Maven runs
# only when the pom changed or a jar went missing from the cache.
classpath() {
  local pom_dir=$1 key file
  key=$(sha256sum "$pom_dir/pom.xml" | cut -c1-16)
  file="$CACHE/classpath-$key.txt"
  if [ -s "$file" ]; then
    local ok=yes jar
    IFS=: read -ra jars <"$file" || true  # the file has no final newline
    for jar in "${jars[@]}"; do [ -f "$jar" ] || { ok=no; break; }; done
    if [ "$ok" = yes ]; then cat "$file"; return; fi
  fi
  command -v mvn >/dev/null 2>&1 || { echo "kafka.sh: mvn (Maven) is needed to fetch Kafka's jars" >&2; exit 1; }
  mkdir -p "$CACHE"
  echo "kafka.sh: fetching Apache Kafka's jars into $M2" >&2
  (cd "$pom_dir" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$M2" \
      dependency:build-classpath -Dmdep.outputFile="$file.tmp" >&2)
  mv "$file.tmp" "$file"
  cat "$file"
}

case $cmd in
  classpath) classpath "$POM_DIR"; exit 0 ;;
  tools-classpath) classpath "$ROOT/scripts/bench/kafka-tools"; exit 0 ;;
esac

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
PID_FILE="$DIR/kafka.pid"

running() { [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }

if [ "$cmd" = stop ]; then
  if running; then
    pid=$(cat "$PID_FILE")
    kill -TERM "$pid"
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "kafka did not stop within 30 s: killing pid $pid" >&2
      kill -KILL "$pid"
    fi
    echo "kafka stopped"
  fi
  rm -f "$PID_FILE"
  exit 0
fi

# Waits until the broker started from DIR logs that it serves.
wait_serving() {
  local deadline=$(( $(date +%s) + TIMEOUT ))
  until grep -q "Kafka Server started" "$DIR/logs/server.log" 2>/dev/null; do
    if ! running; then
      echo "kafka exited; the end of its log:" >&2
      tail -n 30 "$DIR/logs/server.log" "$DIR/logs/kafka.out" >&2
      exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "kafka does not serve after $TIMEOUT s; see $DIR/logs/server.log" >&2
      exit 1
    fi
    sleep 0.2
  done
}

if [ "$cmd" = wait ]; then
  wait_serving
  echo "kafka serves (pid $(cat "$PID_FILE")); logs in $DIR/logs"
  exit 0
fi

CP=$(classpath "$POM_DIR")

if running; then
  echo "kafka is already running from $DIR (pid $(cat "$PID_FILE")); logs in $DIR/logs"
  exit 0
fi

# Heap, collector and GC log as Kafka's kafka-server-start.sh and
# kafka-run-class.sh set them (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS,
# -loggc), the heap from --heap; the GC log is logs/gc.log.
JAVA_OPTS=(-Xmx"$HEAP" -Xms"$HEAP" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20
  -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true
  -Dkafka.logs.dir="$DIR/logs" -Dlog4j2.configurationFile="$POM_DIR/log4j2.properties")
GC_LOG=("-Xlog:gc*:file=$DIR/logs/gc.log:time,tags:filecount=10,filesize=100M")
mkdir -p "$DIR/logs"
cat >"$DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=$NODE_ID
controller.quorum.voters=$VOTERS
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DIR/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=500
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
PROPS
for kv in "${EXTRA[@]}"; do echo "$kv" >>"$DIR/server.properties"; done

if [ ! -f "$DIR/data/meta.properties" ]; then
  # a cluster id is 16 random bytes in URL-safe base64 without padding
  id=$CLUSTER_ID
  if [ -z "$id" ]; then
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    id="A${id:1}"
  fi
  "$JAVA" "${JAVA_OPTS[@]}" -cp "$CP" kafka.tools.StorageTool format \
    -t "$id" -c "$DIR/server.properties" >"$DIR/logs/format.log" 2>&1 \
    || { cat "$DIR/logs/format.log" >&2; exit 1; }
fi

: >"$DIR/logs/server.log"
nohup "$JAVA" "${JAVA_OPTS[@]}" "${GC_LOG[@]}" -cp "$CP" kafka.Kafka "$DIR/server.properties" \
  >"$DIR/logs/kafka.out" 2>&1 &
echo $! >"$PID_FILE"

jar=$(basename "$(tr ':' '\n' <<<"$CP" | grep '/kafka_2.13-')" .jar)
if [ "$WAIT" = no ]; then
  echo "kafka $jar node $NODE_ID starting on 127.0.0.1:$PORT (pid $(cat "$PID_FILE"), heap $HEAP); logs in $DIR/logs"
  exit 0
fi
wait_serving
echo "kafka $jar serves on 127.0.0.1:$PORT (pid $(cat "$PID_FILE"), heap $HEAP); logs in $DIR/logs"
