"""Transactions with confluent-kafka (librdkafka): a transactional producer
commits and aborts, read_committed consumers see only what was committed,
offsets sent in a transaction move only with it, and a second producer
with the same transactional id fences the first and aborts its open
transaction. On one agent here; on three agents with RF 3 in
test_cluster_transactions (same scenarios)."""

import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create(bootstrap, topic, partitions=3, rf=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(30)


def txn_producer(bootstrap, tid, **extra):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 20000, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def read_all(bootstrap, topic, isolation, expect=None, timeout=20):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.subscribe([topic])
    got = []
    import time
    deadline = time.time() + timeout
    idle_since = time.time()
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            if expect is None and got and time.time() - idle_since > 3:
                break
            if expect is not None and len(got) >= expect and time.time() - idle_since > 2:
                break
            continue
        if m.error():
            continue
        idle_since = time.time()
        got.append(m.value().decode())
    c.close()
    return got


def scenario_commit_and_abort(bootstrap, topic):
    p = txn_producer(bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=f"c1-{i}", partition=i % 3)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=f"a-{i}", partition=i % 3)
    p.flush(30)  # the aborted records are in the log
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=f"c2-{i}", partition=i % 3)
    p.commit_transaction(30)

    committed = read_all(bootstrap, topic, "read_committed", expect=60)
    assert sorted(committed) == sorted([f"c1-{i}" for i in range(30)] + [f"c2-{i}" for i in range(30)])
    everything = read_all(bootstrap, topic, "read_uncommitted", expect=90)
    assert len(everything) == 90 and sum(v.startswith("a-") for v in everything) == 30, \
        "read_uncommitted sees the aborted records too"


def scenario_open_transaction_holds_back_read_committed(bootstrap, topic):
    p = txn_producer(bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"open-{i}", partition=0)
    p.flush(30)
    assert read_all(bootstrap, topic, "read_committed", timeout=6) == [], \
        "nothing of an open transaction is read_committed"
    assert len(read_all(bootstrap, topic, "read_uncommitted", expect=10)) == 10
    p.commit_transaction(30)
    assert len(read_all(bootstrap, topic, "read_committed", expect=10)) == 10


def scenario_send_offsets(bootstrap, source, sink):
    # input records, read by a consumer group, copied in transactions
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        plain.produce(source, value=f"in-{i}", partition=0)
    plain.flush(30)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.subscribe([source])
    msgs = []
    import time
    deadline = time.time() + 30
    while len(msgs) < 10 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            msgs.append(m)
    msgs = msgs[:10]
    p = txn_producer(bootstrap, f"tx-{uuid.uuid4().hex[:8]}")

    def committed():
        return c.committed([TopicPartition(source, 0)], timeout=10)[0].offset

    # an aborted transaction moves no offset
    p.begin_transaction()
    for m in msgs:
        p.produce(sink, value=m.value(), partition=0)
    p.send_offsets_to_transaction([TopicPartition(source, 0, msgs[-1].offset() + 1)],
                                  c.consumer_group_metadata(), 30)
    p.abort_transaction(30)
    assert committed() < 0, "offsets sent in an aborted transaction are not committed"

    p.begin_transaction()
    for m in msgs:
        p.produce(sink, value=m.value(), partition=0)
    p.send_offsets_to_transaction([TopicPartition(source, 0, msgs[-1].offset() + 1)],
                                  c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    assert committed() == msgs[-1].offset() + 1, "committed with the transaction"
    c.close()
    copied = read_all(bootstrap, sink, "read_committed", expect=10)
    assert sorted(copied) == sorted(m.value().decode() for m in msgs)


def scenario_fencing(bootstrap, topic):
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    first = txn_producer(bootstrap, tid)
    first.begin_transaction()
    for i in range(5):
        first.produce(topic, value=f"zombie-{i}", partition=1)
    first.flush(30)
    second = txn_producer(bootstrap, tid)  # fences the first, aborts its transaction
    second.begin_transaction()
    second.produce(topic, value="fresh", partition=1)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        first.produce(topic, value="zombie-late", partition=1)
        first.commit_transaction(30)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower(), e.value
    values = read_all(bootstrap, topic, "read_committed", expect=1)
    assert values == ["fresh"], values


def test_a_hung_transaction_is_aborted_at_its_timeout(broker, topic_name):
    create(broker.bootstrap, topic_name, partitions=1)
    hung = txn_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:8]}",
                        **{"transaction.timeout.ms": 3000})
    hung.begin_transaction()
    for i in range(5):
        hung.produce(topic_name, value=f"hung-{i}", partition=0)
    hung.flush(30)  # and then the producer goes quiet, its transaction open
    later = txn_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
    later.begin_transaction()
    for i in range(5):
        later.produce(topic_name, value=f"later-{i}", partition=0)
    later.commit_transaction(30)
    # read_committed waits behind the open transaction until the coordinator
    # aborts it, then sees the later commit and none of the hung records
    values = read_all(broker.bootstrap, topic_name, "read_committed", expect=5, timeout=30)
    assert sorted(values) == [f"later-{i}" for i in range(5)], values
    with pytest.raises(KafkaException):
        hung.commit_transaction(15)


def test_commit_and_abort(broker, topic_name):
    create(broker.bootstrap, topic_name)
    scenario_commit_and_abort(broker.bootstrap, topic_name)


def test_an_open_transaction_holds_back_read_committed_consumers(broker, topic_name):
    create(broker.bootstrap, topic_name, partitions=1)
    scenario_open_transaction_holds_back_read_committed(broker.bootstrap, topic_name)


def test_offsets_sent_in_a_transaction_commit_with_it(broker, topic_name):
    create(broker.bootstrap, topic_name, partitions=1)
    create(broker.bootstrap, topic_name + "-out", partitions=1)
    scenario_send_offsets(broker.bootstrap, topic_name, topic_name + "-out")


def test_a_new_producer_fences_the_old_and_aborts_its_transaction(broker, topic_name):
    create(broker.bootstrap, topic_name, partitions=2)
    scenario_fencing(broker.bootstrap, topic_name)


def test_the_cli_lists_describes_and_aborts_transactions(broker, topic_name):
    from test_cli import assert_clean_failure, cli, cli_json
    create(broker.bootstrap, topic_name, partitions=2)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    p = txn_producer(broker.bootstrap, tid)
    p.begin_transaction()
    p.produce(topic_name, value="open-0", partition=0)
    p.produce(topic_name, value="open-1", partition=1)
    p.flush(30)

    listed = {t["transactional_id"]: t for t in cli_json(broker, "transaction", "list")}
    assert listed[tid]["state"] == "Ongoing", listed[tid]
    d = cli_json(broker, "transaction", "describe", tid)
    assert d["state"] == "Ongoing" and d["start_time_ms"] is not None, d
    assert sorted(d["partitions"]) == [f"{topic_name}-0", f"{topic_name}-1"], d
    assert "Ongoing" in cli(broker, "transaction", "describe", tid).stdout.decode()

    a = cli_json(broker, "transaction", "abort", tid)
    assert a["producer_id"] == d["producer_id"] and a["producer_epoch"] > d["producer_epoch"], (a, d)
    d = cli_json(broker, "transaction", "describe", tid)
    assert d["state"] == "Empty" and d["start_time_ms"] is None, d
    assert read_all(broker.bootstrap, topic_name, "read_committed", timeout=5) == [], \
        "nothing of the aborted transaction is readable"
    with pytest.raises(KafkaException):
        p.commit_transaction(15)  # the producer was fenced

    missing = cli(broker, "transaction", "describe", "no-such-id", check=False)
    assert_clean_failure(missing, "no-such-id")
