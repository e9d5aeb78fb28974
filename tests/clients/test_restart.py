"""Durability scenarios: restarts and kill -9 of the broker."""

import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from helpers import consume, create_topic, messages, produce_all


def test_group_resumes_from_committed_offsets_after_broker_restart(own_broker, topic_name):
    b = own_broker
    create_topic(b, topic_name, partitions=2)
    sent = messages(100, "r")
    produce_all(b, topic_name, sent)
    group = "resume-" + topic_name
    c, got = consume(b, topic_name, 40, group=group)
    assert len(got) == 40
    c.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in c.committed(
        [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], timeout=10)}
    c.close()
    assert b.stop() == 0, "clean exit on SIGTERM"
    b.start()
    c2 = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    after = {tp.partition: tp.offset for tp in c2.committed(
        [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], timeout=10)}
    assert after == committed, "committed offsets survive the restart"
    c2.subscribe([topic_name])
    rest = []
    deadline = time.time() + 30
    while len(rest) < 60 and time.time() < deadline:
        m = c2.poll(0.5)
        if m is not None and m.error() is None:
            rest.append(m)
    c2.close()
    assert len(rest) == 60, "the group continues where it left off"
    seen = {m.value() for m in got} | {m.value() for m in rest}
    assert seen == {v for _, v, _ in sent}
    for m in rest:
        assert m.offset() >= committed[m.partition()]


def test_every_acknowledged_message_survives_kill_9_during_acks_all_production(own_broker, topic_name):
    b = own_broker
    create_topic(b, topic_name, partitions=3)
    acked = []
    lock = threading.Lock()
    stop = threading.Event()

    def run():
        p = Producer({
            "bootstrap.servers": b.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 20000,
            "enable.idempotence": True,
        })

        def report(err, msg):
            if err is None:
                with lock:
                    acked.append((msg.partition(), msg.offset(), msg.value()))

        i = 0
        while not stop.is_set():
            try:
                p.produce(topic_name, value=b"payload-%08d" % i, on_delivery=report)
                i += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
        p.flush(25)

    t = threading.Thread(target=run)
    t.start()
    deadline = time.time() + 30
    while time.time() < deadline:
        with lock:
            if len(acked) >= 3000:
                break
        time.sleep(0.05)
    b.kill9()
    with lock:
        acked_before_kill = list(acked)
    assert len(acked_before_kill) >= 3000, "production was under way"
    b.start()
    time.sleep(2)
    stop.set()
    t.join(60)
    with lock:
        all_acked = list(acked)
    c, got = consume(b, topic_name, len(all_acked), group="k9-" + topic_name, timeout=60)
    c.close()
    stored = {(m.partition(), m.offset()): m.value() for m in got}
    missing = [(p, o, v) for p, o, v in all_acked if stored.get((p, o)) != v]
    assert missing == [], f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
