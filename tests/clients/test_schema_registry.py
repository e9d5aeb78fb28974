"""The built-in schema registry with Confluent's own clients and
serializers (confluent-kafka's SchemaRegistryClient, AvroSerializer and
AvroDeserializer, JSONSerializer and JSONDeserializer, ProtobufSerializer
and ProtobufDeserializer, which register and fetch the base64 of a
FileDescriptorProto rather than .proto text), on three agents:
a schema registered on the first produce through one agent is the same
schema id on the others, a consumer deserializes through another agent's
registry, an incompatible evolution under BACKWARD is refused with 409 and
a compatible one becomes version 2. A topic with broker-side validation
takes serialized records and refuses others with INVALID_RECORD. And the
API's own answers, as Confluent's registry gives them: error codes,
deletes, levels, modes; hostile schemas; the `aerostream schema` command."""

import json
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from cluster import VOTERS, Cluster

USER_V1 = json.dumps({
    "type": "record", "name": "User", "namespace": "com.example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
})
# a new field without a default: BACKWARD refuses it (the new schema
# cannot read version 1's records)
USER_BAD = json.dumps({
    "type": "record", "name": "User", "namespace": "com.example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
               {"name": "email", "type": "string"}],
})
# with a default: compatible
USER_V2 = json.dumps({
    "type": "record", "name": "User", "namespace": "com.example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
               {"name": "email", "type": "string", "default": ""}],
})


@pytest.fixture(scope="module")
def cluster():
    c = Cluster().start_voters()
    yield c
    c.stop_all()


def bootstrap(c):
    return ",".join(c.agent(n).bootstrap for n in VOTERS)


def create_topic(c, name):
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(60)


def consume(c, topic, count, deserialize, timeout=60):
    consumer = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out = []
    try:
        import time
        deadline = time.time() + timeout
        while len(out) < count and time.time() < deadline:
            m = consumer.poll(1)
            if m is None or m.error():
                continue
            out.append(deserialize(m.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return out


def test_avro_serializers_register_evolve_and_read_back_across_agents(cluster):
    topic = f"users-{uuid.uuid4().hex[:8]}"
    subject = f"{topic}-value"
    create_topic(cluster, topic)
    first = SchemaRegistryClient({"url": cluster.agent(1).registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)

    # the serializer registers the schema on its first record
    ser = AvroSerializer(first, USER_V1)
    p = Producer({"bootstrap.servers": bootstrap(cluster)})
    for i in range(20):
        p.produce(topic, value=ser({"name": f"user-{i}", "age": i}, ctx))
    assert p.flush(30) == 0

    # the same id from every agent
    ids = {n: SchemaRegistryClient({"url": cluster.agent(n).registry_url})
           .get_latest_version(subject).schema_id for n in VOTERS}
    assert len(set(ids.values())) == 1, ids
    schema_id = ids[1]

    # a consumer reads them through another agent's registry
    second = SchemaRegistryClient({"url": cluster.agent(2).registry_url})
    values = consume(cluster, topic, 20, AvroDeserializer(second))
    assert values == [{"name": f"user-{i}", "age": i} for i in range(20)]

    # an incompatible evolution is refused under BACKWARD (the default)
    with pytest.raises(SchemaRegistryError) as refused:
        first.register_schema(subject, Schema(USER_BAD, "AVRO"))
    assert refused.value.http_status_code == 409, refused.value
    assert refused.value.error_code == 409
    assert "email" in refused.value.error_message

    # a compatible one is version 2, with a new id, seen from agent 3
    v2_id = first.register_schema(subject, Schema(USER_V2, "AVRO"))
    assert v2_id != schema_id
    third = SchemaRegistryClient({"url": cluster.agent(3).registry_url})
    assert third.get_versions(subject) == [1, 2]
    assert third.get_latest_version(subject).schema_id == v2_id
    assert third.lookup_schema(subject, Schema(USER_V1, "AVRO")).version == 1

    # records of both versions read back, the old ones with the new field's default
    ser2 = AvroSerializer(first, USER_V2, conf={"auto.register.schemas": False, "use.latest.version": True})
    p.produce(topic, value=ser2({"name": "late", "age": 99, "email": "late@example.com"}, ctx))
    assert p.flush(30) == 0
    reader = AvroDeserializer(third, USER_V2)
    values = consume(cluster, topic, 21, reader)
    assert values[0] == {"name": "user-0", "age": 0, "email": ""}
    assert values[-1] == {"name": "late", "age": 99, "email": "late@example.com"}


ORDER_V1 = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id", "item"],
})
# a closed content model that refuses what version 1 allowed
ORDER_BAD = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "string"}, "item": {"type": "string"}},
    "required": ["id", "item"],
})


