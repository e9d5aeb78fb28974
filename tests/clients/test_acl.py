"""ACLs with real clients over SASL_SSL and mutual TLS: with authentication
on, a user no ACL names is refused with the error a Kafka broker gives
(TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED) and does not see the topic in
Metadata; ACLs made, read and removed through Kafka's CreateAcls,
DescribeAcls and DeleteAcls (confluent-kafka's admin client) grant exactly
what they name, a DENY wins over an ALLOW, and only a principal with ALTER
on the cluster may change them. kafka-python sees the same refusal."""

import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType,
                                   ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from broker import Broker
from sasl_helpers import ADMIN, sasl_broker
from sasl_helpers import conf as sasl_conf

USERS = {"alice": "alice-pw", "bob": "bob-pw"}


@pytest.fixture(scope="module")
def broker(certs):
    b = sasl_broker(certs, "PLAIN,SCRAM-SHA-512")
    admin = AdminClient(conf(b, certs, *ADMIN))
    upserts = [UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                            pw.encode()) for u, pw in USERS.items()]
    for f in admin.alter_user_scram_credentials(upserts).values():
        f.result(timeout=15)
    yield b
    assert b.stop() == 0, b.log()


def conf(broker, certs, user, password, mechanism="SCRAM-SHA-512"):
    return sasl_conf(broker, certs, mechanism, user, password)


def as_user(broker, certs, user):
    return conf(broker, certs, user, USERS[user])


def new_topic(broker, certs, prefix):
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf(broker, certs, *ADMIN))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    return topic


def produce_error(c, topic, n=5):
    """The delivery error of producing `n` records as `c` (None: all acked)."""
    errors = []
    p = Producer({**c, "message.timeout.ms": 10000,
                  "retries": 0})
    for i in range(n):
        p.produce(topic, value=f"r{i}".encode(),
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
    p.flush(20)
    return errors[0] if errors else None


def consume(c, topic, group, want):
    """Values read as `c` in `group`, and the first error the consumer saw."""
    cons = Consumer({**c, "group.id": group, "auto.offset.reset": "earliest"})
    cons.subscribe([topic])
    got, error = [], None
    deadline = time.time() + 30
    while len(got) < want and time.time() < deadline:
        m = cons.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            error = error or m.error()
            if error.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                KafkaError.GROUP_AUTHORIZATION_FAILED):
                break
            continue
        got.append(m.value())
    cons.close()
    return got, error


