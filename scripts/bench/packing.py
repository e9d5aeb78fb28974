"""Object-store requests per GiB sealed, with and without packed objects,
counted from the S3 server's own request log (moto's access log), with the
release `aerostream` binary.

For each mode (BENCH_MODES, default "unpacked packed"): a fresh moto; one
agent with `--object-store s3://...` (packing at its defaults, or
`--pack-target-bytes 0`); a topic of BENCH_PARTITIONS (100) partitions with
BENCH_SEGMENT_BYTES (2 MiB) segments (segment.ms 10 s, so the tails seal
once producing stops); BENCH_MB (1200) MiB produced at a
steady BENCH_RATE_MB (40) MiB/s spread evenly over the partitions, so that
more than 1 GiB is sealed. Once everything sealed is uploaded and
committed: the PUT-class requests moto logged (PUT object, PUT part,
multipart create and complete, LIST) per GiB sealed. Then the agent stops,
its local log is deleted, and every record is read back from object
storage alone and checked. Then retention (retention.ms=1000) expires
everything, and the run waits until the bucket holds no object of the
topic (with packing: until the sweep deleted every packed object; the
agent runs with --pack-grace-ms BENCH_PACK_GRACE_MS, default 20000).
Asserts the records read back equal those produced; reports figures."""

import os
import re
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tiering"))

from confluent_kafka import Consumer, KafkaError, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource)

import servers  # noqa: E402
from harness import Broker, create_topic, key, producer, value, wait_until  # noqa: E402

MB = 1 << 20
GIB = 1 << 30
PARTITIONS = int(os.environ.get("BENCH_PARTITIONS", "100"))
MEGABYTES = int(os.environ.get("BENCH_MB", "1200"))
RATE_MB = float(os.environ.get("BENCH_RATE_MB", "40"))
SIZE = int(os.environ.get("BENCH_RECORD_BYTES", str(16 << 10)))
SEGMENT = int(os.environ.get("BENCH_SEGMENT_BYTES", str(2 << 20)))
GRACE_MS = int(os.environ.get("BENCH_PACK_GRACE_MS", "20000"))
BUCKET = "bench"
ACCESS = re.compile(r'"(PUT|POST|GET|HEAD|DELETE) (\S+) HTTP/[0-9.]+" (\d+)')


def out(line=""):
    print(line, flush=True)


def requests(log_path):
    """Requests on the bucket's objects moto logged, by S3 billing class."""
    counts = {"put_class": 0, "get_class": 0, "delete": 0, "by_kind": {}}
    with open(log_path, errors="replace") as f:
        for line in f:
            m = ACCESS.search(line)
            if not m:
                continue
            method, target, _status = m.groups()
            path, _, query = target.partition("?")
            if not path.startswith(f"/{BUCKET}"):
                continue
            is_object = path.startswith(f"/{BUCKET}/")
            if method == "PUT" and is_object:
                kind = "put_part" if "partNumber" in query else "put"
            elif method == "POST" and "uploads" in query:
                kind = "create_multipart"
            elif method == "POST" and "uploadId" in query:
                kind = "complete_multipart"
            elif method == "POST" and "delete" in query:
                kind = "delete_batch"
            elif method == "DELETE":
                kind = "delete"
            elif method == "GET" and not is_object:
                kind = "list"
            elif method == "GET":
                kind = "get"
            elif method == "HEAD":
                kind = "head"
            else:
                kind = f"other {method}"
            counts["by_kind"][kind] = counts["by_kind"].get(kind, 0) + 1
    k = counts["by_kind"]
    counts["put_class"] = sum(k.get(x, 0) for x in ("put", "put_part", "create_multipart",
                                                     "complete_multipart", "list"))
    counts["uploads"] = sum(k.get(x, 0) for x in ("put", "put_part", "create_multipart",
                                                   "complete_multipart"))
    counts["get_class"] = k.get("get", 0) + k.get("head", 0)
    return counts