def test_json_schema_serializers_round_trip_and_a_type_change_is_refused(cluster):
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    subject = f"{topic}-value"
    create_topic(cluster, topic)
    client = SchemaRegistryClient({"url": cluster.agent(2).registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser = JSONSerializer(ORDER_V1, client)
    p = Producer({"bootstrap.servers": bootstrap(cluster)})
    for i in range(10):
        p.produce(topic, value=ser({"id": i, "item": f"item-{i}"}, ctx))
    assert p.flush(30) == 0
    reader = SchemaRegistryClient({"url": cluster.agent(3).registry_url})
    values = consume(cluster, topic, 10, JSONDeserializer(None, schema_registry_client=reader))
    assert values == [{"id": i, "item": f"item-{i}"} for i in range(10)]
    assert reader.get_latest_version(subject).schema.schema_type == "JSON"
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(ORDER_BAD, "JSON"))
    assert refused.value.http_status_code == 409


def call(url, method="GET", body=None):
    """(HTTP status, decoded JSON body) of one registry request."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_the_api_answers_as_confluents_registry_does(cluster):
    base = cluster.agent(1).registry_url
    tag = uuid.uuid4().hex[:8]
    subject = f"api-{tag}-value"
    # schemas of this test alone (the same schema elsewhere would share its id)
    user_v1, user_v2, user_bad = (s.replace('"com.example"', f'"com.example.t{tag}"')
                                  for s in (USER_V1, USER_V2, USER_BAD))
    assert call(f"{base}/schemas/types") == (200, ["AVRO", "JSON", "PROTOBUF"])
    assert call(f"{base}/subjects/{subject}/versions") == (
        404, {"error_code": 40401, "message": f"Subject '{subject}' not found."})
    status, body = call(f"{base}/subjects/{subject}/versions", "POST", {"schema": "{not avro"})
    assert (status, body["error_code"]) == (422, 42201), body
    status, body = call(f"{base}/schemas/ids/999999")
    assert (status, body["error_code"]) == (404, 40403)

    assert call(f"{base}/subjects/{subject}/versions", "POST", {"schema": user_v1})[0] == 200
    status, v1 = call(f"{base}/subjects/{subject}/versions/latest")
    assert status == 200 and v1["version"] == 1 and v1["subject"] == subject
    assert json.loads(v1["schema"]) == json.loads(user_v1)
    # registering the same schema again is the same version
    assert call(f"{base}/subjects/{subject}/versions", "POST", {"schema": user_v1}) == (200, {"id": v1["id"]})
    assert call(f"{base}/schemas/ids/{v1['id']}/versions") == (200, [{"subject": subject, "version": 1}])
    status, listed = call(f"{base}/schemas?subjectPrefix={subject}")
    assert status == 200 and [(r["subject"], r["version"], r["id"]) for r in listed] == [(subject, 1, v1["id"])]
    assert call(f"{base}/contexts") == (200, ["."])

    # compatibility checks, levels per subject
    check = f"{base}/compatibility/subjects/{subject}/versions/latest?verbose=true"
    status, body = call(check, "POST", {"schema": user_bad})
    assert status == 200 and body["is_compatible"] is False and body["messages"], body
    assert call(f"{base}/config/{subject}", "PUT", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert call(f"{base}/config/{subject}") == (200, {"compatibilityLevel": "NONE"})
    assert call(check, "POST", {"schema": user_bad})[1]["is_compatible"] is True
    status, body = call(f"{base}/config/{subject}", "PUT", {"compatibility": "SIDEWAYS"})
    assert (status, body["error_code"]) == (422, 42203)
    assert call(f"{base}/config/{subject}", "DELETE")[0] == 200
    assert call(f"{base}/config/{subject}")[1]["error_code"] == 40408
    assert call(f"{base}/config/{subject}?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})

    # modes: a read-only subject refuses registrations
    assert call(f"{base}/mode/{subject}", "PUT", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = call(f"{base}/subjects/{subject}/versions", "POST", {"schema": user_v2})
    assert (status, body["error_code"]) == (422, 42205), body
    assert call(f"{base}/mode/{subject}", "DELETE")[0] == 200

    # deletes: soft first, then permanent
    status, body = call(f"{base}/subjects/{subject}?permanent=true", "DELETE")
    assert (status, body["error_code"]) == (404, 40405), body
    assert call(f"{base}/subjects/{subject}", "DELETE") == (200, [1])
    assert call(f"{base}/subjects/{subject}/versions")[1]["error_code"] == 40401
    assert call(f"{base}/subjects/{subject}/versions?deleted=true") == (200, [1])
    assert subject not in call(f"{base}/subjects")[1]
    assert subject in call(f"{base}/subjects?deleted=true")[1]
    assert call(f"{base}/subjects/{subject}?permanent=true", "DELETE") == (200, [1])
    assert call(f"{base}/schemas/ids/{v1['id']}")[1]["error_code"] == 40403


def order_type(tag, with_note=False, id_type=None):
    """A Protobuf message class built at run time (no protoc): package
    `test<tag>`, message Order {int64 id = 1; string item = 2; [string note = 3]}."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name=f"order_{tag}.proto", package=f"test{tag}", syntax="proto3")
    m = fdp.message_type.add(name="Order")
    m.field.add(name="id", number=1, type=id_type or F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    m.field.add(name="item", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    if with_note:
        m.field.add(name="note", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"test{tag}.Order"))


def test_protobuf_serializers_register_descriptors_and_read_back(cluster):
    from google.protobuf import descriptor_pb2
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    tag = uuid.uuid4().hex[:8]
    topic = f"pb-{tag}"
    subject = f"{topic}-value"
    create_topic(cluster, topic)
    client = SchemaRegistryClient({"url": cluster.agent(3).registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    Order = order_type(tag)
    # the serializer registers the base64 of the file's descriptor
    ser = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    p = Producer({"bootstrap.servers": bootstrap(cluster)})
    for i in range(10):
        p.produce(topic, value=ser(Order(id=i, item=f"item-{i}"), ctx))
    assert p.flush(30) == 0
    # the deserializer fetches it back (format=serialized) from another agent
    reader = SchemaRegistryClient({"url": cluster.agent(1).registry_url})
    de = ProtobufDeserializer(Order, {"use.deprecated.format": False}, schema_registry_client=reader)
    values = consume(cluster, topic, 10, de)
    assert [(v.id, v.item) for v in values] == [(i, f"item-{i}") for i in range(10)]
    latest = reader.get_latest_version(subject)
    assert latest.schema.schema_type == "PROTOBUF"
    # a new field is compatible; a field's type changed across wire groups is not
    richer = order_type(tag, with_note=True)
    assert client.register_schema(subject, Schema(_serialized(richer), "PROTOBUF")) != latest.schema_id
    assert client.get_versions(subject) == [1, 2]
    F = descriptor_pb2.FieldDescriptorProto
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(_serialized(order_type(tag, id_type=F.TYPE_STRING)), "PROTOBUF"))
    assert refused.value.http_status_code == 409


def _serialized(message_type):
    import base64
    return base64.standard_b64encode(message_type.DESCRIPTOR.file.serialized_pb).decode("ascii")


def test_the_schema_command_lists_gets_registers_and_checks(cluster, tmp_path):
    import subprocess
    from broker import binary
    registry = cluster.agent(2).registry_url
    tag = uuid.uuid4().hex[:8]
    subject = f"cli-{tag}-value"
    v1, v2, bad = (tmp_path / "v1.avsc", tmp_path / "v2.avsc", tmp_path / "bad.avsc")
    for path, text in ((v1, USER_V1), (v2, USER_V2), (bad, USER_BAD)):
        path.write_text(text.replace('"com.example"', f'"com.example.c{tag}"'))

    def schema(*args):
        return subprocess.run([binary(), "schema", "--registry", registry, *args],
                              capture_output=True, text=True, timeout=60)

    out = schema("register", subject, "--file", str(v1), "--output", "json")
    assert out.returncode == 0, out.stderr
    registered = json.loads(out.stdout)
    assert registered["version"] == 1 and registered["subject"] == subject
    ok = schema("check", subject, "--file", str(v2))
    assert ok.returncode == 0 and "compatible" in ok.stdout, ok.stdout + ok.stderr
    refused = schema("check", subject, "--file", str(bad))
    assert refused.returncode == 1 and "NOT compatible" in refused.stdout and "email" in refused.stdout
    assert schema("register", subject, "--file", str(bad)).returncode == 1
    assert schema("register", subject, "--file", str(v2)).returncode == 0
    listed = json.loads(schema("list", "--prefix", subject, "--output", "json").stdout)
    assert listed == [{"subject": subject, "version": 2, "id": listed[0]["id"], "schema_type": "AVRO"}]
    got = schema("get", subject, "--version", "1")
    assert got.returncode == 0 and f"id: {registered['id']}" in got.stdout and '"name": "age"' in got.stdout
    missing = schema("get", f"no-such-{tag}")
    assert missing.returncode == 1 and "40401" in missing.stderr


def test_hostile_schemas_are_refused_and_the_agent_stays_up(cluster):
    base = cluster.agent(3).registry_url
    subject = f"hostile-{uuid.uuid4().hex[:8]}-value"
    deep_proto = 'syntax = "proto3";\n' + "message M {\n" * 5000 + "}\n" * 5000
    deep_json = '{"type":"object","properties":{"a":' * 3000 + "{}" + "}}" * 3000
    for schema, schema_type in ((deep_proto, "PROTOBUF"), (deep_json, "JSON"), ("x" * (600 << 10), "AVRO"),
                                ('{"type": "record", "name": "R", "fields": [{"name": "f", "type": "Nope"}]}', "AVRO")):
        status, body = call(f"{base}/subjects/{subject}/versions", "POST",
                            {"schema": schema, "schemaType": schema_type})
        assert (status, body["error_code"]) == (422, 42201), (schema_type, status, body)
    status, body = call(f"{base}/subjects/{subject}/versions", "POST", {"schema": "{}", "schemaType": "XML"})
    assert (status, body["error_code"]) == (422, 42201), body
    assert all(cluster.agent(n).proc.poll() is None for n in VOTERS)
    assert call(f"{base}/schemas/types")[0] == 200


def test_a_validated_topic_takes_serialized_records_and_refuses_others(cluster):
    from confluent_kafka import KafkaError
    tag = uuid.uuid4().hex[:8]
    topic = f"checked-{tag}"
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, 1, 3, config={"confluent.value.schema.validation": "true"})])[topic].result(60)
    client = SchemaRegistryClient({"url": cluster.agent(1).registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser = AvroSerializer(client, USER_V1.replace('"com.example"', f'"com.example.v{tag}"'))
    results = []
    p = Producer({"bootstrap.servers": bootstrap(cluster), "retries": 0})

    def report(err, msg):
        results.append(err)
    p.produce(topic, value=ser({"name": "ok", "age": 1}, ctx), on_delivery=report)
    assert p.flush(30) == 0 and results == [None], results
    # raw bytes, and a frame naming an id that is not a version of the subject
    for value in (b"plain text", b"\x00\x00\x01\x00\x00rest"):
        results.clear()
        p.produce(topic, value=value, on_delivery=report)
        assert p.flush(30) == 0
        assert results[0] is not None and results[0].code() == KafkaError.INVALID_RECORD, results
    # only the serialized record is in the topic
    values = consume(cluster, topic, 1, AvroDeserializer(client))
    assert values == [{"name": "ok", "age": 1}]
    described = admin.describe_configs([ConfigResource("topic", topic)])
    configs = list(described.values())[0].result(30)
    assert configs["confluent.value.schema.validation"].value == "true"
