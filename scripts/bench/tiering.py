"""Tiered-storage benchmark with the release `aerostream` binary and an S3
server (moto) started here. Reports figures; asserts nothing about speed.

1. Produce MEGABYTES at the highest rate one librdkafka producer reaches,
   with small segments so that sealing and uploading never stop; sample
   /metrics meanwhile. Report produce MB/s, upload MB/s over the same
   window, the upload lag when producing ends and how long it takes to
   reach zero.
2. Stop the broker, remove DATA_DIR/log and the cache's disk tier, start it
   again: every record now comes from object storage. Consume everything from
   the earliest offset (cold cache), then again (warm cache). Report MB/s,
   block lookups per cache tier and GETs for each pass.

Settings (environment): BENCH_STORE (s3, or file for the local folder:
the uploader without the S3 server's limits), BENCH_MB (default 800), BENCH_RECORD_BYTES (16384),
BENCH_SEGMENT_BYTES (4194304), BENCH_CACHE_MEMORY (256MiB),
BENCH_CACHE_DISK (1GiB). The broker runs 2 shards (the harness default)."""

import os
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tiering"))

from confluent_kafka import Consumer, KafkaError, TopicPartition  # noqa: E402

import servers  # noqa: E402
from harness import Broker, create_topic, key, producer, value, wait_until  # noqa: E402

MB = 1 << 20
MEGABYTES = int(os.environ.get("BENCH_MB", "800"))
STORE = os.environ.get("BENCH_STORE", "s3")
SIZE = int(os.environ.get("BENCH_RECORD_BYTES", str(16 << 10)))
SEGMENT = int(os.environ.get("BENCH_SEGMENT_BYTES", str(4 << 20)))
CACHE_MEMORY = os.environ.get("BENCH_CACHE_MEMORY", "256MiB")
CACHE_DISK = os.environ.get("BENCH_CACHE_DISK", "1GiB")


def out(line=""):
    print(line, flush=True)


class Sampler(threading.Thread):
    """Polls /metrics every 0.25 s and keeps (time, figures)."""

    def __init__(self, broker):
        super().__init__(daemon=True)
        self.broker, self.samples, self.stopped = broker, [], threading.Event()

    def run(self):
        while not self.stopped.is_set():
            try:
                self.samples.append((time.time(), self.broker.metrics()))
            except OSError:
                pass
            self.stopped.wait(0.25)

    def at(self, t):
        """The last sample taken at or before t."""
        best = self.samples[0]
        for s in self.samples:
            if s[0] <= t:
                best = s
        return best


def produce_all(broker, topic, count):
    p = producer(broker.bootstrap, **{"linger.ms": 5, "acks": "all"})
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(err)

    started = time.time()
    for i in range(count):
        v = value(i, SIZE)
        while True:
            try:
                p.produce(topic, key=key(i), value=v, on_delivery=report)
                break
            except BufferError:
                p.poll(0.01)
        if i % 64 == 0:
            p.poll(0)
    left = p.flush(900)
    ended = time.time()
    if left or errors:
        raise RuntimeError(f"{left} records unacknowledged, {len(errors)} errors: {errors[:3]}")
    return started, ended


def consume_all(broker, topic, count):
    """Reads every record from the earliest offset; checks offsets are
    contiguous and each value names its offset. Returns (seconds, bytes)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"bench-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 64 * MB, "max.partition.fetch.bytes": 16 * MB,
                  "queued.max.messages.kbytes": 262144})
    c.assign([TopicPartition(topic, 0, 0)])
    expected, size = 0, 0
    started = time.time()
    deadline = started + 900
    try:
        while expected < count:
            if time.time() > deadline:
                raise RuntimeError(f"only reached offset {expected} of {count}")
            for m in c.consume(num_messages=1000, timeout=1):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"consumer error at {expected}: {m.error()}")
                v = m.value()
                if m.offset() != expected or int.from_bytes(v[:8], "big") != expected:
                    raise RuntimeError(f"expected offset {expected}, got {m.offset()}")
                size += len(v) + len(m.key())
                expected += 1
        return time.time() - started, size
    finally:
        c.close()


def cpu_seconds(pid):
    """User plus system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lookups(m):
    g = lambda r: m.get(f'aerostream_cold_cache_lookups_total{{result="{r}"}}', 0)  # noqa: E731
    return g("memory_hit"), g("disk_hit"), g("miss")