def acl(principal, rtype, name, op, permission=AclPermissionType.ALLOW,
        pattern=ResourcePatternType.LITERAL, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def create(broker, certs, *bindings):
    admin = AdminClient(conf(broker, certs, *ADMIN))
    for f in admin.create_acls(list(bindings)).values():
        f.result(timeout=15)


def test_a_user_no_acl_names_is_refused_with_kafkas_errors(broker, certs):
    topic = new_topic(broker, certs, "acl-none")
    bob = as_user(broker, certs, "bob")
    err = produce_error(bob, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    md = AdminClient(bob).list_topics(timeout=10)
    assert topic not in md.topics, "Metadata of every topic hides what bob may not describe"
    md = AdminClient(bob).list_topics(topic=topic, timeout=10)
    assert md.topics[topic].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    got, error = consume(bob, topic, f"g-{topic}", 1)
    assert got == [] and error is not None
    assert error.code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                            KafkaError.TOPIC_AUTHORIZATION_FAILED), error


def test_acls_grant_what_they_name_and_a_deny_wins(broker, certs):
    topic = new_topic(broker, certs, "orders")
    alice = as_user(broker, certs, "alice")
    create(broker, certs,
           acl("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE),
           acl("User:alice", ResourceType.TOPIC, "orders-", AclOperation.READ,
               pattern=ResourcePatternType.PREFIXED),
           acl("User:alice", ResourceType.GROUP, "alice-", AclOperation.READ,
               pattern=ResourcePatternType.PREFIXED))
    assert produce_error(alice, topic, n=20) is None
    got, error = consume(alice, topic, f"alice-{topic}", 20)
    assert len(got) == 20, error
    # the group ACL names alice's groups only
    got, error = consume(alice, topic, f"other-{topic}", 1)
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    # bob gets nothing of alice's
    assert produce_error(as_user(broker, certs, "bob"), topic).code() == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    # PLAIN authenticates the same principal
    assert produce_error(conf(broker, certs, "alice", USERS["alice"], "PLAIN"), topic) is None

    # a DENY for alice's host wins over her ALLOW
    create(broker, certs, acl("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE,
                              permission=AclPermissionType.DENY, host="127.0.0.1"))
    err = produce_error(alice, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err

    # read back and removed through DescribeAcls and DeleteAcls
    admin = AdminClient(conf(broker, certs, *ADMIN))
    mine = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                            "User:alice", None, AclOperation.ANY, AclPermissionType.ANY)
    found = admin.describe_acls(mine).result(timeout=15)
    assert sorted((b.operation, b.permission_type) for b in found) == sorted([
        (AclOperation.WRITE, AclPermissionType.ALLOW), (AclOperation.WRITE, AclPermissionType.DENY)])
    deny = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                            "User:alice", None, AclOperation.ANY, AclPermissionType.DENY)
    gone = admin.delete_acls([deny])[deny].result(timeout=15)
    assert [b.host for b in gone] == ["127.0.0.1"]
    assert produce_error(alice, topic) is None, "the DENY is gone: alice writes again"


def test_only_alter_on_the_cluster_changes_acls(broker, certs):
    alice = AdminClient(as_user(broker, certs, "alice"))
    grab = acl("User:alice", ResourceType.TOPIC, "*", AclOperation.ALL)
    with pytest.raises(KafkaException) as e:
        for f in alice.create_acls([grab]).values():
            f.result(timeout=15)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, e.value
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    # librdkafka drops DescribeAcls' error code and shows an empty list;
    # kafka-python raises it: either way no binding is shown
    assert AdminClient(conf(broker, certs, *ADMIN)).describe_acls(every).result(timeout=15)
    assert alice.describe_acls(every).result(timeout=15) == []
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             KafkaAdminClient, ResourcePatternFilter)
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import ClusterAuthorizationFailedError
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, security_protocol="SASL_SSL",
                          ssl_cafile=os.path.join(certs, "ca.pem"), sasl_mechanism="SCRAM-SHA-512",
                          sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
    with pytest.raises(ClusterAuthorizationFailedError):
        kp.describe_acls(ACLFilter(
            principal=None, host="*", operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                   ACLResourcePatternType.ANY)))
    kp.close()
    # once granted ALTER on the cluster, she may
    create(broker, certs, acl("User:alice", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER))
    topic = new_topic(broker, certs, "granted")
    mine = acl("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE)
    for f in alice.create_acls([mine]).values():
        f.result(timeout=15)
    assert produce_error(as_user(broker, certs, "alice"), topic) is None


def test_topics_need_create_and_deletes_need_delete(broker, certs):
    bob = AdminClient(as_user(broker, certs, "bob"))
    name = f"bobs-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException) as e:
        bob.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e.value
    create(broker, certs, acl("User:bob", ResourceType.TOPIC, "bobs-", AclOperation.CREATE,
                              pattern=ResourcePatternType.PREFIXED))
    bob.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=15)
    with pytest.raises(KafkaException) as e:
        bob.delete_topics([name])[name].result(timeout=15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e.value


def test_kafka_python_sees_the_refusal(broker, certs):
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    topic = new_topic(broker, certs, "acl-kp")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, security_protocol="SASL_SSL",
                      ssl_cafile=os.path.join(certs, "ca.pem"), sasl_mechanism="SCRAM-SHA-512",
                      sasl_plain_username="bob", sasl_plain_password=USERS["bob"],
                      max_block_ms=10000)
    with pytest.raises(TopicAuthorizationFailedError):
        p.send(topic, value=b"x").get(timeout=15)
    p.close()


def test_a_client_certificates_name_is_its_principal(certs):
    b = Broker(extra_args=[
        "--kafka-tls-cert", os.path.join(certs, "server.pem"),
        "--kafka-tls-key", os.path.join(certs, "server.key"),
        "--kafka-tls-client-ca", os.path.join(certs, "ca.pem"),
        "--superusers", "User:CN=ops",
    ]).start()
    try:
        def mtls(name):
            return {"bootstrap.servers": b.bootstrap, "security.protocol": "SSL",
                    "ssl.ca.location": os.path.join(certs, "ca.pem"),
                    "ssl.certificate.location": os.path.join(certs, f"{name}.pem"),
                    "ssl.key.location": os.path.join(certs, f"{name}.key")}
        ops = AdminClient(mtls("ops"))
        topic = f"mtls-acl-{uuid.uuid4().hex[:6]}"
        ops.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
        err = produce_error(mtls("client"), topic)
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
        grant = acl("User:CN=client", ResourceType.TOPIC, topic, AclOperation.WRITE)
        for f in ops.create_acls([grant]).values():
            f.result(timeout=15)
        assert produce_error(mtls("client"), topic) is None
    finally:
        assert b.stop() == 0, b.log()
