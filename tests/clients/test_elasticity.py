"""Agents joining and leaving a running cluster under acks=all load.

A fourth agent joins three and takes a fair share of replicas and leaders
(the metastore's balancer moves them onto it: each moved replica copies the
leader's local log and joins the ISR before the replica it replaces goes);
then it is drained with `aerostream drain` until it holds nothing and is
stopped. Every acknowledged record is read back, once, as written.

A second process started with a running agent's `--node-id` is refused
before it serves anything. An agent stopped for good is removed with
`aerostream cluster remove-agent`, and its replicas are placed on the
others while producers keep writing.
"""

import os
import shutil
import subprocess
import uuid

import pytest

from broker import Broker, free_udp_port
from cluster import (VOTERS, Cluster, Production, assert_nothing_lost,
                     assert_one_record_per_offset, create_replicated, drain,
                     eventually, holdings, metadata, read_back, remove_agent)

PARTITIONS = 6
RF = 3


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(extra_args=["--replica-lag-time-max-ms", "2000"])
    for node in VOTERS:
        c.agent(node).launch()
    for node in VOTERS:
        c.agent(node).wait_ready(timeout=90)
    yield c
    c.stop_all()
    shutil.rmtree(c.dir, ignore_errors=True)


def topic_dirs(agent, topic):
    """Partition folders of `topic` in an agent's data dir."""
    found = []
    for root, dirs, _files in os.walk(agent.dir):
        found += [os.path.join(root, d) for d in dirs if d.startswith(topic)]
    return found


def test_a_fourth_agent_takes_a_fair_share_then_drains_with_nothing_lost(cluster):
    topic = f"elastic-{uuid.uuid4().hex[:8]}"
    create_replicated(cluster, topic, partitions=PARTITIONS)
    prod = Production(cluster, topic, partitions=PARTITIONS)
    prod.wait_acked(300)
    port = cluster.agent(1).port

    fourth = cluster.agent(4)
    fourth.start(timeout=90)
    # 18 replicas and 6 leaders over four agents
    fair_replicas, fair_leaders = (PARTITIONS * RF) // 4, PARTITIONS // 4

    def balanced():
        md = metadata(port)
        if any(len(isr) < RF or len(reps) != RF for reps, isr in md["replicas"].values()):
            return False  # moves still under way
        held = {n: holdings(port, n) for n in (1, 2, 3, 4)}
        return held if all(r >= fair_replicas and l >= fair_leaders
                           for r, l in held.values()) else False

    held = eventually("the fourth agent holds a fair share of replicas and leaders",
                      balanced, timeout=60, every=0.5)
    print(f"replicas and leaders per agent after the join: {held}")
    n = len(prod.acked)
    prod.wait_acked(n + 300)

    out = drain(cluster.agent(2), 4)
    assert "holds no replicas" in out, out
    assert holdings(port, 4) == (0, 0)
    md = metadata(port)
    assert all(len(reps) == RF and len(isr) == RF for reps, isr in md["replicas"].values()), \
        "every partition keeps its replicas in sync without agent 4"
    eventually("agent 4 removed its copies", lambda: not topic_dirs(fourth, topic), timeout=20)
    assert fourth.stop() == 0

    n = len(prod.acked)
    prod.wait_acked(n + 300)
    acked = prod.finish()
    assert not prod.errors, prod.errors[:3]
    assert_one_record_per_offset(prod)
    got = read_back(cluster, topic, PARTITIONS, len(acked))
    assert_nothing_lost(acked, got)


def test_a_duplicate_node_id_is_refused_and_a_removed_agents_replicas_are_placed_elsewhere(cluster):
    port = cluster.agent(1).port
    fourth = cluster.agent(4)
    drain(cluster.agent(1), 4, undo=True)
    if fourth.proc is None:
        fourth.start(timeout=90)
    topic = f"remove-{uuid.uuid4().hex[:8]}"
    create_replicated(cluster, topic, partitions=PARTITIONS)
    eventually("agent 4 holds replicas", lambda: holdings(port, 4)[0] > 0, timeout=60, every=0.5)
    prod = Production(cluster, topic, partitions=PARTITIONS)
    prod.wait_acked(300)

    # a second process with node id 4, its own folder and cluster address
    twin = Broker(extra_args=[
        "--node-id", "4",
        "--cluster-addr", f"127.0.0.1:{free_udp_port()}",
        "--voters", cluster.voters,
        "--cluster-certs", cluster.certs,
    ]).launch()
    try:
        code = twin.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        twin.kill9()
        raise
    twin.proc = None
    assert code == 78, twin.log()[-2000:]
    assert "already running" in twin.log() and "--node-id" in twin.log(), twin.log()[-2000:]
    assert "aerostream listening" not in twin.log(), "it served nothing"
    assert 4 in metadata(port)["brokers"], "the running agent 4 is untouched"
    shutil.rmtree(twin.dir, ignore_errors=True)

    refused = remove_agent(cluster.agent(1), 4)
    assert refused.returncode != 0, refused.stdout
    assert "alive" in refused.stderr, refused.stderr

    assert fourth.stop() == 0
    out = remove_agent(cluster.agent(1), 4)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "removed agent 4" in out.stdout and "holds no replicas" in out.stdout, out.stdout
    print(out.stdout)
    md = metadata(port)
    assert 4 not in md["brokers"]
    assert holdings(port, 4) == (0, 0)
    eventually("every partition has three in-sync replicas on the other agents",
               lambda: all(len(reps) == RF and len(isr) == RF and 4 not in reps
                           for (t, _p), (reps, isr) in metadata(port)["replicas"].items()
                           if t == topic), timeout=60)

    n = len(prod.acked)
    prod.wait_acked(n + 300)
    acked = prod.finish()
    assert not prod.errors, prod.errors[:3]
    assert_one_record_per_offset(prod)
    got = read_back(cluster, topic, PARTITIONS, len(acked))
    assert_nothing_lost(acked, got)
