"""Scenarios driven by kafka-python 3.0."""

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_round_trips_every_codec(broker, topic_name, codec):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    a.create_topics([NewTopic(topic_name, 2, 1)])
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, acks="all")
    sent = [(f"k{i}".encode(), f"v{i}".encode() * 10, [("h", str(i).encode())]) for i in range(100)]
    for k, v, h in sent:
        p.send(topic_name, key=k, value=v, headers=h, partition=0)
    p.flush()
    p.close()
    c = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id="kp-" + topic_name,
                      auto_offset_reset="earliest", consumer_timeout_ms=5000)
    got = [(m.key, m.value, m.headers) for m in c]
    c.close()
    a.close()
    assert got == sent


def test_kafka_python_group_commits_and_admin_sees_offsets(broker, topic_name):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    a.create_topics([NewTopic(topic_name, 1, 1)])
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(30):
        p.send(topic_name, value=b"x%d" % i)
    p.flush()
    group = "kpg-" + topic_name
    c = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=5000)
    got = [m for m in c]
    c.commit()
    c.close()
    assert len(got) == 30
    offsets = a.list_group_offsets({group: None})[group]
    assert [(tp.partition, om.offset) for tp, om in offsets.items()] == [(0, 30)]
    groups = [g["group_id"] if isinstance(g, dict) else g[0] for g in a.list_groups()]
    assert group in groups
    a.delete_groups([group])
    assert a.list_group_offsets({group: None})[group] == {}
    configs = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)], config_filter="all")
    assert "segment.bytes" in str(configs["topic"][topic_name]), configs
    a.delete_topics([topic_name])
    deadline = time.time() + 10
    while topic_name in a.list_topics() and time.time() < deadline:
        time.sleep(0.2)
    assert topic_name not in a.list_topics()
    a.close()