def produce_steadily(bootstrap, topic, count):
    p = producer(bootstrap, **{"linger.ms": 5})
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(err)

    per_sec = RATE_MB * MB / SIZE
    start = time.monotonic()
    for i in range(count):
        due = start + i / per_sec
        delay = due - time.monotonic()
        if delay > 0:
            p.poll(delay)
        while True:
            try:
                p.produce(topic, key=key(i), value=value(i, SIZE), partition=i % PARTITIONS,
                          on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(600)
    assert left == 0 and not errors, (left, errors[:3])
    return time.monotonic() - start


def read_back(bootstrap, topic, count):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 16 << 20, "max.partition.fetch.bytes": 4 << 20})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = set()
    start = time.monotonic()
    deadline = start + 900
    try:
        while len(seen) < count and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(m.error())
                i = int.from_bytes(m.value()[:8], "big")
                assert m.key() == key(i) and m.value() == value(i, SIZE), f"record {i} differs"
                assert m.partition() == i % PARTITIONS, f"record {i} in partition {m.partition()}"
                seen.add(i)
    finally:
        c.close()
    assert len(seen) == count, f"{len(seen)} of {count} records read back"
    return time.monotonic() - start


def keys_under(moto, prefix):
    return servers.s3_keys(moto, BUCKET, prefix)


def run(mode):
    out(f"######## {mode}")
    moto = servers.moto()
    try:
        servers.create_bucket(moto, BUCKET)
        args = ["--pack-grace-ms", str(GRACE_MS)]
        if mode == "unpacked":
            args += ["--pack-target-bytes", "0"]
        broker = Broker(f"s3://{BUCKET}/c1", servers.s3_env(moto), args)
        try:
            broker.start()
            topic = f"packing-{uuid.uuid4().hex[:8]}"
            create_topic(broker.bootstrap, topic, {
                "segment.bytes": str(SEGMENT), "segment.ms": "10000",
                "local.retention.bytes": "0", "retention.ms": "-1"}, partitions=PARTITIONS)
            count = MEGABYTES * MB // SIZE
            took = produce_steadily(broker.bootstrap, topic, count)
            out(f"produced {count} records of {SIZE} B ({MEGABYTES} MiB) to {PARTITIONS} partitions "
                f"in {took:.1f} s ({MEGABYTES / took:.1f} MiB/s, {MEGABYTES / took / PARTITIONS:.2f} MiB/s per partition)")
            waited = time.monotonic()

            def uploaded():
                m = broker.metrics()
                # the tails seal by segment.ms once producing stops
                return (m["aerostream_tier_pending_segments"] == 0
                        and m["aerostream_tier_upload_lag_offsets"] == 0) and m

            m = wait_until("every sealed segment is uploaded and committed", uploaded, timeout=900)
            sealed = m["aerostream_tier_uploaded_bytes_total"]
            segments = m["aerostream_tier_committed_segments_total"]
            out(f"sealed and committed: {segments:.0f} segments, {sealed / GIB:.3f} GiB "
                f"(uploads finished {time.monotonic() - waited:.1f} s after producing ended)")
            r = requests(moto.log_path)
            objects = len(keys_under(moto, "c1/"))
            out(f"requests moto logged: {r['by_kind']}")
            out(f"PUT-class: {r['put_class']} ({r['put_class'] / (sealed / GIB):.1f} per GiB sealed); "
                f"uploads alone (PUT, parts, multipart create/complete): {r['uploads']} "
                f"({r['uploads'] / (sealed / GIB):.1f} per GiB); objects in the bucket: {objects}")
            assert broker.stop() == 0
            broker.forget_local_data()
            broker.start()
            took = read_back(broker.bootstrap, topic, count)
            r2 = requests(moto.log_path)
            gets = r2["get_class"] - r["get_class"]
            out(f"read back every record with the local log deleted: {took:.1f} s "
                f"({MEGABYTES / took:.1f} MiB/s), {gets} GET/HEAD ({gets / (MEGABYTES / 1024):.0f} per GiB read)")
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
                ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
            for f in admin.incremental_alter_configs([res]).values():
                f.result(30)
            started = time.monotonic()
            wait_until("retention removed every object of the topic",
                       lambda: not keys_under(moto, "c1/topics/") and not keys_under(moto, "c1/packs/"),
                       timeout=900, interval=2)
            r3 = requests(moto.log_path)
            out(f"retention emptied the bucket {time.monotonic() - started:.1f} s after retention.ms=1000 "
                f"({r3['by_kind'].get('delete', 0) + r3['by_kind'].get('delete_batch', 0)} delete requests in all)")
            assert broker.stop() == 0
        finally:
            broker.cleanup()
    finally:
        moto.cleanup()
    out()


def main():
    out(f"# {PARTITIONS} partitions, {SEGMENT >> 20} MiB segments, {MEGABYTES} MiB at {RATE_MB} MiB/s")
    for mode in os.environ.get("BENCH_MODES", "unpacked packed").split():
        run(mode)


if __name__ == "__main__":
    main()