# what S3 bills at the PUT rate, and at the GET rate
PUT_CLASS = ("put", "create_multipart", "put_part", "complete_multipart", "copy", "list")
GET_CLASS = ("get", "head")
GIB = 1 << 30


def requests(m, ops):
    """Object-store requests of the kinds `ops` the agent counted (/metrics)."""
    return sum(m.get(f'aerostream_object_store_requests_total{{op="{op}"}}', 0) for op in ops)


def requests_line(label, before, after, ops, size):
    """One line: the requests of kinds `ops` between two /metrics samples,
    per GiB of `size` bytes, and by kind."""
    n = requests(after, ops) - requests(before, ops)
    kinds = ", ".join(f"{op} {requests(after, (op,)) - requests(before, (op,)):.0f}" for op in ops)
    per_gib = n / (size / GIB) if size else 0
    out(f"{label} {n:.0f} ({per_gib:.0f} per GiB; {kinds})")


def read_pass(name, broker, topic, count):
    before = broker.metrics()
    secs, size = consume_all(broker, topic, count)
    after = broker.metrics()
    mem, disk, miss = (a - b for a, b in zip(lookups(after), lookups(before)))
    total = max(mem + disk + miss, 1)
    gets = after["aerostream_object_store_gets_total"] - before["aerostream_object_store_gets_total"]
    get_bytes = after["aerostream_object_store_get_bytes_total"] - before["aerostream_object_store_get_bytes_total"]
    cold = after["aerostream_cold_read_bytes_total"] - before["aerostream_cold_read_bytes_total"]
    out(f"{name:<28} {size / MB / secs:8.1f} MB/s  {size / MB:7.1f} MB in {secs:6.2f} s  "
        f"cold-read bytes served {cold / MB:7.1f} MB")
    out(f"{'':<28} block lookups: memory hit {mem:.0f} ({mem / total:.1%}), disk hit {disk:.0f} "
        f"({disk / total:.1%}), miss {miss:.0f} ({miss / total:.1%}); hit ratio {(mem + disk) / total:.1%}")
    out(f"{'':<28} GETs {gets:.0f}, {get_bytes / MB:.1f} MB fetched from the object store")
    requests_line(f"{'':<28} GET-class requests", before, after, GET_CLASS, size)


