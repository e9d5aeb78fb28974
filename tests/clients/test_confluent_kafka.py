"""Scenarios driven by confluent-kafka (librdkafka 2.16)."""

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from helpers import CODECS, admin, consume, create_topic, messages, produce_all


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_keys_values_headers_in_order(broker, topic_name, codec):
    create_topic(broker, topic_name)
    sent = messages(200, codec)
    produce_all(broker, topic_name, sent, **{"compression.type": codec})
    c, got = consume(broker, topic_name, len(sent))
    c.close()
    assert [(m.key(), m.value(), m.headers()) for m in got] == [(k, v, h) for k, v, h in sent]
    assert [m.offset() for m in got] == list(range(len(sent))), "offsets are dense from 0"


def test_metadata_auto_creates_a_topic_with_one_partition(broker, topic_name):
    a = admin(broker)
    md = a.list_topics(topic=topic_name, timeout=10)
    t = md.topics[topic_name]
    assert t.error is None
    assert list(t.partitions) == [0]
    assert t.partitions[0].leader == 1


def test_produce_to_missing_partition_is_refused(broker, topic_name):
    create_topic(broker, topic_name, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
    errors = []
    p.produce(topic_name, value=b"x", partition=5, on_delivery=lambda err, m: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None, "no partition 5"


def _assignments(consumers):
    return [set((tp.topic, tp.partition) for tp in c.assignment()) for c in consumers]


def _poll_until(consumers, done, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            c.poll(0.2)
        if done():
            return True
    return False


def test_group_rebalances_across_two_then_three_members(broker, topic_name):
    create_topic(broker, topic_name, partitions=6)
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"rebalance-{topic_name}",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "auto.offset.reset": "earliest",
    }
    members = [Consumer(dict(conf, **{"client.id": "m0"}))]
    members[0].subscribe([topic_name])
    assert _poll_until(members, lambda: len(_assignments(members)[0]) == 6), "single member owns all partitions"
    all_parts = {(topic_name, p) for p in range(6)}
    for size in (2, 3):
        c = Consumer(dict(conf, **{"client.id": f"m{size - 1}"}))
        c.subscribe([topic_name])
        members.append(c)

        def balanced():
            a = _assignments(members)
            return all(len(x) == 6 // size for x in a) and set().union(*a) == all_parts

        assert _poll_until(members, balanced), f"{size} members split 6 partitions evenly: {_assignments(members)}"
        a = _assignments(members)
        assert sum(len(x) for x in a) == 6, "no partition is assigned twice"
    a = admin(broker)
    desc = a.describe_consumer_groups([conf["group.id"]])[conf["group.id"]].result(timeout=10)
    assert len(desc.members) == 3
    assert str(desc.state).upper().endswith("STABLE")
    for c in members:
        c.close()


def test_idempotent_producer_writes_each_message_once(broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    sent = messages(2000, "idem")
    acked = produce_all(broker, topic_name, sent, **{"enable.idempotence": True, "acks": "all", "max.in.flight": 5})
    assert len(acked) == len(sent)
    c, got = consume(broker, topic_name, len(sent) + 1, timeout=15)
    c.close()
    assert sorted(m.value() for m in got) == sorted(v for _, v, _ in sent), "no loss, no duplicates"


def test_list_offsets_earliest_latest_and_by_time(broker, topic_name):
    create_topic(broker, topic_name)
    base = int(time.time() * 1000) - 100_000
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce(topic_name, value=b"v%d" % i, timestamp=base + i * 1000)
        p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lo-" + topic_name})
    low, high = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
    assert (low, high) == (0, 10)
    found = c.offsets_for_times([TopicPartition(topic_name, 0, base + 4500)], timeout=10)
    assert found[0].offset == 5, "first record at or after the timestamp"
    after = c.offsets_for_times([TopicPartition(topic_name, 0, base + 99_000)], timeout=10)
    assert after[0].offset in (-1, 10), "no record that late"
    c.close()


def test_topic_configs_can_be_described_and_altered(broker, topic_name):
    create_topic(broker, topic_name, config={"retention.ms": "3600000"})
    a = admin(broker)
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    configs = a.describe_configs([res])[res].result(timeout=10)
    assert configs["retention.ms"].value == "3600000"
    assert not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default
    change = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET),
    ])
    a.incremental_alter_configs([change])[change].result(timeout=10)
    configs = a.describe_configs([res])[res].result(timeout=10)
    assert configs["retention.ms"].value == "7200000"
    assert configs["max.message.bytes"].value == "2000000"
    bad = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET),
    ])
    with pytest.raises(KafkaException):
        a.incremental_alter_configs([bad])[bad].result(timeout=10)


def test_deleted_topic_disappears_and_can_be_recreated_empty(broker, topic_name):
    create_topic(broker, topic_name)
    produce_all(broker, topic_name, messages(5))
    a = admin(broker)
    a.delete_topics([topic_name])[topic_name].result(timeout=10)
    deadline = time.time() + 10
    while topic_name in a.list_topics(timeout=10).topics and time.time() < deadline:
        time.sleep(0.2)
    assert topic_name not in a.list_topics(timeout=10).topics
    create_topic(broker, topic_name)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "d-" + topic_name})
    assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, 0)
    c.close()


def test_creating_an_existing_topic_fails_with_topic_already_exists(broker, topic_name):
    create_topic(broker, topic_name)
    with pytest.raises(KafkaException) as e:
        create_topic(broker, topic_name)
    assert "TOPIC_ALREADY_EXISTS" in str(e.value)


def test_consumer_waits_for_new_records_with_long_poll(broker, topic_name):
    create_topic(broker, topic_name)
    c = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": "lp-" + topic_name,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 5000,
    })
    c.subscribe([topic_name])
    c.poll(2)

    def late():
        time.sleep(1.5)
        produce_all(broker, topic_name, messages(1, "late"))

    t = threading.Thread(target=late)
    t.start()
    got = None
    deadline = time.time() + 20
    while got is None and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got = m
    t.join()
    c.close()
    assert got is not None and got.value() == b"late-0"
