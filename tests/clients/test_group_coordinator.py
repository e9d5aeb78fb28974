"""One coordinator per consumer group, while agents come and go.

Three agents; a group whose coordinator is agent 3 has two librdkafka
consumers that commit as they read, while a producer keeps writing. Agent 3
is killed (SIGKILL), a third consumer starts, then agent 3 comes back, a
fourth consumer starts there, and agent 3 takes coordinator slots back
after its rejoin hold. After each rebalance settles no partition is
ever assigned to two consumers at once, and the group's committed offsets
never move backwards. A coordinator chosen by each agent from the agents it
sees alive would fail here: the agent that took the group over keeps its
members, while the fourth consumer finds the returning agent and forms a
second generation there, assigned every partition again.
"""

import shutil
import socket
import struct
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from cluster import (VOTERS, Cluster, Production, _Reader, _recv_exact, balanced_cluster,
                     create_replicated, eventually)

PARTITIONS = 6
# how long a split must hold, unchanged, to count as settled
STABLE_S = 4
# how long a settled group is then watched
WATCH_S = 4


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    for node in VOTERS:
        c.agent(node).launch()
    for node in VOTERS:
        c.agent(node).wait_ready(timeout=90)
    yield c
    c.stop_all()
    shutil.rmtree(c.dir, ignore_errors=True)


def find_coordinator(port, group):
    """FindCoordinator v0 for `group`, asked of the agent on `port`: the node id."""
    key, client = group.encode(), b"coordinator-test"
    body = (struct.pack(">hhih", 10, 0, 7, len(client)) + client
            + struct.pack(">h", len(key)) + key)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        r = _Reader(_recv_exact(s, size))
    assert r.take(">i") == 7
    error, node = r.take(">h"), r.take(">i")
    return node if error == 0 else None


class Member:
    """A group consumer that commits what it reads (auto-commit) and
    remembers what its rebalance callbacks said."""

    def __init__(self, name, bootstrap, group, topic):
        self.name = name
        self.assignment = None
        self.events = []
        self.read = 0
        self.c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        })
        self.c.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked,
                         on_lost=self._revoked)

    def _assigned(self, _c, parts):
        self.assignment = frozenset(p.partition for p in parts)
        self.events.append((round(time.time(), 2), "assign", sorted(self.assignment)))

    def _revoked(self, _c, parts):
        self.events.append((round(time.time(), 2), "revoke", sorted(p.partition for p in parts)))
        self.assignment = None

    def poll(self):
        m = self.c.poll(0.05)
        if m is not None and m.error() is None:
            self.read += 1

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def overlap(members):
    """Partitions assigned to two members at once."""
    seen, twice = set(), set()
    for m in members:
        for p in m.assignment or ():
            (twice if p in seen else seen).add(p)
    return twice


def split_exactly(members):
    parts = [m.assignment for m in members]
    return (all(parts) and not overlap(members)
            and frozenset().union(*parts) == frozenset(range(PARTITIONS)))


def settle(members, timeout=90):
    """Polls until the members split the partitions exactly, with no
    change for STABLE_S seconds."""
    deadline = time.time() + timeout
    since = None
    while time.time() < deadline:
        for m in members:
            m.poll()
        if split_exactly(members):
            since = since or time.time()
            if time.time() - since >= STABLE_S:
                return
        else:
            since = None
    raise AssertionError("the group did not settle: " + "; ".join(
        f"{m.name} {m.events[-4:]}" for m in members))


