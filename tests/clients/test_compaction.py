"""Compacted topics (cleanup.policy=compact) with a real client.

100,000 records over 1,000 keys go to a compacted topic, then tombstones
for 100 of the keys. Once the broker's cleaner has run, the topic reads
back exactly the latest value of each of the 900 live keys, at the offsets
they were written at; the tombstones are gone once delete.retention.ms has
passed; the partition's segments on disk hold a fraction of the bytes
written; records without a key are refused with INVALID_RECORD; and all of
it survives a restart.
"""

import glob
import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker import Broker

KEYS = 1000
DELETED = 100
RECORDS = 100_000


@pytest.fixture(scope="module")
def broker():
    b = Broker().start()
    yield b
    b.stop()


def create_compacted(bootstrap, topic, **extra):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "3000",
        **extra,
    }
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
        f.result(30)


def read_all(bootstrap, topic, timeout=60):
    """Every record from the start: [(offset, key, value)]."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(m.error())
            out.append((m.offset(), m.key().decode() if m.key() is not None else None,
                        m.value().decode() if m.value() is not None else None))
    finally:
        c.close()
    raise AssertionError(f"did not reach the end of {topic} in {timeout} s")


def log_bytes(broker, topic):
    files = glob.glob(os.path.join(broker.dir, "data", "**", f"{topic}-0", "*.log"), recursive=True)
    assert files, f"no segments of {topic} under {broker.dir}"
    return sum(os.path.getsize(f) for f in files)


def metric_of(broker, name, topic):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") and f'topic="{topic}"' in line:
                return float(line.split()[-1])
    return None


def test_a_compacted_topic_keeps_the_latest_value_of_each_key(broker):
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    create_compacted(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                  "enable.idempotence": True, "compression.type": "lz4",
                  "queue.buffering.max.messages": 500_000})
    written = {}
    for i in range(RECORDS):
        key = f"key-{i % KEYS:04d}"
        value = f"value-{i}"
        p.produce(topic, key=key, value=value)
        if i % 10_000 == 0:
            p.poll(0)
    for k in range(DELETED):
        p.produce(topic, key=f"key-{k:04d}", value=None)
    assert p.flush(60) == 0
    # the last batch of a log always stays (a reader past it would find
    # nothing to fetch below the log end): end with a live key, so that
    # every tombstone may go
    p.produce(topic, key=f"key-{KEYS - 1:04d}", value="the last value")
    assert p.flush(60) == 0
    history = read_all(broker.bootstrap, topic)
    assert len(history) == RECORDS + DELETED + 1
    for offset, key, value in history:
        written[key] = (offset, value)
    expected = {k: v for k, v in written.items() if v[1] is not None}
    assert len(expected) == KEYS - DELETED

    # records without a key are refused, each named
    errors = []
    p.produce(topic, key=None, value="no key",
              on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD, errors

    bytes_in = metric_of(broker, "aerostream_partition_bytes_in_total", topic)
    assert bytes_in and bytes_in > 0

    # the cleaner runs on its own: a quiet partition rolls by segment.ms,
    # the tombstones stay until delete.retention.ms has passed
    deadline = time.time() + 90
    while True:
        records = read_all(broker.bootstrap, topic)
        live = {k: (o, v) for o, k, v in records}
        if len(records) == KEYS - DELETED and all(v is not None for _, v in live.values()):
            break
        assert time.time() < deadline, f"{len(records)} records left after 90 s"
        time.sleep(2)

    assert live == expected
    assert len({o for o, _, _ in records}) == len(records)
    on_disk = log_bytes(broker, topic)
    assert on_disk < bytes_in / 10, (on_disk, bytes_in)
    assert metric_of(broker, "aerostream_partition_cleaner_runs_total", topic) >= 1
    assert metric_of(broker, "aerostream_partition_cleaner_records_removed_total", topic) >= RECORDS - KEYS
    # the REST API (and the console's topic page) show the same figures
    import json
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/v1/topics/{topic}", timeout=10) as r:
        cleaner = json.load(r)["partitions"][0]["cleaner"]
    assert cleaner["runs"] >= 1 and cleaner["records_removed"] >= RECORDS - KEYS, cleaner
    assert 0.0 <= cleaner["dirty_ratio"] <= 1.0 and cleaner["compacted_below"] > 0, cleaner
    # and so does the command line, given an agent's REST address
    import subprocess
    from broker import binary
    shown = subprocess.run([binary(), "topic", "describe", topic, "--bootstrap", broker.bootstrap,
                            "--http", f"127.0.0.1:{broker.http_port}", "--output", "json"],
                           capture_output=True, check=True, timeout=60)
    assert json.loads(shown.stdout)["cleaner"]["0"]["records_removed"] >= RECORDS - KEYS, shown.stdout

    # a consumer whose position lies in a gap goes on at the next record
    offsets = sorted(o for o, _, _ in records)
    gap = next(o for o in range(offsets[0], offsets[-1]) if o not in set(offsets))
    after_gap = min(o for o in offsets if o > gap)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"gap-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "error"})
    c.assign([TopicPartition(topic, 0, gap)])
    m = None
    deadline = time.time() + 30
    while m is None and time.time() < deadline:
        m = c.poll(1.0)
    c.close()
    assert m is not None and not m.error(), m and m.error()
    assert m.offset() == after_gap, (gap, m.offset(), after_gap)

    broker.restart()
    assert read_all(broker.bootstrap, topic) == records


def test_compaction_never_hides_a_value_behind_an_aborted_write(broker):
    topic = f"compacted-txn-{uuid.uuid4().hex[:8]}"
    create_compacted(broker.bootstrap, topic)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, key="k", value="committed")
    assert plain.flush(30) == 0
    tx = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:6]}"})
    tx.init_transactions(30)
    tx.begin_transaction()
    tx.produce(topic, key="k", value="aborted")
    tx.flush(30)
    tx.abort_transaction(30)
    tx.begin_transaction()
    tx.produce(topic, key="j", value="in a committed transaction")
    tx.commit_transaction(30)
    # more writes make the log dirty and roll it
    for i in range(200):
        plain.produce(topic, key=f"filler-{i % 20}", value=str(i))
    assert plain.flush(30) == 0
    # (the log's last batch is never compacted)
    plain.produce(topic, key="last", value="last")
    assert plain.flush(30) == 0

    deadline = time.time() + 60
    while True:
        values = {}
        records = read_all(broker.bootstrap, topic)
        for _o, k, v in records:
            values[k] = v
        fillers = [r for r in records if r[1].startswith("filler-")]
        if len(fillers) == 20:
            break
        assert time.time() < deadline, f"not compacted after 60 s: {len(fillers)} filler records"
        time.sleep(2)
    assert values["k"] == "committed"
    assert values["j"] == "in a committed transaction"
    assert all(v != "aborted" for _o, _k, v in records)


def test_a_stateful_app_restores_its_state_from_a_compacted_changelog(broker):
    """A word count kept the way Kafka Streams keeps state: every count
    change goes to a compacted changelog topic in the same transaction as
    the input offsets it consumed (exactly once). The application stops
    half-way; its successor restores the counts by reading the compacted
    changelog from the start, resumes from the committed offsets, and ends
    with exactly the counts of the whole input."""
    run = uuid.uuid4().hex[:8]
    source, changelog, group = f"words-{run}", f"counts-changelog-{run}", f"wordcount-{run}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(source, 1, 1)]).values():
        f.result(30)
    create_compacted(broker.bootstrap, changelog)
    words = [f"w{i % 50}" for i in range(6000)]
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for w in words:
        p.produce(source, value=w)
    assert p.flush(30) == 0
    expected = {}
    for w in words:
        expected[w] = expected.get(w, 0) + 1

    def app(instance, stop_after):
        """Restores the counts from the changelog, then counts `stop_after`
        more words (or to the end) in transactions of 100."""
        counts = {}
        log = read_all_committed(broker.bootstrap, changelog)
        restored_from.append(len(log))
        for _o, k, v in log:
            if v is None:
                counts.pop(k, None)
            else:
                counts[k] = int(v)
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed"})
        c.subscribe([source])
        out = Producer({"bootstrap.servers": broker.bootstrap,
                        "transactional.id": f"wordcount-{run}"})
        out.init_transactions(30)
        done, idle = 0, 0
        while done < stop_after and idle < 10:
            batch = c.consume(100, 1.0)
            batch = [m for m in batch if not m.error()]
            if not batch:
                idle += 1
                continue
            idle = 0
            out.begin_transaction()
            for m in batch:
                w = m.value().decode()
                counts[w] = counts.get(w, 0) + 1
                out.produce(changelog, key=w, value=str(counts[w]))
            out.send_offsets_to_transaction(c.position(c.assignment()),
                                            c.consumer_group_metadata(), 30)
            out.commit_transaction(30)
            done += len(batch)
        c.close()
        return counts

    restored_from = []
    first = app("a", 3000)
    assert 0 < sum(first.values()) < len(words)
    # the changelog gets compacted meanwhile (segment.ms rolls it)
    deadline = time.time() + 60
    while metric_of(broker, "aerostream_partition_cleaner_runs_total", changelog) in (None, 0.0):
        assert time.time() < deadline, "the changelog was never compacted"
        time.sleep(1)
    second = app("b", len(words))
    assert second == expected
    # the successor restored from the compacted changelog: fewer records
    # than the 3000 changes the first instance wrote (how many fewer
    # depends on which segments had rolled when the cleaner ran)
    assert restored_from[0] == 0 and 0 < restored_from[1] < 3000, restored_from
    # what a third instance restores is the same state, from fewer records
    restored = {k: int(v) for _o, k, v in read_all_committed(broker.bootstrap, changelog)}
    assert restored == expected


def read_all_committed(bootstrap, topic, timeout=60):
    """Every committed record of a one-partition topic: [(offset, key, value)]."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"restore-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True, "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(m.error())
            out.append((m.offset(), m.key().decode(),
                        m.value().decode() if m.value() is not None else None))
    finally:
        c.close()
    raise AssertionError(f"did not reach the end of {topic} in {timeout} s")
