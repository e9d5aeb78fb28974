#!/usr/bin/env bash
# The Java client (kafka-clients, tests/java/) against AeroStream on one agent
# and on three, and against Apache Kafka's own broker as the reference
# (scripts/java-tests.sh): one Maven run, one JVM, every test once per
# broker. Runs in the background beside the other suites (scripts/test.sh).
# It includes Kafka Streams with exactly_once_v2 and RocksDB stores
# (StreamsTest): applications in JVMs of their own killed with SIGKILL
# mid-run, and on three agents an agent killed and restarted under one;
# the committed output must be exact (docs/kafka-compatibility.md, "Kafka
# Streams").
# Maven's downloads (Kafka's jars, the clients, JUnit, Maven's plugins) go to
# ~/.cache/aerostream/m2, outside the clone: the first run fetches them
# (about 1 minute), later runs are offline. Needs java 17+ and mvn.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

t0=$(date +%s)
cargo build -p agent --bin aerostream --features fault-injection
t1=$(date +%s)
rc=0
AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream" scripts/java-tests.sh || rc=$?
t2=$(date +%s)
printf '46-java: build %ss, brokers and suite %ss, total %ss\n' "$((t1 - t0))" "$((t2 - t1))" "$((t2 - t0))"
exit "$rc"
