"""Client quotas with real clients: a producer_byte_rate and a
consumer_byte_rate set with `aerostream quota` (Kafka's AlterClientQuotas)
hold a confluent-kafka producer and consumer that try to go as fast as they
can to within 20% of the limit, while a client id without a quota is not
held; `quota list` reads them back (DescribeClientQuotas) and `quota remove`
lifts them. A request_percentage holds a connection that sends requests
back to back."""

import json
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker import Broker, binary

LIMIT = 256 * 1024  # bytes per second
RECORD = b"q" * 1000
SECONDS = 10


@pytest.fixture(scope="module")
def broker():
    b = Broker().start()
    yield b
    assert b.stop() == 0, b.log()


def cli(broker, *args):
    out = subprocess.run([binary(), "quota", *args, "--bootstrap", broker.bootstrap],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def produce_rate(broker, topic, client_id, seconds):
    """Bytes per second acknowledged to a producer that keeps its queue full."""
    acked = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id,
                  "linger.ms": 5, "batch.size": 32 * 1024, "acks": "all",
                  "queue.buffering.max.kbytes": 4096})
    start = time.time()
    while time.time() - start < seconds:
        try:
            p.produce(topic, value=RECORD,
                      on_delivery=lambda err, m: acked.append(len(m.value())) if err is None else None)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    elapsed = time.time() - start
    p.purge()  # what is still queued was never acknowledged in time
    p.flush(10)
    return sum(acked) / elapsed


def new_topic(broker, prefix):
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    return topic


def test_a_producer_is_held_to_its_client_ids_byte_rate(broker):
    topic = new_topic(broker, "quota")
    cli(broker, "set", "--client-id", "throttled", "--set", f"producer_byte_rate={LIMIT}")
    listed = json.loads(cli(broker, "list", "--output", "json"))
    assert {"user": None, "client_id": "throttled", "key": "producer_byte_rate",
            "value": float(LIMIT)} in listed, listed

    rate = produce_rate(broker, topic, "throttled", SECONDS)
    print(f"throttled producer: {rate:.0f} B/s, {rate / LIMIT:.2f}x its limit")
    assert 0.8 * LIMIT <= rate <= 1.2 * LIMIT, f"{rate:.0f} B/s against a limit of {LIMIT}"
    free = produce_rate(broker, topic, "free", 3)
    print(f"producer without a quota: {free:.0f} B/s")
    assert free > 2 * LIMIT, f"a client id without a quota ran at {free:.0f} B/s"

    cli(broker, "remove", "--client-id", "throttled", "--key", "producer_byte_rate")
    assert json.loads(cli(broker, "list", "--output", "json")) == []


def test_a_consumer_is_held_to_its_byte_rate(broker):
    topic = new_topic(broker, "quota-read")
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    total = int(LIMIT * SECONDS * 2 / len(RECORD))  # more than the run can read
    for _ in range(total):
        while True:
            try:
                p.produce(topic, value=RECORD)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    cli(broker, "set", "--default-client-id", "--set", f"consumer_byte_rate={LIMIT}")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "reader",
                  "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 64 * 1024, "max.partition.fetch.bytes": 64 * 1024,
                  "message.max.bytes": 32 * 1024})
    c.subscribe([topic])
    got, start = 0, None
    while start is None or time.time() - start < SECONDS:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            start = start or time.time()
            got += len(m.value())
    rate = got / (time.time() - start)
    c.close()
    cli(broker, "remove", "--default-client-id", "--key", "consumer_byte_rate")
    print(f"throttled consumer: {rate:.0f} B/s, {rate / LIMIT:.2f}x its limit")
    assert 0.8 * LIMIT <= rate <= 1.2 * LIMIT, f"{rate:.0f} B/s against a limit of {LIMIT}"


def requests_per_second(broker, client_id, seconds):
    """ApiVersions requests answered per second on one connection that
    sends the next as soon as the last is answered."""
    import socket
    import struct
    host, port = broker.bootstrap.split(":")
    cid = client_id.encode()
    answered = 0
    with socket.create_connection((host, int(port)), timeout=30) as s:
        start = time.time()
        while time.time() - start < seconds:
            body = struct.pack(">hhih", 18, 0, answered, len(cid)) + cid
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", read_exactly(s, 4))[0]
            answer = read_exactly(s, size)
            assert struct.unpack(">i", answer[:4])[0] == answered
            answered += 1
        return answered / (time.time() - start)


def read_exactly(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "the broker closed the connection"
        buf += chunk
    return buf


def test_a_request_percentage_holds_a_client_ids_request_rate(broker):
    # 0.1% of a thread: a millisecond of request time each second
    cli(broker, "set", "--client-id", "chatty", "--set", "request_percentage=0.1")
    free = requests_per_second(broker, "quiet", 3)
    held = requests_per_second(broker, "chatty", 5)
    print(f"requests/s without a quota: {free:.0f}, with request_percentage=0.1: {held:.0f}")
    assert held < free / 4, f"{held:.0f} requests/s held against {free:.0f} free"
    throttles = broker.metric("aerostream_kafka_quota_throttles_total")
    assert throttles > 0
    cli(broker, "remove", "--client-id", "chatty", "--key", "request_percentage")
    again = requests_per_second(broker, "chatty", 2)
    assert again > 2 * held, f"{again:.0f} requests/s once the quota is gone"
