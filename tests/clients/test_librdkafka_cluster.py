"""librdkafka's own tests against three agents (replication factor 3):
the lists of test_librdkafka_suite.py's CLUSTER and GROUPS (the latter with
the KIP-848 protocol), on one cluster shared by the module."""

import shutil

import pytest

from cluster import VOTERS, Cluster
import librdkafka_suite

CLUSTER, GROUPS = librdkafka_suite.CLUSTER, librdkafka_suite.GROUPS

pytestmark = pytest.mark.skipif(librdkafka_suite.runner() is None,
                                reason="librdkafka's test-runner is not built (scripts/librdkafka-tests.sh)")


@pytest.fixture(scope="module")
def three():
    c = Cluster(extra_args=["--num-partitions", "4"]).start_voters()
    yield c
    c.stop_all()
    shutil.rmtree(c.dir, ignore_errors=True)


@pytest.mark.parametrize("test", CLUSTER)
def test_on_three_agents(three, test):
    bootstrap = ",".join(three.agent(n).bootstrap for n in VOTERS)
    passed, tail = librdkafka_suite.run(bootstrap, test)
    assert passed, tail


@pytest.mark.parametrize("test", GROUPS)
def test_consumer_protocol_groups_on_three_agents(three, test):
    bootstrap = ",".join(three.agent(n).bootstrap for n in VOTERS)
    passed, tail = librdkafka_suite.run(bootstrap, test, group_protocol="consumer")
    assert passed, tail
