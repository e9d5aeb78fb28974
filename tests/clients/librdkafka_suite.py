"""librdkafka's own test programs (tests/test-runner of its source) run
against AeroStream. The source comes from the npm package node-rdkafka,
which bundles librdkafka with its tests (npm is reachable where GitHub may
not be); it is unpacked and built once under ~/.cache/aerostream/librdkafka
(scripts/librdkafka-tests.sh builds it; the tests here skip while it is
absent).

    run(bootstrap, "0103") -> (passed, tail of the output)

A few of librdkafka's assertions race the client's own threads: in 0103,
`init_transactions(p, 1)` must fail with _STATE, which the client's main
thread decides; given only 1 ms, a busy machine answers _TIMED_OUT before
that thread runs, whatever the broker does. In 0045 with the KIP-848
protocol, an unsubscribe and a new subscribe called back to back while the
client is still revoking partitions the coordinator took away a moment
before leave the new subscription parked: librdkafka applies a parked
subscription only from its `init` join state (rdkafka_cgrp.c,
rd_kafka_cgrp_consumer_serve), and that path ends in `steady`, so the
client stops heartbeating and waits for an assignment forever. The faster
the coordinator answers a subscription change, the likelier the overlap;
a loaded machine makes it likelier still. A run that fails only on one of
CLIENT_RACES is run once more, and the retry is printed.

How much faster matters. With the client's debug log (TEST_DEBUG=cgrp), on
a machine kept busy by six spinning processes, Apache Kafka 4.1 answered a
heartbeat carrying a new subscription in 6-16 ms: it appends the group's
records to its log and waits for them to commit first. The test's
unsubscribe, a millisecond after its subscribe, always came before that
answer, and 3 runs of 3 passed. AeroStream answered in 1-2 ms, the
revocation came first, and 3 runs of 3 failed. On an idle machine both
pass. The coordinator does what Kafka's does, only sooner; slowing every
heartbeat to hide a client bug would slow every rebalance. So a 0045 run
that still fails only on SUBSCRIBE_RACE after its retries is reported as
an expected failure (xfail, with the reason), not as a pass: any other
failure in 0045 fails the test, and the same subtest on the classic
protocol has to pass.
"""

import os
import re
import subprocess
import tempfile

import pytest

NODE_RDKAFKA = "3.6.1"  # bundles librdkafka 2.12.0
HOME = os.path.join(os.path.expanduser("~"), ".cache", "aerostream", "librdkafka")
SOURCE = os.path.join(HOME, f"node-rdkafka-{NODE_RDKAFKA}", "librdkafka")

# The tests run on one agent (SINGLE) and on three (CLUSTER), by
# test_librdkafka_suite.py and test_librdkafka_cluster.py.
SINGLE = ["0011", "0061", "0129", "0137"]
CLUSTER = ["0011", "0061", "0103", "0129", "0137"]
GROUPS = ["0018", "0102", "0118", "0153"]
# subscription changes and patterns (0045: 100 topics, a new subscription
# at each step), with either protocol on one agent
SUBSCRIPTIONS = ["0045"]


# Failure messages that come from the client racing its own threads
# against a 1 ms deadline, never from a broker's answer.
SUBSCRIBE_RACE = "Expected assignment not found in 0045_subscribe_many_updates#"
CLIENT_RACES = [
    "Expected ERR__STATE error, not _TIMED_OUT",
    SUBSCRIBE_RACE,
]


def runner():
    """The built test-runner, or None."""
    path = os.path.join(SOURCE, "tests", "test-runner")
    return path if os.access(path, os.X_OK) else None


def run(bootstrap, test, timeout=900, kafka_version="4.0.0", group_protocol="classic"):
    """Runs librdkafka test `test` (e.g. "0103") against `bootstrap`, its
    consumer groups on `group_protocol` (`classic`, or `consumer`: KIP-848);
    returns (passed, the last lines of its output). A run that failed only
    on a CLIENT_RACES assertion is repeated (twice at most)."""
    args = (bootstrap, test, timeout, kafka_version, group_protocol)
    passed, out = _run_once(*args)
    # twice more at most: on a loaded machine 0045's race (see
    # CLIENT_RACES) came up on two runs in a row
    for _ in range(2):
        if passed or not _only_client_races(out):
            break
        print(f"librdkafka {test}: failed only on a known client-side race; running it once more")
        passed, out = _run_once(*args)
    tail = "\n".join(line for line in out.splitlines()[-60:])
    if not passed and _only_client_races(out, [SUBSCRIBE_RACE]):
        pytest.xfail("librdkafka 2.12 leaves a new subscription parked when unsubscribe() comes while "
                     "it revokes partitions (it applies one only from join state init); see "
                     "librdkafka_suite.py. No other 0045 subtest failed.")
    return passed, tail


def _only_client_races(out, races=None):
    """True when every failure in `out` is one of `races` (by default
    CLIENT_RACES): each
    assertion that failed, and the reason printed under each failed test
    (other than the runner's own summary, `<MAIN>`)."""
    lines = re.sub(r"\x1b\[[0-9;]*m", "", out).splitlines()
    failures = [line for line in lines if "Test assertion failed" in line]
    failures += [lines[i + 1] for i, line in enumerate(lines[:-1])
                 if line.startswith('### Test "') and not line.startswith('### Test "<MAIN>"')]
    races = CLIENT_RACES if races is None else races
    return bool(failures) and all(any(r in line for r in races) for line in failures)


def _run_once(bootstrap, test, timeout, kafka_version, group_protocol):
    tests_dir = os.path.join(SOURCE, "tests")
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as conf:
        conf.write(f"metadata.broker.list={bootstrap}\n")
        conf.write("test.topic.random=true\n")
    env = dict(os.environ,
               TESTS=test,
               TEST_KAFKA_VERSION=kafka_version,
               TEST_CONSUMER_GROUP_PROTOCOL=group_protocol,
               RDKAFKA_TEST_CONF=conf.name,
               LD_LIBRARY_PATH=f"{os.path.join(SOURCE, 'src')}:{os.path.join(SOURCE, 'src-cpp')}")
    try:
        # -L: not the tests that run against librdkafka's own mock cluster
        p = subprocess.run(["./test-runner", "-L"], cwd=tests_dir, env=env,
                           capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(conf.name)
    out = p.stdout + p.stderr
    passed = p.returncode == 0 and "ALL TESTS PASSED" in out and "TEST FAILURE" not in out
    return passed, out
