#!/usr/bin/env bash
# The Node.js SDK (sdk-node/): its codec against every vector of the native
# protocol's conformance corpus (sdk/vectors/), unit tests, tsc over its type
# declarations, and the client, producer, consumer groups, transactions and
# logins against a real agent (started by the tests on free ports), with
# kcat reading and writing the same topics over the Kafka listener. Uses
# AEROSTREAM_BIN when it is set, else builds the agent. The SDK has no
# runtime dependencies; its dev dependencies (typescript, @types/node) come
# from package-lock.json with npm's cache in ~/.cache/aerostream/npm, offline
# once cached. About 30 seconds once built. Needs node (20+), npm and kcat.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export npm_config_cache="${npm_config_cache:-$HOME/.cache/aerostream/npm}"
for tool in node npm kcat; do
  command -v "$tool" >/dev/null 2>&1 || { echo "43-sdk-node: $tool is needed" >&2; exit 1; }
done
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then echo "43-sdk-node: node 20 or later is needed, this is $(node --version)" >&2; exit 1; fi

t0=$(date +%s)
if [ -z "${AEROSTREAM_BIN:-}" ]; then
  cargo build -p agent --bin aerostream --features fault-injection
  export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
fi
t1=$(date +%s)
cd sdk-node
npm ci --no-fund --no-audit --prefer-offline --loglevel=error
npm run --silent typecheck
t2=$(date +%s)
node --test --test-timeout=300000
t3=$(date +%s)
printf '43-sdk-node: build %ss, npm ci and tsc %ss, tests %ss\n' "$((t1 - t0))" "$((t2 - t1))" "$((t3 - t2))"
