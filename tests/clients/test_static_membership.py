"""Static group membership (KIP-345) with librdkafka, as a user runs it.

Three consumers with distinct `group.instance.id`s share a topic. One at a
time, each is closed (librdkafka sends no LeaveGroup for a static member) and
a new consumer with the same `group.instance.id` starts well inside
`session.timeout.ms`. As on Apache Kafka, the other two must see no revoke
and no new assignment, and the returning one must get exactly the partitions
it had, promptly. Restarting all three in turn restarts the group's leader
once, whichever it is. Run against one agent, three agents, and three agents
behind a load balancer.
"""

import shutil
import time
import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import VOTERS, Cluster, balanced_cluster, create_replicated, eventually, metadata
from helpers import create_topic

PARTITIONS = 6
SESSION_MS = 15_000
# a returning member must be back well inside the session timeout
RETURN_WITHIN_S = 10
# after the return, how long the others are watched for a late revoke
SETTLE_S = 4


class Member:
    """A static consumer that records what its rebalance callbacks saw."""

    def __init__(self, bootstrap, group, instance, topic):
        self.instance = instance
        self.events = []
        self.assignment = None
        self.c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": instance,
            "client.id": instance,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        })
        self.c.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, _c, parts):
        self.assignment = frozenset(p.partition for p in parts)
        self.events.append(("assign", self.assignment))

    def _revoked(self, _c, parts):
        self.events.append(("revoke", frozenset(p.partition for p in parts)))
        self.assignment = None

    def poll(self):
        m = self.c.poll(0.05)
        if m is not None and m.error() is not None and not m.error().retriable():
            raise AssertionError(f"{self.instance}: {m.error()}")

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def poll_until(members, done, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for m in members:
            m.poll()
        if done():
            return True
    return False


def poll_for(members, seconds):
    poll_until(members, lambda: False, seconds)


def split_evenly(members):
    parts = [m.assignment for m in members]
    if any(not p for p in parts):
        return False
    return sum(len(p) for p in parts) == PARTITIONS and frozenset().union(*parts) == frozenset(range(PARTITIONS))


def restart_each_member_in_turn(bootstrap, topic):
    group = f"static-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, f"{group}-i{i}", topic) for i in range(3)]
    try:
        assert poll_until(members, lambda: split_evenly(members), 60), \
            f"three static members split {PARTITIONS} partitions: {[m.events for m in members]}"
        # stable: nothing changes for a while
        before = [len(m.events) for m in members]
        poll_for(members, 2)
        assert [len(m.events) for m in members] == before, [m.events for m in members]
        assert split_evenly(members)

        for i in range(len(members)):
            leaving = members[i]
            others = [m for j, m in enumerate(members) if j != i]
            owned = leaving.assignment
            seen = [len(m.events) for m in others]
            leaving.close()
            # the process is away for a moment; the others keep polling
            poll_for(others, 1)
            back = Member(bootstrap, group, leaving.instance, topic)
            members[i] = back
            started = time.time()
            assert poll_until(members, lambda: back.assignment is not None, RETURN_WITHIN_S), \
                f"{back.instance} came back within {RETURN_WITHIN_S} s; events: {back.events}"
            took = time.time() - started
            poll_for(members, SETTLE_S)
            for m, n in zip(others, seen):
                assert m.events[n:] == [], \
                    f"{back.instance} returning rebalanced {m.instance}: {m.events[n:]}"
            assert back.events == [("assign", owned)], \
                f"{back.instance} had {sorted(owned)}, got {back.events} after {took:.1f} s"
            assert split_evenly(members)

        admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
        desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert sorted(m.group_instance_id for m in desc.members) == sorted(m.instance for m in members)
        assert str(desc.state).upper().endswith("STABLE"), desc.state
    finally:
        for m in members:
            m.close()


# ---- one agent ---------------------------------------------------------------

def test_a_restarted_static_member_takes_back_its_partitions_on_one_agent(broker, topic_name):
    create_topic(broker, topic_name, partitions=PARTITIONS)
    restart_each_member_in_turn(broker.bootstrap, topic_name)


# ---- three agents ------------------------------------------------------------

@pytest.fixture(scope="module")
def three_agents():
    c = Cluster()
    for node in VOTERS:
        c.agent(node).launch()
    for node in VOTERS:
        c.agent(node).wait_ready(timeout=90)
    yield c
    c.stop_all()
    shutil.rmtree(c.dir, ignore_errors=True)


def test_a_restarted_static_member_takes_back_its_partitions_on_three_agents(three_agents):
    topic = f"static-{uuid.uuid4().hex[:8]}"
    create_replicated(three_agents, topic, partitions=PARTITIONS)
    bootstrap = ",".join(three_agents.agent(n).bootstrap for n in VOTERS)
    restart_each_member_in_turn(bootstrap, topic)


# ---- three agents behind a load balancer -------------------------------------

@pytest.fixture(scope="module")
def balanced():
    yield from balanced_cluster()


def test_a_restarted_static_member_takes_back_its_partitions_behind_a_load_balancer(balanced):
    cluster, balancer = balanced
    topic = f"static-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": balancer.bootstrap})
    fs = admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                             operation_timeout=10)
    fs[topic].result(timeout=20)
    # each check may reach another agent: all of them must know the topic
    for _ in VOTERS:
        eventually("every partition has a leader",
                   lambda: all(err == 0 and leader == 0
                               for err, leader in metadata(balancer.port)["topics"][topic].values()))
    restart_each_member_in_turn(balancer.bootstrap, topic)
