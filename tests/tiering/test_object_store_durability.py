"""A topic durable in object storage (`durability=object-store`) on three
agents sharing one S3 bucket (moto): acks=all writes are acknowledged once
a write-ahead object holds them, followers copy nothing, and when the
leader is killed mid-stream another agent rebuilds the log from the bucket
and serves every acknowledged record. About 40 s."""

import os
import shutil
import time
import uuid
from collections import defaultdict

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import servers
from cluster import (Cluster, Production, agent_metrics, assert_one_record_per_offset,
                     bootstrap, eventually, state)

PARTITIONS = 4
PREFIX = "osd"


def wal_objects(moto_server):
    return [k for k in servers.s3_keys(moto_server, "aerostream", f"{PREFIX}/packs/")
            if k.endswith(".wal")]


def read_back_at(c, topic, partitions, expected, timeout=90):
    """Every record from the earliest on as (partition, offset, value), and
    each time the consumer's position went back on a partition (an offset
    at or below one it had already read: a reset or a seek), as
    (partition, last offset read, offset read next)."""
    consumer = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, back, errors, last = [], [], [], {}
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = consumer.poll(0.5 if len(got) < expected else 1.0)
        if m is None:
            if len(got) >= expected:
                break  # read to the end: nothing more for a second
            continue
        if m.error() is not None:
            errors.append(str(m.error()))
            continue
        p, o = m.partition(), m.offset()
        if p in last and o <= last[p]:
            back.append((p, last[p], o))
        last[p] = o
        got.append((p, o, m.value()))
    consumer.close()
    return got, back, errors


def report_read_twice(got, back, errors):
    """Says, for records read back more than once, whether the log holds
    them twice (one value at two offsets) or the consumer read one offset
    twice (it was sent back); returns how many were read twice."""
    at = defaultdict(list)
    for p, o, v in got:
        at[(p, v)].append(o)
    twice = {k: offs for k, offs in at.items() if len(offs) > 1}
    if not twice:
        return 0
    in_log = {k: offs for k, offs in twice.items() if len(set(offs)) > 1}
    reread = {k: offs for k, offs in twice.items() if len(set(offs)) == 1}
    print(f"{len(twice)} records read back more than once: {len(in_log)} at two offsets or more "
          f"(the log holds them twice), {len(reread)} at one offset (read again)")
    for (p, v), offs in sorted(in_log.items(), key=lambda kv: (kv[0][0], kv[1]))[:50]:
        print(f"  in the log twice: partition {p} value {v!r} at offsets {offs}")
    for (p, v), offs in sorted(reread.items(), key=lambda kv: (kv[0][0], kv[1]))[:20]:
        print(f"  read again: partition {p} value {v!r} at offset {offs[0]} x{len(offs)}")
    for p, was, to in back[:20]:
        print(f"  the consumer went back on partition {p}: from offset {was} to {to}")
    if errors:
        print(f"  consumer errors: {errors[:10]}")
    return len(twice)


def keep_logs(c, into):
    """Copies the agents' logs to `into` (the test's tmp dir): the cluster's
    own directory is removed when the test ends."""
    os.makedirs(into, exist_ok=True)
    for n, b in c.agents.items():
        if os.path.exists(b.log_path):
            shutil.copy(b.log_path, os.path.join(into, f"agent-{n}.log"))
    print(f"agents' logs kept in {into}")


def test_a_killed_leader_loses_nothing_acknowledged_and_followers_copy_nothing(moto_server,
                                                                              monkeypatch,
                                                                              tmp_path):
    for k, v in servers.s3_env(moto_server).items():
        monkeypatch.setenv(k, v)
    c = Cluster(extra_args=[
        "--object-store", f"s3://aerostream/{PREFIX}",
        "--pack-max-wait-ms", "3000",
    ]).start_voters()
    try:
        topic = f"osd-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={
            "durability": "object-store"})])[topic].result(15)
        eventually("every partition has a leader",
                   lambda: all(state(c, topic, p)[0] > 0 for p in range(PARTITIONS)))

        prod = Production(c, topic, PARTITIONS)
        prod.wait_acked(2000)
        assert wal_objects(moto_server), "acknowledged writes went up as write-ahead objects"
        copied = sum(agent_metrics(a)["aerostream_replica_fetch_bytes_received_total"]
                     for a in c.running().values())
        assert copied == 0, f"followers copied {copied} bytes of a topic durable in object storage"

        leader = state(c, topic, 0)[0]
        c.agent(leader).kill9()
        eventually("another agent leads partition 0",
                   lambda: state(c, topic, 0, avoid=leader)[0] not in (leader, -1), timeout=60)
        acked_at_kill = len(prod.acked)
        prod.wait_acked(acked_at_kill + 2000, timeout=90)
        acked = prod.finish()
        assert not prod.errors, prod.errors[:3]
        assert_one_record_per_offset(prod)
        read, back, read_errors = read_back_at(c, topic, PARTITIONS, len(acked))
        got = [(p, v) for p, _, v in read]
        missing = set(acked) - set(got)
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
        # Every record once: a replica that does not lead refuses reads, so
        # no consumer is sent back to the start, and a retried batch is a
        # duplicate for the rebuilt producer state. Should one be read twice,
        # the report says whether the log holds it twice or it was read
        # again, and the agents' logs are kept (docs/tiering.md,
        # "Durability in object storage").
        twice = report_read_twice(read, back, read_errors)
        assert twice == 0, f"{twice} records read back more than once (see the report above)"

        # a consumer in a follower's zone is not sent to it (KIP-392): the
        # followers of such a topic hold nothing
        leader, replicas, _ = state(c, topic, 0, avoid=leader)
        follower = next(r for r in replicas if r != leader and r in c.running())
        consumer = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"z-{uuid.uuid4().hex[:6]}",
                             "enable.auto.commit": False, "client.rack": f"rack-{follower}"})
        consumer.assign([TopicPartition(topic, 0, 0)])
        in_zone = []
        deadline = time.time() + 60
        expected = sum(1 for p, _ in acked if p == 0)
        while len(in_zone) < expected and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                in_zone.append(m.value())
        consumer.close()
        assert len(in_zone) >= expected, f"{len(in_zone)} of {expected} read with client.rack of a follower"
        pieces = sum(agent_metrics(a)["aerostream_wal_pieces_total"] for a in c.running().values())
        objects = sum(agent_metrics(a)["aerostream_wal_objects_total"] for a in c.running().values())
        print(f"{len(acked)} records acknowledged; the survivors wrote {pieces:.0f} batches "
              f"in {objects:.0f} write-ahead objects")
        assert 0 < objects <= pieces
    finally:
        c.stop_all()
        keep_logs(c, str(tmp_path / "agents"))
        shutil.rmtree(c.dir, ignore_errors=True)
