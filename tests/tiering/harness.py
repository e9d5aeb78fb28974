"""The real `aerostream` binary with tiered storage, and a verifiable workload:
every record's key, value and timestamp are a function of its offset, so a
consumer can check each record without the producer keeping them."""

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "clients"))
from broker import binary, free_port, free_tcp_and_udp_port  # noqa: E402

# Record timestamps are recent (an hour before the run started), so the topics'
# default retention.ms (7 days) keeps them.
T0 = int(time.time() * 1000) - 3_600_000
POOL = random.Random(6).randbytes(4 << 20)


def value(i, size):
    off = (i * 7919) % (len(POOL) - size)
    return i.to_bytes(8, "big") + POOL[off:off + size - 8]


def key(i):
    return b"k%d" % i


def wait_until(what, cond, timeout=300, interval=0.2):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting until {what} (last: {last!r})")


class Broker:
    """One aerostream process with tiering; ports and data dir survive restarts."""

    def __init__(self, object_store=None, env=None, extra_args=(), wrap=()):
        self.dir = tempfile.mkdtemp(prefix="aerostream-tiering-")
        self.data_dir = os.path.join(self.dir, "data")
        self.object_store = object_store
        self.env = dict(os.environ, **(env or {}))
        self.extra_args = list(extra_args)
        # a command the broker's own runs under (it ends by running its arguments)
        self.wrap = list(wrap)
        self.port = free_port()
        self.http_port = free_port()
        # the native protocol's TCP and QUIC (UDP) ports: free ones, so a
        # broker on the default 9091 elsewhere on the machine is no obstacle
        self.native_port = free_tcp_and_udp_port()
        self.log_path = os.path.join(self.dir, "broker.log")
        self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self, timeout=90):
        args = [*self.wrap, binary(), "serve", "--data-dir", self.data_dir,
                "--kafka-addr", f"127.0.0.1:{self.port}", "--http-addr", f"127.0.0.1:{self.http_port}",
                "--native-addr", f"127.0.0.1:{self.native_port}",
                "--shards", "2", "--group-initial-rebalance-delay-ms", "0", *self.extra_args]
        if self.object_store:
            args += ["--object-store", self.object_store]
        # The log is kept across restarts: only this run's lines count.
        seen = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"aerostream exited with {self.proc.returncode}:\n{self.log()[-5000:]}")
            if b"aerostream listening" in self.log_bytes()[seen:]:
                return self
            time.sleep(0.1)
        raise RuntimeError(f"aerostream did not become ready:\n{self.log()[-5000:]}")

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def log_bytes(self):
        with open(self.log_path, "rb") as f:
            return f.read()

    def stop(self, timeout=30):
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        self.proc = None
        return code

    def cleanup(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def http(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=10) as r:
            return r.read().decode()

    def metrics(self):
        out = {}
        for line in self.http("/metrics").splitlines():
            if line and not line.startswith("#"):
                name, val = line.rsplit(" ", 1)
                out[name] = float(val)
        return out

    def faults(self, query):
        return self.http(f"/admin/object-store/faults?{query}")

    def segment_files(self, topic, partition=0):
        d = os.path.join(self.data_dir, "log", f"{topic}-{partition}")
        return sorted(f for f in os.listdir(d) if f.endswith(".log")) if os.path.isdir(d) else []

    def forget_local_data(self):
        """Removes DATA_DIR/log and the cache's disk tier; keeps DATA_DIR/meta (and DATA_DIR/objects)."""
        shutil.rmtree(os.path.join(self.data_dir, "log"))
        shutil.rmtree(os.path.join(self.data_dir, "cache"), ignore_errors=True)


TIERED_TOPIC = {
    "segment.bytes": "1048576",      # most data lands in sealed segments
    "segment.ms": "3000",            # and the tail seals too once producing stops
    "local.retention.bytes": "0",    # sealed segments leave local disk once in object storage
}


def create_topic(bootstrap, name, configs=None, partitions=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1, config=configs or TIERED_TOPIC)]).values():
        f.result(30)


def producer(bootstrap, **extra):
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
            "batch.size": 1_000_000, "message.timeout.ms": 600_000, "queue.buffering.max.kbytes": 262_144}
    conf.update(extra)
    return Producer(conf)


def produce(bootstrap, topic, start, count, size, p=None):
    """Produces records start..start+count; returns the delivery errors."""
    own = p is None
    p = p or producer(bootstrap)
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    for i in range(start, start + count):
        while True:
            try:
                p.produce(topic, key=key(i), value=value(i, size), timestamp=T0 + i, on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if own:
        left = p.flush(600)
        assert left == 0, f"{left} records were never acknowledged"
    return errors


def consume_and_check(bootstrap, topic, count, size, start=0, timeout=600):
    """Reads offsets start..count from the earliest and checks every record."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 16 << 20, "max.partition.fetch.bytes": 4 << 20})
    c.assign([TopicPartition(topic, 0, start)])
    expected = start
    deadline = time.time() + timeout
    try:
        while expected < count:
            assert time.time() < deadline, f"only reached offset {expected} of {count}"
            for m in c.consume(num_messages=500, timeout=2):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consumer error at offset {expected}: {m.error()}")
                assert m.offset() == expected, f"expected offset {expected}, got {m.offset()}"
                assert m.key() == key(expected), f"key of offset {expected}"
                assert m.value() == value(expected, size), f"value of offset {expected}"
                assert m.timestamp()[1] == T0 + expected, f"timestamp of offset {expected}"
                expected += 1
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low, high
    finally:
        c.close()


def offsets_for_times(bootstrap, topic, offsets):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"times-{time.time_ns()}"})
    try:
        # One call per probe: a request carries each partition once.
        return [c.offsets_for_times([TopicPartition(topic, 0, T0 + o)], timeout=30)[0].offset for o in offsets]
    finally:
        c.close()


def wait_all_tiered(broker, topic, timeout=600):
    """Until nothing waits for upload and the local log holds only its (empty) active segment."""
    def done():
        m = broker.metrics()
        return (m["aerostream_tier_pending_segments"] == 0
                and m["aerostream_tier_upload_lag_offsets"] == 0
                and len(broker.segment_files(topic)) <= 1) and m
    return wait_until("every record is in object storage", done, timeout=timeout)


def mb(name, default):
    return int(os.environ.get(name, default))
