"""Scenarios driven by aiokafka 0.14 (asyncio)."""

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic


async def _round_trip(bootstrap, topic, codec):
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, 2, 1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, enable_idempotence=True)
    await producer.start()
    sent = [(f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())]) for i in range(100)]
    try:
        for k, v, h in sent:
            await producer.send(topic, key=k, value=v, headers=h, partition=1)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="aio-" + topic,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    got = []
    try:
        while len(got) < len(sent):
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
            for msgs in batch.values():
                got.extend((m.key, m.value, list(m.headers)) for m in msgs)
        await consumer.commit()
        committed = [await consumer.committed(tp) for tp in consumer.assignment()]
    finally:
        await consumer.stop()
    return sent, got, committed


@pytest.mark.parametrize("codec", [None, "gzip", "zstd"])
def test_aiokafka_idempotent_round_trip_and_commit(broker, topic_name, codec):
    sent, got, committed = asyncio.run(_round_trip(broker.bootstrap, topic_name, codec))
    assert [(k, v, list(h)) for k, v, h in sent] == got
    assert sorted(committed) == [0, 100], "position of the empty partition and of the full one"
