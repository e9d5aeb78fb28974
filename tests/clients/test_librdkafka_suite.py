"""librdkafka's own tests (from its source, built by
scripts/librdkafka-tests.sh) against AeroStream with
`--num-partitions 4`, as librdkafka's test cluster runs:

- 0011 batch produce, including records without a key sent to a topic
  made compacted (each refused with INVALID_RECORD, the rest of their
  batch with its "different record" error, KIP-467),
- 0061 consumer lag with transactional control records,
- 0103 transactions (commit, abort, fencing, consume-transform-produce;
  its topics have replication factor 3, so on three agents only, as on a
  single Kafka broker it cannot run either),
- 0129 read_committed fetches across aborted transactions,
- 0137 batch consume across transaction markers;

and its consumer group tests with the classic protocol and with the
KIP-848 protocol (`group.protocol=consumer`, TEST_CONSUMER_GROUP_PROTOCOL):
0018 group termination, 0102 static members, 0118 commits during
rebalances, 0153 member ids, 0045 subscription changes and patterns
(one agent). The three-agent runs of the same lists are in
test_librdkafka_cluster.py, so the two halves can run side by side. Tests
that run against librdkafka's own mock cluster are left out (`-L`)."""

import os

import pytest

from broker import Broker
import librdkafka_suite

pytestmark = pytest.mark.skipif(librdkafka_suite.runner() is None,
                                reason="librdkafka's test-runner is not built (scripts/librdkafka-tests.sh)")

SINGLE, GROUPS, SUBSCRIPTIONS = librdkafka_suite.SINGLE, librdkafka_suite.GROUPS, librdkafka_suite.SUBSCRIPTIONS


@pytest.fixture(scope="module")
def single():
    b = Broker(extra_args=["--num-partitions", "4"]).start()
    yield b
    b.stop()


@pytest.mark.parametrize("test", SINGLE)
def test_on_one_agent(single, test):
    passed, tail = librdkafka_suite.run(single.bootstrap, test)
    assert passed, tail


# 0102 with the classic protocol (static members rejoining after their
# session timeouts) takes 45 s; it passes, and is left to be run by hand:
# LIBRDKAFKA_SLOW=1 pytest tests/clients/test_librdkafka_suite.py -k "classic and 0102"
@pytest.mark.parametrize("protocol,test", [
    pytest.param(p, t, marks=pytest.mark.skipif(
        (p, t) == ("classic", "0102") and not os.environ.get("LIBRDKAFKA_SLOW"),
        reason="45 s; set LIBRDKAFKA_SLOW=1 to run it"))
    for p in ["classic", "consumer"] for t in GROUPS
])
def test_groups_on_one_agent(single, protocol, test):
    passed, tail = librdkafka_suite.run(single.bootstrap, test, group_protocol=protocol)
    assert passed, tail


@pytest.mark.parametrize("test", SUBSCRIPTIONS)
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_subscriptions_on_one_agent(single, protocol, test):
    passed, tail = librdkafka_suite.run(single.bootstrap, test, group_protocol=protocol)
    assert passed, tail
