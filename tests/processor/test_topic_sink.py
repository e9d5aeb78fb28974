"""The output-topic sink end to end: events counted per key in 1-second
tumbling windows, each checkpoint's windows written to a topic in one Kafka
transaction with the source offsets. The processor is killed with SIGKILL
with half of the events produced; a checkpoint written after the last committed transaction is left
behind, as a processor dying between its two steps leaves it; the restart
resumes from the checkpoint whose transaction committed. A read_committed
consumer then reads every (key, window) exactly once, with the count
computed from the events produced."""

import collections
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import committed
from broker import Broker, binary

EVENTS = 60_000
KEYS = 20
BASE = 1_700_000_000_000
NAME = "topic-counts"
GROUP = f"aerostream-process-{NAME}"


def create_topics(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("events", 4, 1), NewTopic("counts", 3, 1)]).values():
        f.result(30)


def produce(bootstrap, first, last):
    """Events first..last-1; their count per (key, window start)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    expected = collections.Counter()
    for i in range(first, last):
        key, ts = f"k{i % KEYS}", BASE + i * 5
        expected[(key, ts // 1000 * 1000)] += 1
        p.produce("events", key=key, value=json.dumps({"k": key, "ts": ts}))
        p.poll(0)
    assert p.flush(120) == 0
    return expected


def read_committed(bootstrap, quiet=5.0, timeout=120):
    """Every record of `counts` a read_committed reader sees."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("counts", p, 0) for p in range(3)])
    rows, last, deadline = [], time.time(), time.time() + timeout
    while time.time() - last < quiet and time.time() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        rows.append(json.loads(m.value()))
        assert m.key().decode() == rows[-1]["key"]
        last = time.time()
    c.close()
    return rows


def committed_epoch(bootstrap):
    """The epoch in the metadata of the offsets the processor's group
    committed. (Read with kafka-python: through confluent-kafka 2.16,
    `TopicPartition.metadata` now and then came back with bytes after the
    metadata, which raw OffsetFetch requests and kafka-python never saw.)"""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as Partition
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        got = [c.committed(Partition("events", p), metadata=True) for p in range(4)]
    finally:
        c.close()
    epochs = {o.metadata for o in got if o is not None and o.offset >= 0}
    assert len(epochs) <= 1, epochs
    return int(epochs.pop().removeprefix("epoch=")) if epochs else None


class Processor:
    def __init__(self, root, bootstrap):
        self.root = root
        self.pipeline = os.path.join(root, "p.yaml")
        with open(self.pipeline, "w") as f:
            f.write(f"""
name: {NAME}
source: {{bootstrap: "{bootstrap}", topic: events, format: json, event_time: ts, key: k, idle_timeout: 2s}}
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}]
sink: {{type: topic, topic: counts, url: "file://{root}/state"}}
state: {{dir: "{root}/local"}}
checkpoint_interval: 300ms
""")
        self.log_path = os.path.join(root, "process.log")
        self.proc = subprocess.Popen([binary(), "process", "--pipeline", self.pipeline],
                                     stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT,
                                     env=dict(os.environ, RUST_LOG="info"))

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def checkpoints(self):
        """The checkpoints' own objects (deltas, one per epoch), oldest first."""
        folder = os.path.join(self.root, "state", "_checkpoints")
        return [os.path.join(folder, n) for n in committed.delta_names(os.listdir(folder))]


def test_a_killed_processor_writes_every_window_to_the_topic_exactly_once():
    b = Broker().start()
    root = tempfile.mkdtemp(prefix="aerostream-topic-sink-")
    procs = []
    try:
        create_topics(b.bootstrap)
        p = Processor(root, b.bootstrap)
        procs.append(p)
        # the events come in steps while the processor runs: it is killed
        # with half of them produced, after a few transactions committed
        expected = collections.Counter()
        step = EVENTS // 10
        deadline = time.time() + 300
        for first in range(0, EVENTS // 2, step):
            expected += produce(b.bootstrap, first, first + step)
            time.sleep(0.5)
        while (committed_epoch(b.bootstrap) or 0) < 3:
            assert time.time() < deadline and p.proc.poll() is None, p.log()[-3000:]
            time.sleep(0.2)
        p.proc.send_signal(signal.SIGKILL)
        p.proc.wait()
        latest = p.checkpoints()[-1]
        with open(latest) as f:
            checkpoint = json.load(f)
        committed = committed_epoch(b.bootstrap)
        before = read_committed(b.bootstrap, quiet=2.0)
        expected += produce(b.bootstrap, EVENTS // 2, EVENTS)
        assert 0 < len(before) < len(expected), "killed mid-run"
        print(f"killed: latest checkpoint {checkpoint['epoch']}, committed epoch {committed}, "
              f"{len(before)} of {len(expected)} windows committed")
        assert committed in (checkpoint["epoch"], checkpoint["epoch"] - 1)
        if committed == checkpoint["epoch"]:
            # as if it died after writing its next checkpoint, before that
            # checkpoint's transaction committed
            checkpoint["epoch"] += 1
            with open(os.path.join(root, "state", "_checkpoints", f"{checkpoint['epoch']:020}.json"), "w") as f:
                json.dump(checkpoint, f)

        p = Processor(root, b.bootstrap)
        procs.append(p)
        deadline = time.time() + 300
        while "resuming from the one before" not in p.log():
            assert time.time() < deadline and p.proc.poll() is None, p.log()[-3000:]
            time.sleep(0.2)
        while len(rows := read_committed(b.bootstrap, quiet=2.0)) < len(expected):
            assert time.time() < deadline and p.proc.poll() is None, (len(rows), p.log()[-3000:])
            time.sleep(1)
        got = collections.Counter((r["key"], r["window_start"]) for r in rows)
        twice = [k for k, n in got.items() if n > 1]
        assert not twice, f"windows written twice: {twice[:5]}"
        counts = {(r["key"], r["window_start"]): r["n"] for r in rows}
        assert counts == dict(expected), [(k, counts.get(k), v) for k, v in expected.items() if counts.get(k) != v][:5]
        assert all(r["window_end"] == r["window_start"] + 1000 for r in rows)
        p.proc.send_signal(signal.SIGTERM)
        assert p.proc.wait(timeout=60) == 0, p.log()[-3000:]
        assert committed_epoch(b.bootstrap) is not None
    finally:
        for q in procs:
            if q.proc.poll() is None:
                q.proc.kill()
                q.proc.wait()
        b.stop()
        shutil.rmtree(root, ignore_errors=True)