def watch(members, seconds=WATCH_S):
    """Polls for a while: a settled group splits the partitions exactly."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        for m in members:
            m.poll()
        twice = overlap(members)
        assert not twice, f"partitions {sorted(twice)} assigned twice: " + "; ".join(
            f"{m.name} {m.events[-3:]}" for m in members)
    assert split_exactly(members), [(m.name, m.events[-3:]) for m in members]


class CommittedWatch:
    """Reads the group's committed offsets over and over (OffsetFetch at
    its coordinator) and remembers any that moved backwards."""

    def __init__(self, bootstrap, group, topic):
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "enable.auto.commit": False})
        self.parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.highest = {}
        self.backwards = []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            try:
                for tp in self.c.committed(self.parts, timeout=5):
                    if tp.error is not None or tp.offset < 0:
                        continue
                    before = self.highest.get(tp.partition, -1)
                    if tp.offset < before:
                        self.backwards.append((time.time(), tp.partition, before, tp.offset))
                    self.highest[tp.partition] = max(before, tp.offset)
            except KafkaException:
                pass  # the coordinator is moving: ask again
            time.sleep(0.1)

    def finish(self):
        self.stop_flag.set()
        self.thread.join(30)
        self.c.close()
        return dict(self.highest)


def test_a_group_keeps_one_coordinator_while_its_coordinator_dies_and_returns(cluster):
    topic = f"coord-{uuid.uuid4().hex[:8]}"
    create_replicated(cluster, topic, partitions=PARTITIONS)
    agents = {n: cluster.agent(n) for n in VOTERS}
    everyone = ",".join(a.bootstrap for a in agents.values())
    survivors = ",".join(agents[n].bootstrap for n in (1, 2))

    def coordinated_by_3():
        for i in range(60):
            g = f"group-{topic}-{i}"
            if find_coordinator(agents[1].port, g) == 3:
                return g
        return None

    group = eventually("a group coordinated by agent 3", coordinated_by_3)
    production = Production(cluster, topic, partitions=PARTITIONS)
    committed = CommittedWatch(survivors, group, topic)
    members = []
    try:
        production.wait_acked(200)
        members = [Member(f"c{i}", everyone, group, topic) for i in (1, 2)]
        settle(members)
        watch(members)

        agents[3].kill9()
        members.append(Member("c3", survivors, group, topic))
        settle(members)
        watch(members)
        at_kill = committed.highest.copy()

        agents[3].start(timeout=90)
        members.append(Member("c4", agents[3].bootstrap, group, topic))
        # agent 3 takes coordinator slots back once it has been back for the
        # rejoin hold (30 s); the groups concerned rebalance once then
        deadline = time.time() + 90
        while coordinated_by_3() is None:
            assert time.time() < deadline, "agent 3 never took coordinator slots back"
            for m in members:
                m.poll()
            twice = overlap(members)
            assert not twice, f"partitions {sorted(twice)} assigned twice: " + "; ".join(
                f"{m.name} {m.events[-3:]}" for m in members)
        settle(members)
        watch(members)
        progress = [m.read for m in members]
        for m in members:
            for _ in range(40):
                m.poll()
    finally:
        for m in members:
            m.close()
        final = committed.finish()
        production.finish()
    assert committed.backwards == [], f"committed offsets moved backwards: {committed.backwards}"
    assert any(final.get(p, -1) > at_kill.get(p, -1) for p in range(PARTITIONS)), \
        f"the group kept committing after the kill: {at_kill} -> {final}"
    assert all(progress), f"every consumer read records: {progress}"


# ---- behind a load balancer: the group admin APIs see the whole cluster -----

@pytest.fixture(scope="module")
def balanced():
    yield from balanced_cluster()


def test_behind_a_load_balancer_any_agent_lists_describes_and_deletes_every_group(balanced):
    """Groups spread over the three agents' coordinators; each admin client
    reaches one agent through the balancer and still sees every group as
    its coordinator has it, and deleting a group with members is refused."""
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster, balancer = balanced
    topic = f"lbgroups-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": balancer.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)], operation_timeout=10)[topic].result(timeout=20)
    groups = [f"lb-{topic}-{i}" for i in range(6)]
    members = [Member(g, balancer.bootstrap, g, topic) for g in groups]
    try:
        deadline = time.time() + 90
        while not all(m.assignment for m in members):
            assert time.time() < deadline, [(m.name, m.events) for m in members]
            for m in members:
                m.poll()

        def state_of(listing):
            return {g.group_id: str(g.state).upper().split(".")[-1] for g in listing.valid}

        # round robin: each new admin client reaches the next agent
        for _ in range(3):
            a = AdminClient({"bootstrap.servers": balancer.bootstrap})
            listed = state_of(a.list_consumer_groups().result(timeout=20))
            assert {g: listed.get(g) for g in groups} == {g: "STABLE" for g in groups}, listed
            described = a.describe_consumer_groups(groups)
            for g in groups:
                d = described[g].result(timeout=20)
                assert [m.client_id for m in d.members] == [g], (g, d)
            for m in members:
                m.poll()
            deleted = a.delete_consumer_groups(groups, request_timeout=20)
            for g in groups:
                with pytest.raises(KafkaException) as refused:
                    deleted[g].result(timeout=30)
                assert "NON_EMPTY_GROUP" in str(refused.value), (g, refused.value)
        # offsets to delete with the groups once they are empty
        for m in members:
            m.c.commit(offsets=[TopicPartition(topic, p, 1) for p in m.assignment],
                       asynchronous=False)
    finally:
        for m in members:
            m.close()
    a = AdminClient({"bootstrap.servers": balancer.bootstrap})
    deleted = a.delete_consumer_groups(groups, request_timeout=20)
    for g in groups:
        deleted[g].result(timeout=30)
    listed = {g.group_id for g in a.list_consumer_groups().result(timeout=20).valid}
    assert not listed & set(groups), listed
