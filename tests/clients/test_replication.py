"""Partitions replicated between three real agents on this machine.

Each partition has three replicas and min.insync.replicas=2; producers use
acks=all (and idempotence) as a platform team would. Agents are killed
with SIGKILL, stopped and restarted while clients keep producing; the
check is always the same: every acknowledged record is read back, once.
"""

import os
import re
import shutil
import signal
import threading
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import (VOTERS, Cluster, Production, assert_nothing_lost, bootstrap,
                     assert_one_record_per_offset, create_replicated, eventually,
                     read_back, state)

LAG_MS = 2000


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(extra_args=["--replica-lag-time-max-ms", str(LAG_MS)])
    for node in VOTERS:
        c.agent(node).launch()
    for node in VOTERS:
        c.agent(node).wait_ready(timeout=90)
    yield c
    c.stop_all()
    shutil.rmtree(c.dir, ignore_errors=True)


def test_killing_the_leader_during_acks_all_production_loses_nothing(cluster):
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    create_replicated(cluster, topic)
    leader, _, _ = state(cluster, topic)
    prod = Production(cluster, topic)
    prod.wait_acked(500)
    before = len(prod.acked)
    cluster.agent(leader).kill9()
    killed_at = time.time()
    new_leader = eventually("another replica leads",
                            lambda: (lambda l: l if l not in (leader, -1) else None)(
                                state(cluster, topic)[0]), timeout=60)
    prod.wait_acked(before + 500, timeout=90)
    acked = prod.finish()
    assert_one_record_per_offset(prod)
    first_after = min(t for t in prod.ack_times[before:] if t > killed_at)
    print(f"leader {leader} killed; {new_leader} leads; first acknowledged write "
          f"{first_after - killed_at:.2f}s after the kill")
    got = read_back(cluster, topic, 1, len(acked))
    assert_nothing_lost(acked, got)

    cluster.agent(leader).start(timeout=90)
    eventually("the returning agent is back in sync", lambda: len(state(cluster, topic)[2]) == 3,
               timeout=90)
    # it was the preferred replica (the first assigned): it leads again
    eventually("leadership returns to the preferred replica",
               lambda: state(cluster, topic)[0] == leader, timeout=60)


def test_a_stopped_follower_catches_up_and_rejoins_the_isr(cluster):
    topic = f"catchup-{uuid.uuid4().hex[:8]}"
    create_replicated(cluster, topic)
    leader, replicas, _ = state(cluster, topic)
    follower = next(r for r in replicas if r != leader)
    prod = Production(cluster, topic)
    prod.wait_acked(200)
    assert cluster.agent(follower).stop() == 0
    eventually("the stopped follower left the ISR",
               lambda: follower not in state(cluster, topic)[2], timeout=60)
    n = len(prod.acked)
    prod.wait_acked(n + 500)
    cluster.agent(follower).start(timeout=90)
    eventually("the follower caught up and is in sync again",
               lambda: follower in state(cluster, topic)[2], timeout=90)
    acked = prod.finish()
    # with every replica in sync, whichever leads next holds everything
    assert cluster.agent(leader).stop() == 0
    eventually("a follower leads", lambda: state(cluster, topic)[0] not in (leader, -1), timeout=60)
    got = read_back(cluster, topic, 1, len(acked))
    assert_nothing_lost(acked, got)
    cluster.agent(leader).start(timeout=90)


def test_a_rolling_restart_under_load_loses_nothing(cluster):
    topic = f"rolling-{uuid.uuid4().hex[:8]}"
    create_replicated(cluster, topic, partitions=3)
    prod = Production(cluster, topic, partitions=3)
    prod.wait_acked(300)
    for node in VOTERS:
        assert cluster.agent(node).stop() == 0, f"agent {node} stops cleanly"
        cluster.agent(node).start(timeout=90)
        eventually(f"every partition back to three in-sync replicas after agent {node}",
                   lambda: all(len(state(cluster, topic, p)[2]) == 3 for p in range(3)), timeout=90)
        n = len(prod.acked)
        prod.wait_acked(n + 100, timeout=90)
    acked = prod.finish()
    got = read_back(cluster, topic, 3, len(acked))
    assert_nothing_lost(acked, got)


