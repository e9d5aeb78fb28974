"""Shared helpers for client scenarios."""

import json
import time
import urllib.error
import urllib.request

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(broker, name, partitions=1, config=None):
    a = admin(broker)  # must outlive the future
    fs = a.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
    fs[name].result(timeout=15)


def messages(n, prefix="m"):
    return [
        (f"k{i}".encode(), f"{prefix}-{i}".encode() * (1 + i % 7), [("idx", str(i).encode()), ("src", b"test")])
        for i in range(n)
    ]


def produce_all(broker, topic, msgs, partition=None, **conf):
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **conf})
    acked = []
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    for key, value, headers in msgs:
        kw = {"partition": partition} if partition is not None else {}
        p.produce(topic, key=key, value=value, headers=headers, on_delivery=report, **kw)
        p.poll(0)
    assert p.flush(30) == 0, "all messages delivered"
    assert errors == [], errors
    return acked


def consume(broker, topic, expected, group=None, timeout=30, **conf):
    c = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": group or f"g-{topic}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **conf,
    })
    c.subscribe([topic])
    got = []
    deadline = time.time() + timeout
    while len(got) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append(m)
    return c, got


def rest(broker, method, path, body=None):
    """Calls the agent's REST API; returns (status, parsed JSON or None)."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{broker.http_port}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
