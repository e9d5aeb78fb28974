#!/usr/bin/env bash
# Runs the Go client suites (tests/go/: franz-go in franz/, IBM/sarama in
# sarama/) against each target, all started here at once on free ports of
# 127.0.0.1 and stopped at the end, the same targets as the Java client's
# suite (scripts/java-tests.sh):
#
#   aerostream-single  one agent; SASL/SCRAM-SHA-512 logins with an admin
#                      user, so it authorizes requests and serves the ACL APIs
#   aerostream-three   three agents (every one a metastore voter), plaintext,
#                      topics replicated three times
#   kafka              Apache Kafka's broker (scripts/kafka.sh), plaintext,
#                      with its StandardAuthorizer: the reference behaviour
#
#   scripts/go-tests.sh [TARGET...]     default: all three
#
# Every test runs once per target (subtests named after them), so a test
# failing for an AeroStream target and passing for kafka is a difference
# from Kafka. Extra `go test` arguments go in GO_TESTS_ARGS (e.g.
# "-run TestAdmin ./franz"); the default runs both packages. The binary is
# $AEROSTREAM_BIN, else $CARGO_TARGET_DIR/debug/aerostream. Go's module and
# build caches are $GOMODCACHE and $GOCACHE, by default under
# ~/.cache/aerostream/go, outside the clone: the first run downloads the
# modules go.sum pins and compiles them (about 2 minutes on 2 busy
# cores), later runs are offline. Needs go (1.26+, as franz-go and sarama do),
# curl, python3, and for kafka java (17+) and, the first time, mvn.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN="${AEROSTREAM_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/aerostream}"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(aerostream-single aerostream-three kafka)
ADMIN_PASSWORD="go-tests-admin"
GO_CACHE_ROOT="$HOME/.cache/aerostream/go"
export GOMODCACHE="${GOMODCACHE:-$GO_CACHE_ROOT/mod}"
export GOCACHE="${GOCACHE:-$GO_CACHE_ROOT/build}"
# the modules are pinned by tests/go/go.sum: nothing is resolved anew
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
# the suites run where the go directive of go.mod says, or fail saying so
export GOTOOLCHAIN=local

# Go's own installer puts it in /usr/local/go, not always on PATH
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
for tool in go curl python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "go-tests.sh: $tool is needed" >&2; exit 1; }
done
wants() { local t; for t in "${TARGETS[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
if { wants aerostream-single || wants aerostream-three; } && [ ! -x "$BIN" ]; then
  echo "go-tests.sh: no aerostream binary at $BIN (cargo build -p agent --bin aerostream)" >&2
  exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/aerostream-go.XXXXXX")
PIDS=()
cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ -f "$WORK/kafka/kafka.pid" ]; then "$ROOT/scripts/kafka.sh" stop --dir "$WORK/kafka" >/dev/null || true; fi
  if [ "$rc" -ne 0 ]; then
    echo "go-tests.sh: failed; the brokers' logs are kept in $WORK" >&2
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
  python3 - "$1" <<'PY'
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
PY
}
read -ra P <<<"$(ports 18)"

# agent NAME KAFKA HTTP NATIVE ARGS...: starts one agent, logging to WORK/NAME.log
agent() {
  local name=$1 kafka=$2 http=$3 native=$4; shift 4
  mkdir -p "$WORK/$name"
  "$BIN" serve --data-dir "$WORK/$name/data" \
    --kafka-addr "127.0.0.1:$kafka" --http-addr "127.0.0.1:$http" --native-addr "127.0.0.1:$native" \
    --shards 2 --group-initial-rebalance-delay-ms 500 "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=("$!")
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

targets=()
: >"$WORK/agents"
t0=$(date +%s)
if wants kafka; then
  scripts/kafka.sh --port "${P[0]}" --controller-port "${P[1]}" --dir "$WORK/kafka" >"$WORK/kafka.start" 2>&1 &
  KAFKA_STARTER=$!
  targets+=("{\"name\":\"kafka\",\"bootstrap\":\"127.0.0.1:${P[0]}\",\"authorizer\":true}")
fi
if wants aerostream-single; then
  agent single "${P[2]}" "${P[3]}" "${P[4]}" \
    --sasl-mechanisms SCRAM-SHA-512,SCRAM-SHA-256,PLAIN --admin-user "admin:$ADMIN_PASSWORD"
  targets+=("{\"name\":\"aerostream-single\",\"bootstrap\":\"127.0.0.1:${P[2]}\",\"authorizer\":true,\"sasl\":\"SCRAM-SHA-512:admin:$ADMIN_PASSWORD\"}")
fi
if wants aerostream-three; then
  "$BIN" cluster-ca --out "$WORK/certs" --nodes 1,2,3 >/dev/null
  voters="1@127.0.0.1:${P[8]},2@127.0.0.1:${P[12]},3@127.0.0.1:${P[16]}"
  bootstrap=""
  for n in 1 2 3; do
    base=$(( 5 + (n - 1) * 4 ))
    agent "three-$n" "${P[$base]}" "${P[$((base + 1))]}" "${P[$((base + 2))]}" \
      --node-id "$n" --rack "rack-$n" --cluster-addr "127.0.0.1:${P[$((base + 3))]}" \
      --voters "$voters" --cluster-certs "$WORK/certs"
    bootstrap="$bootstrap${bootstrap:+,}127.0.0.1:${P[$base]}"
  done
  targets+=("{\"name\":\"aerostream-three\",\"bootstrap\":\"$bootstrap\",\"brokers\":3}")
fi
AEROSTREAM_TARGETS="[$(IFS=,; echo "${targets[*]}")]"
export AEROSTREAM_TARGETS

# Go downloads the modules (first run only) and compiles the suites while
# the brokers start
cd tests/go
if ! GOPROXY=off go mod download >/dev/null 2>&1; then
  echo "go-tests.sh: downloading the Go modules tests/go/go.sum pins into $GOMODCACHE"
fi
tb=$(date +%s)
go mod download
go vet ./...
echo "go-tests.sh: modules and build ready in $(( $(date +%s) - tb ))s"
cd "$ROOT"

ready
if wants kafka; then
  wait "$KAFKA_STARTER" || { cat "$WORK/kafka.start" >&2; exit 1; }
  cat "$WORK/kafka.start"
fi
echo "go-tests.sh: brokers up in $(( $(date +%s) - t0 ))s (logs in $WORK); running the suites against: ${TARGETS[*]}"

cd tests/go
ts=$(date +%s)
# the tests mostly wait on brokers: run many at once; -count=1 as results
# depend on the brokers, not only on the code; -v for a line per test and
# broker (PASS, FAIL or SKIP with its reason), without the lines that only
# say when each starts
set +e
# shellcheck disable=SC2086 # GO_TESTS_ARGS is a list of go test arguments
go test -v -count=1 -timeout 8m -parallel 16 ${GO_TESTS_ARGS:-./...} 2>&1 \
  | grep --line-buffered -v -E '^=== (RUN|PAUSE|CONT|NAME)' | tee "$WORK/go-test.out"
status=("${PIPESTATUS[@]}")
set -e
rc=${status[0]}
echo "go-tests.sh: suites ran in $(( $(date +%s) - ts ))s"
if [ "$rc" -ne 0 ]; then
  # the failures again, last, where a long log's tail shows them: each
  # failed test and the messages the tests printed (file:line: ...)
  echo "go-tests.sh: what failed:"
  grep -E -e '--- FAIL' -e '^\s+[a-z_]+_test\.go:[0-9]+: ' -e '^panic:' "$WORK/go-test.out" | head -40 || true
fi
exit "$rc"