def main():
    count = MEGABYTES * MB // SIZE
    moto = servers.moto()
    servers.create_bucket(moto, "aerostream")
    cache_args = ["--cache-memory-bytes", CACHE_MEMORY, "--cache-disk-bytes", CACHE_DISK]
    if STORE == "file":
        broker = Broker(None, {}, cache_args)
        where = "the local folder DATA_DIR/objects (no S3 server)"
    else:
        broker = Broker("s3://aerostream/bench", servers.s3_env(moto), cache_args)
        where = "moto_server on 127.0.0.1 (in memory)"
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        broker.start()
        out(f"records: {count} x {SIZE} B value (+ small key) = {MEGABYTES} MB into one partition; "
            f"segment.bytes={SEGMENT}, local.retention.bytes=0; cache {CACHE_MEMORY} memory + {CACHE_DISK} disk; "
            f"shards=2; object store = {where}")
        create_topic(broker.bootstrap, topic, {"segment.bytes": str(SEGMENT), "segment.ms": "2000",
                                               "local.retention.bytes": "0"})
        sampler = Sampler(broker)
        sampler.start()
        cpu0 = {"broker": cpu_seconds(broker.proc.pid), "moto": cpu_seconds(moto.proc.pid)}
        start, end = produce_all(broker, topic, count)
        produce_secs = end - start
        out()
        out("== produce and upload")
        out(f"produce (acks=all, idempotent)  {MEGABYTES / produce_secs:8.1f} MB/s  "
            f"{count / produce_secs:8.0f} records/s  {produce_secs:6.2f} s")
        m0, m1 = sampler.at(start)[1], sampler.at(end)[1]
        up = m1["aerostream_tier_uploaded_bytes_total"] - m0["aerostream_tier_uploaded_bytes_total"]
        out(f"uploaded while producing        {up / MB / produce_secs:8.1f} MB/s  "
            f"({up / MB:.1f} MB of .seg/.idx/.tix in the same {produce_secs:.2f} s)")
        out(f"upload lag when producing ended: {m1['aerostream_tier_upload_lag_offsets']:.0f} offsets, "
            f"{m1['aerostream_tier_upload_lag_seconds']:.1f} s; pending segments "
            f"{m1['aerostream_tier_pending_segments']:.0f} ({m1['aerostream_tier_pending_bytes'] / MB:.1f} MB); "
            f"local unuploaded {m1['aerostream_local_unuploaded_bytes'] / MB:.1f} MB")

        def caught_up():
            m = broker.metrics()
            return (m["aerostream_tier_upload_lag_offsets"] == 0 and m["aerostream_tier_pending_segments"] == 0
                    and m["aerostream_tier_uploads_in_flight"] == 0) and m
        m2 = wait_until("the upload lag reaches zero", caught_up, timeout=900, interval=0.1)
        zero = time.time()
        cpu = {"broker": cpu_seconds(broker.proc.pid) - cpu0["broker"],
               "moto": cpu_seconds(moto.proc.pid) - cpu0["moto"]}
        sampler.stopped.set()
        sampler.join()
        total = m2["aerostream_tier_uploaded_bytes_total"]
        out(f"upload lag reached zero {zero - end:.1f} s after producing ended (includes segment.ms=2 s for the tail)")
        out(f"upload overall                  {total / MB / (zero - start):8.1f} MB/s  "
            f"({total / MB:.1f} MB, {m2['aerostream_tier_uploaded_objects_total']:.0f} objects, "
            f"{m2['aerostream_tier_committed_segments_total']:.0f} segments committed, "
            f"{m2['aerostream_tier_upload_failures_total']:.0f} upload failures, "
            f"{m2['aerostream_produce_backpressure_total']:.0f} produce refusals)")
        peak = max(s[1]["aerostream_tier_upload_lag_seconds"] for s in sampler.samples)
        peak_mb = max(s[1]["aerostream_local_unuploaded_bytes"] for s in sampler.samples) / MB
        out(f"peak upload lag {peak:.1f} s, peak local unuploaded {peak_mb:.1f} MB")
        if STORE == "file":
            out("object-store requests: not counted (the local folder store hard-links uploads)")
        else:
            requests_line("PUT-class requests while uploading (S3 bills LIST as PUT too):", m0, m2, PUT_CLASS, total - m0["aerostream_tier_uploaded_bytes_total"])
        out(f"CPU from first produce to zero lag ({zero - start:.1f} s wall): broker {cpu['broker']:.1f} s, "
            f"S3 server {cpu['moto']:.1f} s (of {os.cpu_count()} cores)")

        out()
        out("== reads after a restart with DATA_DIR/log and the cache's disk tier removed")
        assert broker.stop() == 0
        broker.forget_local_data()
        broker.start()
        read_pass("cold cache (all from store)", broker, topic, count)
        read_pass("warm cache", broker, topic, count)
        m = broker.metrics()
        ratio = {t: m[f'aerostream_cold_cache_hit_ratio{{tier="{t}"}}'] for t in ("memory", "disk", "any")}
        out(f"cache hit ratio since restart (aerostream_cold_cache_hit_ratio): memory {ratio['memory']:.1%}, "
            f"disk {ratio['disk']:.1%}, any {ratio['any']:.1%}")
        assert broker.stop() == 0
    finally:
        broker.cleanup()
        moto.cleanup()


if __name__ == "__main__":
    main()
