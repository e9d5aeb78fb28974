"""Three (and four) real agents forming one cluster on this machine.

The tests share one cluster and run in file order; each leaves every voter
running. Metadata is asked of one agent at a time over a raw Kafka
connection, since clients send it to whichever broker they like.
"""

import random
import shutil
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from cluster import VOTERS, Cluster, eventually, metadata
from helpers import create_topic, rest

LEADER_NOT_AVAILABLE = 5


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    yield c
    c.stop_all()
    shutil.rmtree(c.dir, ignore_errors=True)


def brokers_and_controller(port):
    md = metadata(port)
    return md["brokers"], md["controller"]


def leaders(port, topic):
    parts = metadata(port)["topics"].get(topic, {})
    return {p: leader for p, (_err, leader) in parts.items()}


def produce_to(bootstrap, topic, partitions, per_partition, prefix):
    """Produces `per_partition` messages to each partition; returns what was acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 30000})
    acked, errors = [], []

    def report(err, msg):
        (errors if err is not None else acked).append(err or (msg.partition(), msg.value()))

    for part in partitions:
        for i in range(per_partition):
            p.produce(topic, value=f"{prefix}-{part}-{i}".encode(), partition=part, on_delivery=report)
    assert p.flush(45) == 0, "every message delivered"
    assert errors == [], errors
    return acked


def consume_all(bootstrap, topic, expected, group, timeout=60, partitions=None):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    if partitions is None:
        c.subscribe([topic])
    else:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
    got = []
    deadline = time.time() + timeout
    while len(got) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append((m.partition(), m.value()))
    if partitions is None:
        c.commit(asynchronous=False)
    c.close()
    return got


# ---- the scenarios -----------------------------------------------------------

def test_three_agents_started_in_any_order_form_one_cluster(cluster):
    order = list(VOTERS)
    random.shuffle(order)
    first = cluster.agent(order[0]).launch()
    # alone, a voter waits for a quorum and says for which peers
    eventually("the first voter reports what it waits for",
               lambda: "aerostream waiting" in first.run_log(), timeout=30)
    line = next(l for l in first.run_log().splitlines() if "aerostream waiting" in l)
    for other in order[1:]:
        assert f"{other}@127.0.0.1:{cluster.cluster_ports[other]}" in line, line
    for node in order[1:]:
        cluster.agent(node).launch()
    for node in order:
        cluster.agent(node).wait_ready(timeout=90)

    views = {}
    for node in VOTERS:
        port = cluster.agent(node).port
        views[node] = eventually(
            f"agent {node} lists all three brokers",
            lambda port=port: (lambda b, c: (b, c) if set(b) == set(VOTERS) and c in VOTERS else None)(
                *brokers_and_controller(port)))
    controllers = {c for _b, c in views.values()}
    assert len(controllers) == 1, f"one controller for all: {views}"
    for node, (brokers, _c) in views.items():
        for i in VOTERS:
            host, port, rack = brokers[i]
            assert (host, port, rack) == ("127.0.0.1", cluster.agent(i).port, f"rack-{i}"), brokers


def test_partitions_spread_over_agents_and_clients_follow_their_leaders(cluster):
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    entry = cluster.agent(random.choice(VOTERS))
    create_topic(entry, topic, partitions=6)
    placed = eventually("six partitions with leaders",
                        lambda: (lambda l: l if len(l) == 6 and -1 not in l.values() else None)(
                            leaders(entry.port, topic)))
    assert set(placed.values()) == set(VOTERS), f"leaders on every agent: {placed}"
    acked = produce_to(entry.bootstrap, topic, range(6), 20, "spread")
    assert {p for p, _ in acked} == set(range(6))
    got = consume_all(entry.bootstrap, topic, len(acked), group=f"g-{topic}")
    assert sorted(got) == sorted(acked), "the group reads back every message of every partition"


def test_the_rest_api_of_every_agent_tells_the_same_cluster_and_points_to_leaders(cluster):
    """Asked of any agent, /v1 describes one cluster; records are read on a
    partition's leader, and another agent answers 421 naming the leader."""
    topic = f"rest-{uuid.uuid4().hex[:8]}"
    entry = cluster.agent(VOTERS[0])
    create_topic(entry, topic, partitions=3)
    placed = eventually("three partitions with leaders",
                        lambda: (lambda l: l if len(l) == 3 and -1 not in l.values() else None)(
                            leaders(entry.port, topic)))
    acked = produce_to(entry.bootstrap, topic, range(3), 5, "rest")
    group = f"g-{topic}"
    assert len(consume_all(entry.bootstrap, topic, len(acked), group=group)) == len(acked)

    views = {n: rest(cluster.agent(n), "GET", "/v1/cluster")[1] for n in VOTERS}
    for n, v in views.items():
        assert v["node_id"] == n
        assert sorted(a["id"] for a in v["agents"] if a["live"]) == sorted(VOTERS), v
        assert [a["id"] for a in v["agents"] if a["this_agent"]] == [n], v
    assert len({v["metastore_leader"] for v in views.values()}) == 1, views

    for part, leader in placed.items():
        other = next(n for n in VOTERS if n != leader)
        status, page = rest(cluster.agent(leader), "GET", f"/v1/topics/{topic}/records?partition={part}")
        assert status == 200, page
        assert sorted(r["value"]["data"] for r in page["records"]) == sorted(
            v.decode() for p, v in acked if p == part)
        status, err = rest(cluster.agent(other), "GET", f"/v1/topics/{topic}/records?partition={part}")
        assert (status, err["code"]) == (421, "not_leader"), err
        assert f"agent {leader} leads it" in err["message"], err

        status, at_leader = rest(cluster.agent(leader), "GET", f"/v1/topics/{topic}")
        assert status == 200, at_leader
        mine = at_leader["partitions"][part]
        assert (mine["leader"], mine["offsets_from"], mine["log_end"]) == (leader, "leader", 5), mine
        assert mine["local_bytes"] > 0, mine
        theirs = eventually(
            f"agent {other} sees the high watermark the leader of {part} recorded",
            lambda: (lambda t: t if t["partitions"][part]["high_watermark"] == 5 else None)(
                rest(cluster.agent(other), "GET", f"/v1/topics/{topic}")[1]))["partitions"][part]
        assert (theirs["leader"], theirs["offsets_from"], theirs["local_bytes"]) == (leader, "metastore", None), theirs

    groups = {n: rest(cluster.agent(n), "GET", f"/v1/groups/{group}") for n in VOTERS}
    for n, (status, g) in groups.items():
        assert status == 200, (n, g)
        assert sum(o["committed_offset"] for o in g["offsets"]) == len(acked), (n, g)
    assert len({g["coordinator"] for _s, g in groups.values()}) == 1, groups