def test_a_frozen_leader_is_fenced_and_acknowledges_nothing_after_it_thaws(cluster):
    """A leader that stops (SIGSTOP: as cut off, or in a long pause) while
    producers write, is replaced, then resumes believing it still leads."""
    topic = f"fenced-{uuid.uuid4().hex[:8]}"
    create_replicated(cluster, topic)
    leader = state(cluster, topic)[0]
    prod = Production(cluster, topic)
    prod.wait_acked(300)
    pid = cluster.agent(leader).proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        eventually("another replica leads while the old leader is frozen",
                   lambda: state(cluster, topic, avoid=leader)[0] not in (leader, -1), timeout=60)
        n = len(prod.acked)
        prod.wait_acked(n + 300, timeout=90)
    finally:
        os.kill(pid, signal.SIGCONT)
    n = len(prod.acked)
    prod.wait_acked(n + 300, timeout=90)
    eventually("the old leader caught up as a follower",
               lambda: len(state(cluster, topic)[2]) == 3, timeout=90)
    acked = prod.finish()
    assert_one_record_per_offset(prod)
    got = read_back(cluster, topic, 1, len(acked))
    assert_nothing_lost(acked, got)


def test_a_leader_killed_after_acks_1_writes_comes_back_with_the_new_leaders_log(cluster):
    """The leader takes acks=1 writes while its followers are frozen, then
    dies. The followers may or may not have received those writes (a fetch
    answer can sit in a frozen follower's socket). An in-sync follower
    leads and takes acks=all writes. The old leader comes back, parts from
    the new leader's log where they differ, catches up, and leads again:
    every acknowledged acks=all record is there once, and an acks=1 record
    at most once — whichever tail survived, there is only one."""
    topic = f"diverge-{uuid.uuid4().hex[:8]}"
    create_replicated(cluster, topic)
    leader, replicas, _ = state(cluster, topic)
    followers = [r for r in replicas if r != leader]
    prod = Production(cluster, topic)
    prod.wait_acked(200)
    committed = prod.finish()

    for f in followers:
        os.kill(cluster.agent(f).proc.pid, signal.SIGSTOP)
    try:
        # acks=1 straight to the leader: answered after its local append only
        p = Producer({"bootstrap.servers": cluster.agent(leader).bootstrap, "acks": 1,
                      "linger.ms": 0, "message.timeout.ms": 5000})
        tail = []
        for i in range(20):
            p.produce(topic, value=f"tail-{i}".encode(), partition=0,
                      on_delivery=lambda err, msg: tail.append(msg.value()) if err is None else None)
        p.flush(5)
        assert len(tail) == 20, "the leader acknowledged the acks=1 writes alone"
        cluster.agent(leader).kill9()
    finally:
        for f in followers:
            os.kill(cluster.agent(f).proc.pid, signal.SIGCONT)

    new_leader = eventually("a follower leads", lambda: (lambda l: l if l in followers else None)(
        state(cluster, topic)[0]), timeout=90)
    prod = Production(cluster, topic)
    prod.wait_acked(200, timeout=90)
    after = prod.finish()

    cluster.agent(leader).start(timeout=90)
    eventually("the old leader is back in sync and leads again",
               lambda: state(cluster, topic)[0] == leader and len(state(cluster, topic)[2]) == 3,
               timeout=120)
    acked = committed + after
    got = read_back(cluster, topic, 1, len(acked))
    assert_nothing_lost(acked, got)
    values = [v for _p, v in got]
    kept = [v for v in values if v in set(tail)]
    assert len(kept) == len(set(kept)), "no acks=1 record appears twice"
    assert len(values) == len(acked) + len(kept), "nothing but acknowledged records and one tail"
    print(f"leader {leader} came back after {new_leader} led; {len(kept)} of the "
          f"{len(tail)} acks=1 records survived")


def fetched_bytes(agent):
    with urllib.request.urlopen(f"http://127.0.0.1:{agent.http_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^aerostream_fetched_bytes_total (\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def test_a_consumer_with_client_rack_reads_from_the_in_sync_follower_in_its_rack(cluster):
    """KIP-392: a consumer in another zone than the leader reads from the
    replica in its own zone, so consumption never crosses zones."""
    topic = f"rack-{uuid.uuid4().hex[:6]}"
    create_replicated(cluster, topic)
    leader, replicas, _isr = state(cluster, topic)
    follower = next(r for r in replicas if r != leader)
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    values = [f"v{i:04d}-" + "x" * 200 for i in range(2000)]
    for v in values:
        p.produce(topic, value=v.encode())
        p.poll(0)
    assert p.flush(30) == 0
    before = {n: fetched_bytes(cluster.agent(n)) for n in VOTERS}
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"rack-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "client.rack": f"rack-{follower}"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 60
    while len(got) < len(values) and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    c.close()
    assert got == values
    read = {n: fetched_bytes(cluster.agent(n)) - before[n] for n in VOTERS}
    payload = sum(len(v) for v in values)
    # the follower in the consumer's rack served the records; the leader
    # only pointed the consumer there (at most a first fetch's worth)
    assert read[follower] >= payload, read
    assert read[leader] < payload // 2, read
