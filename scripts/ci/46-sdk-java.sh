#!/usr/bin/env bash
# The Java SDK (sdk-java/): mvn test runs its codec against every vector of
# the native protocol's conformance corpus (sdk/vectors/), the record
# batches and partitioner against the corpus too, unit tests, and the
# client, producer, consumer groups and logins against real agents (the
# binary of AEROSTREAM_BIN, started by the tests on free ports), with kcat
# reading and writing the same topics over the Kafka listener through
# bin/produce and bin/consume. When AEROSTREAM_BIN is set the agent is not
# built here. Maven's downloads go to ~/.cache/aerostream/m2, outside the
# clone: the first run fetches the SDK's few dependencies and Maven's
# plugins, later runs are offline. Needs java 17+, mvn and kcat.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
M2="$HOME/.cache/aerostream/m2"
for tool in java mvn kcat; do
  command -v "$tool" >/dev/null 2>&1 || { echo "46-sdk-java: $tool is needed" >&2; exit 1; }
done

t0=$(date +%s)
if [ -z "${AEROSTREAM_BIN:-}" ]; then
  cargo build -p agent --bin aerostream --features fault-injection
  export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
fi
t1=$(date +%s)
cd sdk-java
# (Maven 3.8 prints colour resets even in batch mode: they are taken out)
set +e
mvn -B -q -Dmaven.repo.local="$M2" test 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
rc=${PIPESTATUS[0]}
set -e
t2=$(date +%s)
# the closing line of the run, from Surefire's reports
python3 - <<'PY' || true
import glob, xml.etree.ElementTree as ET
t = f = e = s = 0
for p in glob.glob("target/surefire-reports/TEST-*.xml"):
    r = ET.parse(p).getroot()
    t += int(r.get("tests")); f += int(r.get("failures")); e += int(r.get("errors")); s += int(r.get("skipped"))
print(f"46-sdk-java: {t - f - e - s} passed, {f + e} failed, {s} skipped")
PY
if [ "$rc" -ne 0 ]; then
  for f in target/surefire-reports/*.txt; do
    if grep -q -E 'FAILURE|ERROR' "$f"; then cat "$f" >&2; fi
  done
fi
printf '46-sdk-java: agent build %ss, maven build and tests %ss, total %ss\n' "$((t1 - t0))" "$((t2 - t1))" "$((t2 - t0))"
exit "$rc"
