"""Transactions on three agents with RF 3 and min.insync.replicas=2: the
scenarios of test_transactions.py, where a transaction's partitions are led
by different agents (markers go to each leader over the cluster endpoint)
and its coordinator is wherever the transactional id's slot is; then the
agent coordinating an open transaction is killed and a survivor takes the
transaction over."""

import shutil
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import VOTERS, Cluster
from test_transactions import (read_all, scenario_commit_and_abort, scenario_fencing,
                               scenario_open_transaction_holds_back_read_committed,
                               scenario_send_offsets, txn_producer)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster().start_voters()
    yield c
    c.stop_all()
    shutil.rmtree(c.dir, ignore_errors=True)


def bootstrap(c):
    return ",".join(b.bootstrap for b in c.running().values())


def create(c, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[topic].result(30)


def topic():
    return f"ct-{uuid.uuid4().hex[:10]}"


def test_commit_and_abort_across_leaders(cluster):
    t = topic()
    create(cluster, t, 3)
    scenario_commit_and_abort(bootstrap(cluster), t)


def test_an_open_transaction_holds_back_read_committed(cluster):
    t = topic()
    create(cluster, t, 1)
    scenario_open_transaction_holds_back_read_committed(bootstrap(cluster), t)


def test_offsets_sent_in_a_transaction_commit_with_it(cluster):
    t = topic()
    create(cluster, t, 1)
    create(cluster, t + "-out", 1)
    scenario_send_offsets(bootstrap(cluster), t, t + "-out")


def test_a_new_producer_fences_the_old(cluster):
    t = topic()
    create(cluster, t, 2)
    scenario_fencing(bootstrap(cluster), t)


def txn_coordinator(port, transactional_id):
    """FindCoordinator v1 with key type 1 (a transactional id), asked of the
    agent on `port`: the node id, or None."""
    import socket
    import struct
    from cluster import _Reader, _recv_exact
    key, client = transactional_id.encode(), b"txn-coordinator-test"
    body = (struct.pack(">hhih", 10, 1, 9, len(client)) + client
            + struct.pack(">h", len(key)) + key + struct.pack(">b", 1))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        r = _Reader(_recv_exact(s, size))
    assert r.take(">i") == 9
    r.take(">i")  # throttle
    error = r.take(">h")
    r.string()
    node = r.take(">i")
    return node if error == 0 else None


def test_a_survivor_completes_the_transaction_of_a_killed_coordinator(cluster):
    t = topic()
    create(cluster, t, 3)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    p = txn_producer(bootstrap(cluster), tid)
    p.begin_transaction()
    for i in range(30):
        p.produce(t, value=f"v-{i}", partition=i % 3)
    p.flush(30)
    any_agent = next(iter(cluster.running().values()))
    coordinator = txn_coordinator(any_agent.port, tid)
    assert coordinator in VOTERS, coordinator
    cluster.agent(coordinator).kill9()
    killed = time.time()
    try:
        p.commit_transaction(90)  # the client finds the new coordinator
        took = time.time() - killed
        values = read_all(bootstrap(cluster), t, "read_committed", expect=30, timeout=60)
        assert sorted(values) == sorted(f"v-{i}" for i in range(30)), values
        survivor = next(b for n, b in cluster.running().items() if n != coordinator)
        assert txn_coordinator(survivor.port, tid) != coordinator
        print(f"commit through the new coordinator {took:.1f}s after the kill")
        # the same producer carries on with the next transaction
        p.begin_transaction()
        p.produce(t, value="after", partition=0)
        p.commit_transaction(60)
    finally:
        cluster.agent(coordinator).start(timeout=120)


def test_native_transactions_reach_their_coordinator_from_any_agent(cluster):
    """The Rust SDK's produce example, bootstrapped on one agent, with
    transactional ids whose coordinators are spread over the agents: each
    finds its coordinator (FindTxnCoordinator), and confluent-kafka reads
    committed exactly the committed transactions."""
    import subprocess

    from test_native import example

    t = topic()
    create(cluster, t, 1)
    first = next(iter(cluster.running().values()))
    expected = []
    for i in range(6):
        tid = f"native-{t}-{i}"
        lines = [f"{tid}-{j}" for j in range(5)]
        abort = i % 2 == 1
        r = subprocess.run([example("produce"), "--bootstrap", first.native_url, "--topic", t,
                            "--transactional-id", tid, *(["--abort"] if abort else [])],
                           input="".join(f"{l}\n" for l in lines), capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        if not abort:
            expected += lines
    assert read_all(bootstrap(cluster), t, "read_committed", expect=len(expected)) == expected
