#!/usr/bin/env bash
# The web console in a real browser: tests/js/console.browser.test.js drives
# Debian's chromium (headless, over the DevTools protocol with puppeteer-core;
# no browser is downloaded) against the real `aerostream` binary holding
# records kafkajs produced and a group kafkajs committed. It loads every
# console page (overview with its throughput and latency charts drawn while
# kafkajs writes, topics, topic detail with the record browser's offset and
# time seek, groups, group detail with its lag chart, tiering with its upload
# charts) at 1280x800 and at 390x844,
# checks what each shows, fails on any browser console error, uncaught page
# error or failed request, and on a page that scrolls sideways at phone size.
# Screenshots of each page at both sizes: $AEROSTREAM_ARTIFACTS/console/
# (default: artifacts/console/ at the repository root).
# Then the stream processor's live view page (tests/js/live.browser.test.js):
# a running `aerostream process` streams the windows it closes over
# WebSocket; the page must count them all, list the newest and draw the
# chart, with no browser error ($AEROSTREAM_ARTIFACTS/processor/).
# Last the console's Pipelines page (tests/js/pipelines.browser.test.js),
# pointed at a running processor's live address: each key's window shows as
# early (with its count so far) and then final, with no browser error
# ($AEROSTREAM_ARTIFACTS/console/pipelines.png).
# Needs: apt chromium; npm install in tests/js (puppeteer-core, kafkajs).
# Bounded: about 40 s once the binary is built and chromium installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

# The same build as 40-clients.sh: reused when it is already there.
if [ -z "${AEROSTREAM_BIN:-}" ]; then
    cargo build -p agent --bin aerostream --features fault-injection
    export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
fi

if [ -z "${CHROMIUM:-}" ]; then
    if ! command -v chromium >/dev/null; then
        echo "chromium is missing: installing Debian's chromium" >&2
        export DEBIAN_FRONTEND=noninteractive
        if ! apt-get install -y -qq chromium >/dev/null; then
            apt-get update -qq >/dev/null
            apt-get install -y -qq chromium >/dev/null
        fi
    fi
    CHROMIUM="$(command -v chromium)"
    export CHROMIUM
fi
echo "browser: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"

if [ ! -d tests/js/node_modules/puppeteer-core ] || [ ! -d tests/js/node_modules/kafkajs ]; then
    (cd tests/js && npm install --no-audit --no-fund --silent)
fi

export AEROSTREAM_ARTIFACTS="${AEROSTREAM_ARTIFACTS:-$PWD/artifacts}"
echo "== web console in chromium (desktop and phone sizes)"
(cd tests/js && timeout 180 node --test --test-concurrency=1 console.browser.test.js)
echo "== the stream processor's live view in chromium"
(cd tests/js && timeout 120 node --test --test-concurrency=1 live.browser.test.js)
echo "== the console's Pipelines page on a processor's live view in chromium"
(cd tests/js && timeout 120 node --test --test-concurrency=1 pipelines.browser.test.js)
echo "screenshots: $AEROSTREAM_ARTIFACTS/console/"
