#!/usr/bin/env bash
# The ways in to one AeroStream broker, side by side: the same workloads on
# the same broker (pinned as side-by-side.sh pins it, a fresh one per run)
# over the Kafka wire (librdkafka) and over the native protocol (the SDK,
# TCP and QUIC), one table with publish and
# end-to-end latency, max rate and CPU per message per way in.
#
# Usage: scripts/bench/ways-in.sh [WORKLOAD...]   (default: small-20k small-50k small-max)
#
# Environment: as side-by-side.sh; here DRIVERS defaults to
# "kafka native-tcp native-quic" and BROKERS to
# "aerostream" (aerostream-fsync and aerostream-rf3 work too).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export BROKERS=${BROKERS:-aerostream}
export DRIVERS=${DRIVERS:-kafka native-tcp native-quic}
exec "$here/side-by-side.sh" "$@"
