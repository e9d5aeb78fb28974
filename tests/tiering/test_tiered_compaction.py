"""A compacted topic on tiered storage (S3 on moto) with the real binary and
librdkafka: the leader compacts its local segments, uploads each compacted
copy under new keys and swaps it into the manifest, so the bytes in the
bucket shrink with the local log (`tiered_bytes` of `/v1/topics/{name}`,
and the objects listed in the bucket once the grace period has passed).
Later runs merge the shrunk segments into one, which replaces their entries
by one: the number of objects in the bucket falls too, not only their size.
Then the local copies go (local.retention.bytes=0) and a consumer reading
from the earliest offset, all from the compacted objects, finds the latest
value of every key."""

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

import servers
from harness import Broker, wait_until

KEYS = 50
ROUNDS = 40          # every key written this many times
VALUE = 10_000       # bytes per value: 20 MB in all
GRACE_MS = 2_000
# .seg objects left once compaction merged what it shrank: the latest value
# of every key is 500 kB, under one segment.bytes (the merged segment, the
# last one rolled, and one rolled while merging)
MERGED_OBJECTS = 3


@pytest.fixture
def moto_server():
    s = servers.moto()
    yield s
    s.cleanup()


def tiered_bytes(broker, topic):
    detail = json.loads(broker.http(f"/v1/topics/{topic}"))
    return detail["partitions"][0]["tiered_bytes"]


def bucket_bytes(server, bucket, prefix):
    client = servers.s3_client(server)
    total, keys = 0, []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            if o["Key"].endswith(".seg"):
                total += o["Size"]
                keys.append(o["Key"])
    return total, keys


def value_of(i):
    head = b"%d:" % i
    return head + b"v" * (VALUE - len(head))


def latest_values(bootstrap, topic, timeout=120):
    """key -> value of its last record, reading everything from the start."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True, "fetch.max.bytes": 16 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    out, count, last = {}, 0, -1
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out, count
                raise AssertionError(m.error())
            assert m.offset() > last, "offsets only grow"
            last = m.offset()
            out[m.key()] = m.value()
            count += 1
    finally:
        c.close()
    raise AssertionError(f"did not reach the end of {topic} in {timeout} s")


def test_a_compacted_topic_shrinks_in_the_bucket_and_reads_back_from_it(moto_server):
    servers.create_bucket(moto_server, "aerostream")
    broker = Broker("s3://aerostream/cluster-1", servers.s3_env(moto_server),
                    extra_args=["--tiered-compaction-grace-ms", str(GRACE_MS),
                                "--pack-target-bytes", "0"])
    try:
        broker.start()
        topic = f"compacted-tiered-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        config = {"cleanup.policy": "compact", "segment.bytes": "1048576", "segment.ms": "2000",
                  "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3000"}
        for f in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
            f.result(30)

        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                      "enable.idempotence": True, "batch.size": 1_000_000})
        written = {}
        for i in range(KEYS * ROUNDS):
            key = b"key-%03d" % (i % KEYS)
            while True:
                try:
                    p.produce(topic, key=key, value=value_of(i))
                    break
                except BufferError:
                    p.poll(0.05)
            written[key] = value_of(i)
            p.poll(0)
        assert p.flush(120) == 0
        produced = KEYS * ROUNDS * VALUE

        # Segments are uploaded, compacted locally, uploaded again compacted
        # and swapped in: the manifest's bytes fall far below what was written.
        seen = []

        def shrunk():
            b = tiered_bytes(broker, topic)
            seen.append(b)
            m = broker.metrics()
            return (b > 0 and b < produced // 4
                    and m["aerostream_tier_replaced_segments_total"] > 0
                    and m["aerostream_tier_reuploads_pending"] == 0) and (b, m)

        after, m = wait_until("compacted copies replace the tiered segments", shrunk, timeout=240)
        assert max(seen) > after, f"tiered bytes fell: {seen[:3]} ... {seen[-3:]}"
        assert m["aerostream_tier_compacted_bytes_removed_total"] > 0, m
        assert m["aerostream_tier_reupload_failures_total"] == 0, m
        print(f"tiered bytes: at most {max(seen)}, then {after} ({produced} produced); "
              f"{m['aerostream_tier_replaced_segments_total']:.0f} segments replaced")

        # Once the grace period is over only the manifest's objects are left.
        def bucket_shrunk():
            total, keys = bucket_bytes(moto_server, "aerostream", "cluster-1/topics/")
            return (total <= tiered_bytes(broker, topic) * 1.01 + (2 << 20)) and (total, keys)

        total, keys = wait_until("the replaced objects leave the bucket", bucket_shrunk, timeout=120)
        assert total < produced // 4, (total, produced)
        assert any(".c" in k for k in keys), "compacted copies have keys of their own"

        # The shrunk segments are merged: one object set where there were many.
        uploaded = broker.metrics()["aerostream_tier_uploaded_segments_total"]
        assert uploaded >= produced // (2 << 20), f"{uploaded} segments uploaded"

        def few_objects():
            t, k = bucket_bytes(moto_server, "aerostream", "cluster-1/topics/")
            pending = broker.metrics()["aerostream_tier_reuploads_pending"]
            return len(k) <= MERGED_OBJECTS and pending == 0 and (t, k)

        total, keys = wait_until("merged segments leave few objects in the bucket", few_objects,
                                 timeout=180)
        print(f"bucket: {uploaded:.0f} segments uploaded, {len(keys)} .seg objects left")

        # Local copies go: everything below the active segment is read from
        # the compacted objects.
        change = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("local.retention.bytes", "0", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([change])[change].result(timeout=10)
        # (by offsets: merged, the local log holds few segment files anyway)
        def evicted():
            part = json.loads(broker.http(f"/v1/topics/{topic}"))["partitions"][0]
            return (part["tiered_start"] is not None and part["local_log_start"] is not None
                    and part["local_log_start"] > part["tiered_start"]
                    and len(broker.segment_files(topic)) <= 2) and part
        wait_until("local copies are deleted", evicted, timeout=120)
        values, count = latest_values(broker.bootstrap, topic)
        print(f"bucket: {total} bytes in {len(keys)} .seg objects; {count} records read back")
        assert values == written, "the latest value of every key"
        assert count < KEYS * ROUNDS // 4, f"{count} records left of {KEYS * ROUNDS}"
        m = broker.metrics()
        assert m["aerostream_cold_reads_total"] > 0, m
        assert m["aerostream_cold_read_errors_total"] == 0, m
        assert broker.stop() == 0
    finally:
        broker.cleanup()
