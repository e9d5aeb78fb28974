#!/usr/bin/env bash
# The Go clients (franz-go and IBM/sarama, tests/go/) against AeroStream on
# one agent and on three, and against Apache Kafka's own broker as the
# reference (scripts/go-tests.sh): one `go test` run, every test once per
# broker. Runs in the background beside the other suites (scripts/test.sh).
# Go's modules and build cache go to ~/.cache/aerostream/go, outside the
# clone: the first run downloads the modules tests/go/go.sum pins, later
# runs are offline. Kafka's jars come from ~/.cache/aerostream/m2 as for
# 46-java.sh. Needs go 1.26+, java 17+ and mvn.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

t0=$(date +%s)
cargo build -p agent --bin aerostream --features fault-injection
t1=$(date +%s)
rc=0
AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream" scripts/go-tests.sh || rc=$?
t2=$(date +%s)
printf '47-go: build %ss, brokers and suites %ss, total %ss\n' "$((t1 - t0))" "$((t2 - t1))" "$((t2 - t0))"
exit "$rc"