def test_native_group_members_bootstrapped_at_different_agents_meet_at_the_coordinator(cluster):
    import signal
    import subprocess
    from confluent_kafka import ConsumerGroupTopicPartitions
    from helpers import admin
    from test_native import example, read_lines
    topic = f"ngroup-{uuid.uuid4().hex[:8]}"
    entry = cluster.agent(random.choice(VOTERS))
    create_topic(entry, topic, partitions=6)
    eventually("six partitions with leaders",
               lambda: (lambda l: l if len(l) == 6 and -1 not in l.values() else None)(
                   leaders(entry.port, topic)))
    lines = [f"k{i}=v{i}" for i in range(300)]
    r = subprocess.run([example("produce"), "--bootstrap", entry.native_url, "--topic", topic, "--key-sep", "="],
                       input="".join(f"{l}\n" for l in lines), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    group = f"g-{topic}"
    # each member starts at another agent; FindCoordinator sends all three to one
    procs = [subprocess.Popen([example("consume"), "--bootstrap", cluster.agent(n).native_url, "--topic", topic,
                               "--group", group], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in VOTERS]
    try:
        out, threads = read_lines(procs, len(lines), timeout=90)
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        codes = [p.wait(timeout=30) for p in procs]
    assert codes == [0, 0, 0], [p.stderr.read() for p in procs]
    for t in threads:
        t.join(timeout=10)
    assert sorted(v for o in out for v in o) == sorted(l.split("=", 1)[1] for l in lines), \
        "every record read once between the members"
    a = admin(entry)
    result = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert sum(tp.offset for tp in result.topic_partitions if tp.topic == topic) == len(lines), \
        "each member committed where it stopped"


def test_an_agent_stopped_and_restarted_with_the_same_flags_rejoins(cluster):
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    victim = random.choice(VOTERS)
    other = cluster.agent(next(i for i in VOTERS if i != victim))
    create_topic(other, topic, partitions=3)
    placed = eventually("three partitions with leaders",
                        lambda: (lambda l: l if len(l) == 3 and -1 not in l.values() else None)(
                            leaders(other.port, topic)))
    own = [p for p, l in placed.items() if l == victim]
    assert own, f"agent {victim} leads a partition: {placed}"
    before = produce_to(other.bootstrap, topic, own, 10, "before")

    b = cluster.agent(victim)
    assert b.stop() == 0, "clean exit on SIGTERM"
    b.start(timeout=90)
    assert "asks the voters" not in b.run_log(), "a voter never asks to join"
    eventually(f"agent {victim} leads its partitions again",
               lambda: all(leaders(b.port, topic)[p] == victim for p in own))
    after = produce_to(other.bootstrap, topic, own, 10, "after")
    got = consume_all(other.bootstrap, topic, len(before) + len(after), group=f"g-{topic}", partitions=own)
    assert sorted(got) == sorted(before + after), "the restarted agent serves old and new data"
    brokers, _ = brokers_and_controller(b.port)
    assert set(brokers) == set(VOTERS)


def test_a_fourth_agent_outside_the_voters_joins_and_is_listed(cluster):
    fourth = cluster.agent(4)
    fourth.start(timeout=90)
    assert "aerostream listening" in fourth.run_log()
    for node in (1, 2, 3, 4):
        port = cluster.agent(node).port
        eventually(f"agent {node} lists agent 4",
                   lambda port=port: 4 in brokers_and_controller(port)[0])
    brokers, controller = brokers_and_controller(fourth.port)
    assert brokers[4] == ("127.0.0.1", fourth.port, "rack-4")
    assert controller in VOTERS, "a learner never leads the metastore"
    # its partitions are served like any agent's
    topic = f"learner-{uuid.uuid4().hex[:8]}"
    create_topic(fourth, topic, partitions=4)
    placed = eventually("four partitions with leaders",
                        lambda: (lambda l: l if len(l) == 4 and -1 not in l.values() else None)(
                            leaders(fourth.port, topic)))
    assert 4 in placed.values(), placed
    acked = produce_to(cluster.agent(1).bootstrap, topic, range(4), 5, "learner")
    assert len(acked) == 20

    def admissions():
        return sum(cluster.agent(i).log().count("a node asks to join the metastore") for i in VOTERS)
    assert admissions() == 1, "the leader added the learner once"
    assert fourth.stop() == 0
    fourth.start(timeout=90)
    assert admissions() == 1, "a restarted learner is a member already and is not added again"
    eventually("the restarted learner leads its partitions",
               lambda: all(leaders(fourth.port, topic)[p] == 4 for p, l in placed.items() if l == 4))
    assert fourth.stop() == 0
    eventually("a stopped agent leaves Metadata once its lease runs out",
               lambda: 4 not in brokers_and_controller(cluster.agent(1).port)[0])


def test_killing_the_metastore_leader_leaves_a_serving_cluster(cluster):
    topic = f"kill-{uuid.uuid4().hex[:8]}"
    entry = cluster.agent(1)
    create_topic(entry, topic, partitions=6)
    placed = eventually("six partitions with leaders",
                        lambda: (lambda l: l if len(l) == 6 and -1 not in l.values() else None)(
                            leaders(entry.port, topic)))
    _, dead = brokers_and_controller(entry.port)
    assert dead in VOTERS
    survivors = [i for i in VOTERS if i != dead]
    cluster.agent(dead).kill9()
    started = time.time()

    watcher = cluster.agent(survivors[0])

    def agreed_controller():
        # an agent that does not know the metastore leader yet names itself,
        # so only an answer both survivors give shows the election is over
        seen = {brokers_and_controller(cluster.agent(n).port)[1] for n in survivors}
        return seen.pop() if len(seen) == 1 and seen <= set(survivors) else None
    new = eventually("the two survivors elect a new metastore leader and both name it",
                     agreed_controller, timeout=60)
    elected_after = time.time() - started
    # RF 1: the dead agent's partitions have no other replica, so once its
    # lease runs out they are offline (leader -1, LEADER_NOT_AVAILABLE)
    dead_parts = [p for p, l in placed.items() if l == dead]
    live_parts = [p for p, l in placed.items() if l != dead]

    def offline():
        parts = metadata(watcher.port)["topics"][topic]
        return all(parts[p] == (LEADER_NOT_AVAILABLE, -1) for p in dead_parts) and \
            all(parts[p] == (0, placed[p]) for p in live_parts)
    eventually("the dead agent's partitions are offline, the others unchanged", offline)
    # a crashed agent stays listed a few seconds, so that clients move to
    # the new leaders in one metadata update (gateway/src/brokers.rs,
    # CRASHED_LISTING), then leaves Metadata
    eventually("a fenced agent leaves Metadata",
               lambda: dead not in brokers_and_controller(watcher.port)[0], timeout=30)

    bootstrap = ",".join(cluster.agent(i).bootstrap for i in survivors)
    acked = produce_to(bootstrap, topic, live_parts, 10, "survivors")
    got = consume_all(bootstrap, topic, len(acked), group=f"g-{topic}", partitions=live_parts)
    assert sorted(got) == sorted(acked)

    back = cluster.agent(dead)
    back.start(timeout=90)
    eventually("the returning agent leads its partitions again",
               lambda: all(leaders(watcher.port, topic)[p] == dead for p in dead_parts))
    acked = produce_to(bootstrap, topic, dead_parts, 5, "back")
    assert len(acked) == 5 * len(dead_parts)
    print(f"new metastore leader after {elected_after:.1f}s")
