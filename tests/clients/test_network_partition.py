"""A partition leader cut off the network (scenario 3 of the cluster's
failure model), with real agents in network namespaces of their own.

The leader's link goes down while a producer next to it (in its
namespace) keeps writing to it, and another producer on the far side keeps
writing through the other agents. The majority fences the cut-off agent
and elects a new leader; when the link comes back the old leader rejoins
as a follower. Every record either producer had acknowledged must be in
the partition's log at the offset it was acknowledged with: nothing the
deposed leader acknowledged is lost, and no two leaders acknowledged
different records at one offset.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import netns
from broker import binary
from cluster import VOTERS, eventually, metadata

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = pytest.mark.skipif(netns.available() is not None,
                                reason=str(netns.available()))


@pytest.fixture(scope="module")
def cluster():
    net = netns.Network(VOTERS)
    certs = tempfile.mkdtemp(prefix="aerostream-ns-certs-")
    agents = {}
    try:
        subprocess.run([binary(), "cluster-ca", "--out", certs, "--nodes", "1,2,3"],
                       capture_output=True, check=True)
        voters = ",".join(f"{n}@{net.addr(n)}:{netns.CLUSTER_PORT}" for n in VOTERS)
        for n in VOTERS:
            agents[n] = netns.NsAgent(net, n, voters, certs,
                                      ["--replica-lag-time-max-ms", "2000"]).start()
        for a in agents.values():
            a.wait_ready()
        yield net, agents
    finally:
        for a in agents.values():
            a.stop()
        net.remove()
        for a in agents.values():
            a.cleanup()
        shutil.rmtree(certs, ignore_errors=True)


def partition_state(net, agents, topic, ask):
    md = metadata(netns.KAFKA_PORT, host=net.addr(ask))
    _err, leader = md["topics"][topic][0]
    replicas, isr = md["replicas"][(topic, 0)]
    return leader, replicas, isr


def read_log(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    log = {}
    idle_since = time.time()
    deadline = time.time() + 90
    while time.time() < deadline and time.time() - idle_since < 3:
        m = c.poll(0.5)
        if m is None or m.error() is not None:
            continue
        log[m.offset()] = m.value().decode()
        idle_since = time.time()
    c.close()
    return log


def producer(net, node, bootstrap, topic, prefix, seconds, out):
    args = [sys.executable, os.path.join(HERE, "ns_producer.py"), bootstrap, topic, prefix,
            str(seconds), out]
    if node is None:
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return net.run_in(node, args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def acked(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_a_leader_cut_off_the_network_is_fenced_and_nothing_acknowledged_is_lost(cluster):
    net, agents = cluster
    everyone = ",".join(a.bootstrap for a in agents.values())
    topic = f"cut-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": everyone})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=10)[topic].result(timeout=20)
    leader = eventually("a leader with three in-sync replicas", lambda: next(
        (l for l, _r, isr in [partition_state(net, agents, topic, 1)] if l > 0 and len(isr) == 3),
        None))
    others = [n for n in VOTERS if n != leader]
    work = tempfile.mkdtemp(prefix="aerostream-cut-")
    near_out, far_out = os.path.join(work, "near.jsonl"), os.path.join(work, "far.jsonl")
    # next to the leader, inside its namespace: after the cut it reaches only the leader
    near = producer(net, leader, agents[leader].bootstrap, topic, "near", 22, near_out)
    far = producer(net, None, ",".join(agents[n].bootstrap for n in others), topic, "far", 22, far_out)
    time.sleep(4)
    net.cut(leader)
    cut_at = time.time()
    try:
        new_leader = eventually("the majority elects another leader", lambda: next(
            (l for l, _r, _isr in [partition_state(net, agents, topic, others[0])]
             if l > 0 and l != leader), None), timeout=30)
        time.sleep(max(0.0, 10 - (time.time() - cut_at)))
    finally:
        net.heal(leader)
        healed_at = time.time()
    for p in (near, far):
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    eventually("the old leader rejoins the in-sync replicas",
               lambda: len(partition_state(net, agents, topic, others[0])[2]) == 3, timeout=60)

    log = read_log(everyone, topic)
    near_acks, far_acks = acked(near_out), acked(far_out)
    assert near_acks and far_acks
    missing = [a for a in near_acks + far_acks if log.get(a["offset"]) != a["value"]]
    assert not missing, (
        f"{len(missing)} acknowledged records are not at their offsets, e.g. {missing[:5]} "
        f"(leader {leader} cut, {new_leader} elected)")
    # while cut off, the old leader acknowledged nothing (a second's grace
    # for acks already on their way) and the far side kept producing
    # through the new leader
    cut_off = [a for a in near_acks if cut_at + 1 < a["t"] < healed_at]
    assert not cut_off, f"the cut-off leader acknowledged {len(cut_off)} writes, e.g. {cut_off[:3]}"
    during = [a for a in far_acks if cut_at < a["t"] < healed_at]
    assert during, "no write was acknowledged through the new leader during the cut"
    shutil.rmtree(work, ignore_errors=True)
