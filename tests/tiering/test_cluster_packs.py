"""Packed objects in a cluster: three agents sharing one S3 bucket (moto),
a replicated topic whose sealed segments go up packed, the leader killed,
every acknowledged record read back from the others with the local logs
holding only the tail, and retention emptying the bucket once every
partition's records expired (the sweep runs on the metastore leader's agent).
About 60 s."""

import shutil
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic)

import servers
from cluster import Cluster, agent_metrics, bootstrap, eventually, state

PARTITIONS = 4
RECORDS = 1600
SIZE = 16 << 10
PREFIX = "c1"


def record(i):
    return i.to_bytes(8, "big") + bytes([i % 251]) * (SIZE - 8)


def test_packed_segments_survive_a_killed_leader_and_retention_removes_the_packs(moto_server,
                                                                                 monkeypatch):
    for k, v in servers.s3_env(moto_server).items():
        monkeypatch.setenv(k, v)
    c = Cluster(extra_args=[
        "--object-store", f"s3://aerostream/{PREFIX}",
        "--pack-target-bytes", "4MiB", "--pack-floor-bytes", "1MiB",
        "--pack-max-wait-ms", "3000", "--pack-grace-ms", "10000",
    ]).start_voters()
    try:
        topic = f"packed-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        config = {"min.insync.replicas": "2", "segment.bytes": str(1 << 20),
                  "segment.ms": "3000", "local.retention.bytes": "0"}
        admin.create_topics([NewTopic(topic, PARTITIONS, 3, config=config)])[topic].result(15)
        eventually("every partition has a leader and three in-sync replicas",
                   lambda: all(len(state(c, topic, p)[2]) == 3 and state(c, topic, p)[0] > 0
                               for p in range(PARTITIONS)))

        p = Producer({"bootstrap.servers": bootstrap(c), "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 120000})
        errors = []
        for i in range(RECORDS):
            p.produce(topic, value=record(i), partition=i % PARTITIONS,
                      on_delivery=lambda err, _m: err and errors.append(err))
            p.poll(0)
        assert p.flush(120) == 0 and not errors, errors[:3]

        def tiered():
            live = [agent_metrics(a) for a in c.running().values()]
            waiting = sum(m["aerostream_tier_pending_segments"] for m in live)
            committed = sum(m["aerostream_tier_committed_segments_total"] for m in live)
            packs = servers.s3_keys(moto_server, "aerostream", f"{PREFIX}/packs/")
            return waiting == 0 and committed >= PARTITIONS * 5 and packs

        packs = eventually("the sealed segments are in packed objects", tiered, timeout=120)
        assert servers.s3_keys(moto_server, "aerostream", f"{PREFIX}/topics/") == [], \
            "packed segments leave no objects of their own"
        print(f"{len(packs)} packed objects")

        leader = state(c, topic, 0)[0]
        c.agent(leader).kill9()
        eventually("another replica leads partition 0",
                   lambda: state(c, topic, 0)[0] not in (leader, -1), timeout=60)

        consumer = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"check-{uuid.uuid4().hex[:6]}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "max.partition.fetch.bytes": 4 << 20})
        consumer.assign([TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
        seen = set()
        deadline = time.time() + 120
        while len(seen) < RECORDS and time.time() < deadline:
            for m in consumer.consume(200, 1.0):
                if m.error() is None:
                    i = int.from_bytes(m.value()[:8], "big")
                    assert m.value() == record(i) and m.partition() == i % PARTITIONS
                    seen.add(i)
        consumer.close()
        assert len(seen) == RECORDS, f"{RECORDS - len(seen)} acknowledged records not read back"

        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        for f in admin.incremental_alter_configs([res]).values():
            f.result(30)
        eventually("retention removed every packed object",
                   lambda: servers.s3_keys(moto_server, "aerostream", f"{PREFIX}/packs/") == [],
                   timeout=120, every=1)
    finally:
        c.stop_all()
        shutil.rmtree(c.dir, ignore_errors=True)
