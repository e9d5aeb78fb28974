#!/usr/bin/env bash
# Builds librdkafka's own test programs (its tests/test-runner) once, under
# ~/.cache/aerostream/librdkafka, from the librdkafka source the npm package
# node-rdkafka bundles (npm is reachable where GitHub may not be), so that
# tests/clients/test_librdkafka_suite.py can run them against AeroStream.
# About 4 minutes on 2 cores the first time; nothing after.
# Needs: npm, gcc/g++, make (scripts/setup.sh installs them).
set -euo pipefail
NODE_RDKAFKA=3.6.1   # bundles librdkafka 2.12.0; keep in step with tests/clients/librdkafka_suite.py
home="$HOME/.cache/aerostream/librdkafka"
src="$home/node-rdkafka-$NODE_RDKAFKA/librdkafka"
if [ -x "$src/tests/test-runner" ]; then
    exit 0
fi
mkdir -p "$home"
cd "$home"
if [ ! -f "$src/configure" ]; then
    echo "fetching librdkafka's source (npm node-rdkafka@$NODE_RDKAFKA)" >&2
    rm -rf "node-rdkafka-$NODE_RDKAFKA" package
    npm pack "node-rdkafka@$NODE_RDKAFKA" --silent >/dev/null
    tar xzf "node-rdkafka-$NODE_RDKAFKA.tgz"
    mkdir -p "node-rdkafka-$NODE_RDKAFKA"
    mv package/deps/librdkafka "$src"
    rm -rf package "node-rdkafka-$NODE_RDKAFKA.tgz"
fi
cd "$src"
# Kafka 4 raised segment.bytes' minimum to 1 MiB (KIP-1030): librdkafka's
# later releases create 0129's topic with 1048576, as here
sed -i 's/"segment.bytes", "20000"/"segment.bytes", "1048576"/' tests/0129-fetch_aborted_msgs.c
echo "building librdkafka and its test-runner (once, cached in $home)" >&2
./configure --disable-gssapi >/dev/null
make -j"$(nproc)" libs >/dev/null
make -C tests -j"$(nproc)" build >/dev/null
test -x tests/test-runner
