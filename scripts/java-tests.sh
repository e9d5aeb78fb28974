#!/usr/bin/env bash
# Runs the Java client's suite (tests/java/) in one JVM against each target,
# all started here at once on free ports of 127.0.0.1 and stopped at the end:
#
#   aerostream-single  one agent; SASL/SCRAM-SHA-512 logins with an admin
#                      user, so it authorizes requests and serves the ACL APIs
#   aerostream-three   three agents (every one a metastore voter), plaintext,
#                      topics replicated three times
#   aerostream-balanced  (only when named) three agents in load-balancer
#                      mode that all advertise the first one's address, so
#                      clients see one broker and every request reaches the
#                      first agent, which forwards what others own (a known
#                      difference: DescribeConfigs refuses the broker id 0
#                      that stands for the cluster, so AdminTest's
#                      describeClusterAndBrokerConfigs fails there)
#   kafka              Apache Kafka's broker (scripts/kafka.sh), plaintext,
#                      with its StandardAuthorizer: the reference behaviour
#
#   scripts/java-tests.sh [TARGET...]     default: all three
#
# Each agent is started by a script of its own (WORK/NAME.run, its process id
# in WORK/NAME.pid, both named to the suite as target.NAME.agents), so a test
# may kill an agent with SIGKILL and start it again (StreamsTest does).
#
# Every test runs once per target, so a test failing for an AeroStream
# target and passing for kafka is a difference from Kafka. Extra Maven
# arguments go in JAVA_TESTS_ARGS (e.g. "-Dtest=AdminTest"); JAVA_TESTS_KEEP=1
# keeps the brokers' logs after a run that passed. The binary is
# $AEROSTREAM_BIN, else $CARGO_TARGET_DIR/debug/aerostream (build it with
# `cargo build -p agent --bin aerostream`). Maven's downloads go to
# $AEROSTREAM_M2 (default ~/.cache/aerostream/m2), outside the clone; once a
# run has filled it, Maven runs offline. Needs java (17+), mvn, curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
M2="${AEROSTREAM_M2:-$HOME/.cache/aerostream/m2}"
BIN="${AEROSTREAM_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/aerostream}"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(aerostream-single aerostream-three kafka)
ADMIN_PASSWORD="java-tests-admin"

