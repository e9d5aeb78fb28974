"""The schema registry with authentication on: the HTTP listener's logins
(Basic with a SCRAM user) and Kafka's ACLs mapped onto topics, as
docs/schema-registry.md says: a subject `<topic>-value` is the topic
`<topic>`; registering needs WRITE on it, reading DESCRIBE, changing the
global level ALTER_CONFIGS on the cluster; what a user may not describe is
not listed and its schemas are not found."""

import base64
import json
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from sasl_helpers import ADMIN, sasl_broker
from sasl_helpers import conf as sasl_conf

USERS = {"alice": "alice-pw", "bob": "bob-pw"}
SCHEMA = json.dumps({"type": "record", "name": "Acl", "namespace": f"acl.t{uuid.uuid4().hex[:6]}",
                     "fields": [{"name": "x", "type": "int"}]})


@pytest.fixture(scope="module")
def broker(certs):
    b = sasl_broker(certs, "PLAIN,SCRAM-SHA-512")
    admin = AdminClient(sasl_conf(b, certs, "SCRAM-SHA-512", *ADMIN))
    upserts = [UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                            pw.encode()) for u, pw in USERS.items()]
    for f in admin.alter_user_scram_credentials(upserts).values():
        f.result(timeout=15)
    acls = [AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                       op, AclPermissionType.ALLOW)
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for f in admin.create_acls(acls).values():
        f.result(timeout=15)
    yield b
    assert b.stop() == 0, b.log()


def call(broker, path, method="GET", body=None, user=None):
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if user:
        password = ADMIN[1] if user == ADMIN[0] else USERS[user]
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{broker.registry_url}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text.decode(errors="replace")


def test_logins_and_acls_decide_who_registers_and_reads(broker):
    # no login: 401, as on the HTTP listener
    assert call(broker, "/subjects")[0] == 401
    # alice may write orders: Confluent's client registers with her login
    alice = SchemaRegistryClient({"url": broker.registry_url, "basic.auth.user.info": "alice:alice-pw"})
    schema_id = alice.register_schema("orders-value", Schema(SCHEMA, "AVRO"))
    assert alice.get_latest_version("orders-value").schema_id == schema_id
    # bob may not: 403 with the registry's 40301, and he sees nothing of it
    bob = SchemaRegistryClient({"url": broker.registry_url, "basic.auth.user.info": "bob:bob-pw"})
    with pytest.raises(SchemaRegistryError) as refused:
        bob.register_schema("orders-value", Schema(SCHEMA, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    assert "orders-value" not in call(broker, "/subjects", user="bob")[1]
    status, body = call(broker, f"/schemas/ids/{schema_id}", user="bob")
    assert (status, body["error_code"]) == (404, 40403)
    assert call(broker, "/subjects/orders-value/versions", user="bob")[1]["error_code"] == 40301
    assert call(broker, "/subjects", user="alice") == (200, ["orders-value"])
    # a subject of another topic is another topic's business
    status, body = call(broker, "/subjects/payments-value/versions", "POST", {"schema": SCHEMA}, user="alice")
    assert (status, body["error_code"]) == (403, 40301)
    # the global level needs ALTER_CONFIGS on the cluster: the admin has it, alice not
    status, body = call(broker, "/config", "PUT", {"compatibility": "FULL"}, user="alice")
    assert (status, body["error_code"]) == (403, 40301)
    assert call(broker, "/config", "PUT", {"compatibility": "FULL"}, user=ADMIN[0]) == (200, {"compatibility": "FULL"})
    assert call(broker, "/config", user="bob") == (200, {"compatibilityLevel": "FULL"})
    # a wrong password is a 401, not a 403
    bad = SchemaRegistryClient({"url": broker.registry_url, "basic.auth.user.info": "alice:wrong"})
    with pytest.raises(SchemaRegistryError) as refused:
        bad.get_subjects()
    assert refused.value.http_status_code == 401
