#!/usr/bin/env bash
# Kafka Connect's distributed runtime (file connectors, exactly-once source)
# and MirrorMaker 2, Apache Kafka 4.1's own, against AeroStream on one agent
# and on three, and against Apache Kafka's broker as the reference; MirrorMaker
# copies between each AeroStream and Kafka both ways
# (scripts/connect-tests.sh). Runs in the background beside the other suites
# (scripts/test.sh). Maven's downloads (Connect's jars, Kafka's broker, JUnit)
# go to ~/.cache/aerostream/m2, outside the clone: the first run fetches them,
# later runs are offline. Needs java 17+ and mvn.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

t0=$(date +%s)
cargo build -p agent --bin aerostream --features fault-injection
t1=$(date +%s)
rc=0
AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream" scripts/connect-tests.sh || rc=$?
t2=$(date +%s)
printf '48-connect: build %ss, brokers and suite %ss, total %ss\n' "$((t1 - t0))" "$((t2 - t1))" "$((t2 - t0))"
exit "$rc"
