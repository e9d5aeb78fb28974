"""The Connect engine's converters through the built-in schema registry,
on one agent against a real S3 server (moto): records produced with
Confluent's AvroSerializer and JSONSerializer reach the bucket decoded (JSON
lines and Parquet) with `value.converter` AvroConverter and
JsonSchemaConverter, a record not in the wire format goes to the
dead-letter topic; a Datagen source with AvroConverter registers its
inferred schema under `<topic>-value` and writes records Confluent's
AvroDeserializer reads back; validation names a bad registry URL."""

import io
import json
import time
import uuid

import pyarrow.parquet as pq
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import servers
from broker import Broker
from connect_rest import all_running, call, eventually

N = 50

ORDER = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"},
            {"name": "email", "type": ["null", "string"], "default": None}]}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    ],
})

READING = json.dumps({
    "type": "object",
    "properties": {"sensor": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["sensor", "celsius"],
})


def order(i):
    return {"id": i, "customer": {"name": f"user{i}", "email": None if i % 2 else f"u{i}@example.com"},
            "status": "PAID" if i % 3 == 0 else "NEW"}


def produce(b, topic, values):
    p = Producer({"bootstrap.servers": b.bootstrap})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0


def objects(s3, prefix):
    client = servers.s3_client(s3)
    return {k: client.get_object(Bucket="sink", Key=k)["Body"].read()
            for k in servers.s3_keys(s3, "sink", prefix)}


def consume(b, topic, count, timeout=30):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "read-" + uuid.uuid4().hex[:6],
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out, deadline = [], time.time() + timeout
    try:
        while len(out) < count and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m)
    finally:
        c.close()
    return out


def test_registry_converters_decode_to_the_bucket_encode_from_datagen_and_refuse_foreign_bytes(s3):
    b = Broker().start().wait_ready()
    try:
        base = b.connect_url
        sr = SchemaRegistryClient({"url": b.registry_url})
        run = uuid.uuid4().hex[:6]
        orders, readings, clicks = f"orders-{run}", f"readings-{run}", f"clicks-{run}"
        dlq = f"orders-dlq-{run}"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in (orders, readings, clicks, dlq)]).values():
            f.result(30)

        code, body = call(base, "GET", "/connector-plugins?connectorsOnly=false")
        assert code == 200, body
        assert {"io.confluent.connect.avro.AvroConverter", "io.confluent.connect.protobuf.ProtobufConverter",
                "io.confluent.connect.json.JsonSchemaConverter"} <= {p["class"] for p in body}, body
        code, body = call(base, "PUT", "/connector-plugins/ObjectStoreSink/config/validate", {
            "connector.class": "ObjectStoreSink", "name": "x", "topics": orders, "store.url": "s3://sink/x",
            "value.converter": "avro", "value.converter.schema.registry.url": "not a url"})
        assert code == 200 and body["error_count"] == 1, body
        errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}
        assert list(errors) == ["value.converter.schema.registry.url"], errors

        # (a) Avro values, with one record that is not in the wire format
        avro = AvroSerializer(sr, ORDER)
        ctx = SerializationContext(orders, MessageField.VALUE)
        produce(b, orders, [avro(order(i), ctx) for i in range(N)] + [b'{"id": "plain json"}'])
        code, body = call(base, "POST", "/connectors", {"name": "orders-s3", "config": {
            "connector.class": "ObjectStoreSink", "topics": orders, "store.url": "s3://sink/avro",
            "format": "json", "flush.size": str(N),
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}})
        assert code == 201, body

        # JSON Schema values to Parquet
        js = JSONSerializer(READING, sr)
        rctx = SerializationContext(readings, MessageField.VALUE)
        produce(b, readings, [js({"sensor": f"s{i}", "celsius": i + 0.5}, rctx) for i in range(10)])
        code, body = call(base, "POST", "/connectors", {"name": "readings-s3", "config": {
            "connector.class": "ObjectStoreSink", "topics": readings, "store.url": "s3://sink/jsonschema",
            "format": "parquet", "flush.size": "10",
            "value.converter": "io.confluent.connect.json.JsonSchemaConverter"}})
        assert code == 201, body

        # (b) Datagen writing Avro through the agent's own registry
        code, body = call(base, "POST", "/connectors", {"name": "clicks-gen", "config": {
            "connector.class": "DatagenSource", "kafka.topic": clicks, "max.records": str(N),
            "max.interval": "0", "value.converter": "avro"}})
        assert code == 201, body

        files = eventually("the Avro records in the bucket", lambda: objects(s3, "avro/") or None)
        lines = [json.loads(line) for data in files.values() for line in data.decode().splitlines()]
        assert len(files) == 1 and len(lines) == N, (list(files), len(lines))
        assert [line["offset"] for line in lines] == list(range(N))
        assert [line["value"] for line in lines] == [order(i) for i in range(N)]

        dead = consume(b, dlq, 1)
        assert [m.value() for m in dead] == [b'{"id": "plain json"}'], dead
        reason = dict(dead[0].headers())["__connect.errors.exception.message"].decode()
        assert "not in the schema registry's wire format" in reason, reason
        assert all_running(base, "orders-s3", 1)

        files = eventually("the JSON Schema records in the bucket", lambda: objects(s3, "jsonschema/") or None)
        rows = [r for data in files.values() for r in pq.read_table(io.BytesIO(data)).to_pylist()]
        assert [json.loads(r["value"]) for r in rows] == [
            {"sensor": f"s{i}", "celsius": i + 0.5} for i in range(10)]

        messages = consume(b, clicks, N)
        deserialize = AvroDeserializer(sr)
        cctx = SerializationContext(clicks, MessageField.VALUE)
        values = [deserialize(m.value(), cctx) for m in messages]
        assert sorted(v["seq"] for v in values) == list(range(N))
        assert {v["user"] for v in values} <= {"ada", "grace", "edsger", "barbara", "ken", "radia"}
        latest = sr.get_latest_version(f"{clicks}-value")
        assert latest.schema.schema_type == "AVRO" and latest.version == 1, latest
        assert {f["name"] for f in json.loads(latest.schema.schema_str)["fields"]} == {
            "seq", "user", "amount", "ts"}
    finally:
        b.stop()
