"""A topic durable in object storage (`durability=object-store`) on three
agents sharing one S3 bucket (moto): acks=all writes are acknowledged once
a write-ahead object holds them, followers copy nothing, and when the
leader is killed mid-stream another agent rebuilds the log from the bucket
and serves every acknowledged record. About 40 s."""

import shutil
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import servers
from cluster import (Cluster, Production, agent_metrics, assert_one_record_per_offset,
                     bootstrap, eventually, read_back, state)

PARTITIONS = 4
PREFIX = "osd"


def wal_objects(moto_server):
    return [k for k in servers.s3_keys(moto_server, "aerostream", f"{PREFIX}/packs/")
            if k.endswith(".wal")]


def test_a_killed_leader_loses_nothing_acknowledged_and_followers_copy_nothing(moto_server,
                                                                              monkeypatch):
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
        got = read_back(c, topic, PARTITIONS, len(acked))
        missing = set(acked) - set(got)
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
        # Known gap (docs/tiering.md, "Limits"): once in several runs on a
        # loaded machine a record was read back twice after the failover;
        # reported here, not yet a failure, until its cause is found.
        twice = len(got) - len(set(got))
        if twice:
            print(f"{twice} records read back more than once")

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
        shutil.rmtree(c.dir, ignore_errors=True)