for tool in java mvn curl python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "java-tests.sh: $tool is needed" >&2; exit 1; }
done
wants() { local t; for t in "${TARGETS[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
if { wants aerostream-single || wants aerostream-three || wants aerostream-balanced; } && [ ! -x "$BIN" ]; then
  echo "java-tests.sh: no aerostream binary at $BIN (cargo build -p agent --bin aerostream)" >&2
  exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/aerostream-java.XXXXXX")
PIDS=()
cleanup() {
  local rc=$?
  # and the agents a test restarted
  local f
  for f in "$WORK"/*.pid; do [ -f "$f" ] && PIDS+=("$(cat "$f")"); done
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ -f "$WORK/kafka/kafka.pid" ]; then scripts/kafka.sh stop --dir "$WORK/kafka" >/dev/null || true; fi
  if [ "$rc" -ne 0 ]; then
    echo "java-tests.sh: failed; the brokers' logs are kept in $WORK" >&2
  elif [ -n "${JAVA_TESTS_KEEP:-}" ]; then
    echo "java-tests.sh: the brokers' logs are kept in $WORK (JAVA_TESTS_KEEP)" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# free ports, each free for TCP and UDP (the native listener uses both, the
# cluster listener UDP)
ports() {
  python3 - "$1" <<'EOF'
import socket, sys
out = []
while len(out) < int(sys.argv[1]):
    with socket.socket() as t, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        t.bind(("127.0.0.1", 0))
        p = t.getsockname()[1]
        try:
            u.bind(("127.0.0.1", p))
        except OSError:
            continue
    if p not in out:
        out.append(p)
print(" ".join(map(str, out)))
EOF
}
read -ra P <<<"$(ports 30)"

# agent NAME KAFKA HTTP NATIVE ARGS...: starts one agent, logging to WORK/NAME.log.
# WORK/NAME.run starts it (again: a test that killed it restarts it with
# that, appending to the log) and WORK/NAME.pid holds its process id (the
# test writes the restarted one's there, and cleanup stops that one)
agent() {
  local name=$1 kafka=$2 http=$3 native=$4; shift 4
  mkdir -p "$WORK/$name"
  {
    printf 'exec'
    printf ' %q' "$BIN" serve --data-dir "$WORK/$name/data" \
      --kafka-addr "127.0.0.1:$kafka" --http-addr "127.0.0.1:$http" --native-addr "127.0.0.1:$native" \
      --shards 2 --group-initial-rebalance-delay-ms 500 "$@"
    printf ' >>%q 2>&1\n' "$WORK/$name.log"
  } >"$WORK/$name.run"
  : >"$WORK/$name.log"
  bash "$WORK/$name.run" &
  PIDS+=("$!")
  echo "$!" >"$WORK/$name.pid"
  echo "$name $http $!" >>"$WORK/agents"
}
ready() { # waits until every agent serves
  local deadline=$(( $(date +%s) + 120 )) name http pid
  while read -r name http pid; do
    until curl -sf "http://127.0.0.1:$http/health" >/dev/null 2>&1 && grep -q "aerostream listening" "$WORK/$name.log"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "agent $name exited; the end of its log:" >&2; tail -n 30 "$WORK/$name.log" >&2; exit 1
      fi
      if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "agent $name does not serve after 120 s; see $WORK/$name.log" >&2; exit 1
      fi
      sleep 0.2
    done
  done <"$WORK/agents"
}

PROPS=(-Dtargets="$(IFS=,; echo "${TARGETS[*]}")")
: >"$WORK/agents"
t0=$(date +%s)
if wants kafka; then
  scripts/kafka.sh --port "${P[0]}" --controller-port "${P[1]}" --dir "$WORK/kafka" >"$WORK/kafka.start" 2>&1 &
  KAFKA_STARTER=$!
  PROPS+=(-Dtarget.kafka.bootstrap="127.0.0.1:${P[0]}" -Dtarget.kafka.authorizer=true)
fi
if wants aerostream-single; then
  agent single "${P[2]}" "${P[3]}" "${P[4]}" \
    --sasl-mechanisms SCRAM-SHA-512,SCRAM-SHA-256,PLAIN --admin-user "admin:$ADMIN_PASSWORD"
  PROPS+=(-Dtarget.aerostream-single.bootstrap="127.0.0.1:${P[2]}"
    -Dtarget.aerostream-single.authorizer=true
    -Dtarget.aerostream-single.sasl="SCRAM-SHA-512:admin:$ADMIN_PASSWORD"
    -Dtarget.aerostream-single.agents="1=$WORK/single")
fi
if wants aerostream-three; then
  "$BIN" cluster-ca --out "$WORK/certs" --nodes 1,2,3 >/dev/null
  voters="1@127.0.0.1:${P[8]},2@127.0.0.1:${P[12]},3@127.0.0.1:${P[16]}"
  bootstrap="" agents=""
  for n in 1 2 3; do
    base=$(( 5 + (n - 1) * 4 ))
    agent "three-$n" "${P[$base]}" "${P[$((base + 1))]}" "${P[$((base + 2))]}" \
      --node-id "$n" --rack "rack-$n" --cluster-addr "127.0.0.1:${P[$((base + 3))]}" \
      --voters "$voters" --cluster-certs "$WORK/certs"
    bootstrap="$bootstrap${bootstrap:+,}127.0.0.1:${P[$base]}"
    agents="$agents${agents:+,}$n=$WORK/three-$n"
  done
  PROPS+=(-Dtarget.aerostream-three.bootstrap="$bootstrap" -Dtarget.aerostream-three.brokers=3
    -Dtarget.aerostream-three.agents="$agents")
fi
if wants aerostream-balanced; then
  "$BIN" cluster-ca --out "$WORK/certs-balanced" --nodes 1,2,3 >/dev/null
  voters="1@127.0.0.1:${P[20]},2@127.0.0.1:${P[24]},3@127.0.0.1:${P[28]}"
  for n in 1 2 3; do
    base=$(( 17 + (n - 1) * 4 ))
    agent "balanced-$n" "${P[$base]}" "${P[$((base + 1))]}" "${P[$((base + 2))]}" \
      --node-id "$n" --cluster-addr "127.0.0.1:${P[$((base + 3))]}" \
      --voters "$voters" --cluster-certs "$WORK/certs-balanced" \
      --load-balanced --advertised-kafka-addr "127.0.0.1:${P[17]}"
  done
  PROPS+=(-Dtarget.aerostream-balanced.bootstrap="127.0.0.1:${P[17]}")
fi

# Maven compiles the suite while the brokers start; offline once a run has
# filled the cache for this pom
MVN=(mvn -B -Dstyle.color=never -Dmaven.repo.local="$M2" -f tests/java/pom.xml)
# Maven 3.8 writes colour resets even in batch mode without this
export MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true"
marker="$M2/.aerostream-java-$(cat tests/java/pom.xml | sha256sum | cut -c1-16)"
if [ -f "$marker" ]; then MVN+=(-o); else echo "java-tests.sh: first run for this pom: Maven fetches what it needs into $M2"; fi
"${MVN[@]}" -q test-compile

ready
if wants kafka; then
  wait "$KAFKA_STARTER" || { cat "$WORK/kafka.start" >&2; exit 1; }
  cat "$WORK/kafka.start"
fi
echo "java-tests.sh: brokers up in $(( $(date +%s) - t0 ))s (logs in $WORK); running the suite against: ${TARGETS[*]}"

rc=0
rm -rf tests/java/target/surefire-reports
# shellcheck disable=SC2086 # JAVA_TESTS_ARGS is a list of Maven arguments
"${MVN[@]}" surefire:test "${PROPS[@]}" ${JAVA_TESTS_ARGS:-} || rc=$?
# surefire ran (its provider is in the cache): later runs may go offline
if [ -d tests/java/target/surefire-reports ]; then touch "$marker"; fi
exit "$rc"
