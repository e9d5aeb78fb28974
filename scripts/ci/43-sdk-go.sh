#!/usr/bin/env bash
# The Go SDK (sdk-go/): gofmt and go vet, then go test: its codec against
# every vector of the native protocol's conformance corpus (sdk/vectors/),
# the record batches and partitioner against the corpus too, and the
# client, producer, consumer groups and logins against real agents (one,
# and a cluster of three: the binary built here, started by the tests on
# free ports; over TCP and QUIC), with kcat reading and writing the same
# topics over the Kafka listener. About 20 seconds once built. Go's module and build caches are
# ~/.cache/aerostream/go as for 47-go.sh: the first run downloads the
# modules sdk-go/go.sum pins (quic-go, klauspost/compress, pierrec/lz4),
# later runs are offline. Needs go (1.22+) and kcat.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
GO_CACHE_ROOT="$HOME/.cache/aerostream/go"
export GOMODCACHE="${GOMODCACHE:-$GO_CACHE_ROOT/mod}"
export GOCACHE="${GOCACHE:-$GO_CACHE_ROOT/build}"
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
export GOTOOLCHAIN=local
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
for tool in go kcat; do
  command -v "$tool" >/dev/null 2>&1 || { echo "43-sdk-go: $tool is needed" >&2; exit 1; }
done

t0=$(date +%s)
cargo build -p agent --bin aerostream --features fault-injection
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
t1=$(date +%s)
cd sdk-go
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "43-sdk-go: not gofmt-formatted:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go mod download
go vet ./...
go test -count=1 -timeout 5m ./...
t2=$(date +%s)
printf '43-sdk-go: build %ss, vet and tests %ss\n' "$((t1 - t0))" "$((t2 - t1))"
