"""SASL on the Kafka listener with real clients, over TLS (SASL_SSL) as a
deployment runs it: SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN with the user
--admin-user creates; a wrong password gets Kafka's authentication error;
users made and removed with Kafka's AlterUserScramCredentials (through
confluent-kafka's admin client and `aerostream user`) can, then cannot,
authenticate; the CLI logs in with SCRAM and PLAIN."""

import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from sasl_helpers import ADMIN, conf, sasl_broker


@pytest.fixture(scope="module")
def broker(certs):
    b = sasl_broker(certs, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    yield b
    assert b.stop() == 0, b.log()


def auth_error(c):
    """The error librdkafka reports when it cannot authenticate with `c`
    (None when it can)."""
    errors = []
    p = Producer({**c, "error_cb": errors.append})
    deadline = time.time() + 15
    while time.time() < deadline:
        try:
            p.list_topics(timeout=1)
            return None
        except KafkaException:
            pass
        p.poll(0.1)  # serves error_cb
        failed = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if failed:
            return failed[0]
    return errors[0] if errors else "no error"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_the_admin_user_produces_and_consumes_with_each_mechanism(broker, certs, mechanism):
    c = conf(broker, certs, mechanism, *ADMIN)
    topic = f"sasl-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(c)  # must outlive the future
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
    p = Producer(c)
    for i in range(30):
        p.produce(topic, value=f"s{i}".encode())
    assert p.flush(30) == 0
    cons = Consumer({**c, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    cons.subscribe([topic])
    got = []
    deadline = time.time() + 30
    while len(got) < 30 and time.time() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    cons.close()
    assert got == [f"s{i}".encode() for i in range(30)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_or_unknown_user_gets_the_authentication_error(broker, certs, mechanism):
    for user, password in [(ADMIN[0], "wrong"), ("nobody", ADMIN[1])]:
        err = auth_error(conf(broker, certs, mechanism, user, password))
        assert isinstance(err, KafkaError) and err.code() == KafkaError._AUTHENTICATION, err
        assert "Authentication failed" in err.str(), err.str()


def test_a_client_without_sasl_is_refused(broker, certs):
    c = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL",
         "ssl.ca.location": os.path.join(certs, "ca.pem")}
    with pytest.raises(Exception):
        AdminClient(c).list_topics(timeout=4)


def test_users_made_and_removed_with_kafkas_admin_api(broker, certs):
    admin = AdminClient(conf(broker, certs, "SCRAM-SHA-512", *ADMIN))
    upsert = UserScramCredentialUpsertion(
        "reader", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"reader-pw")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=60)
    desc = admin.describe_user_scram_credentials(["reader"])["reader"].result(timeout=60)
    infos = [(i.mechanism, i.iterations) for i in desc.scram_credential_infos]
    assert infos == [(ScramMechanism.SCRAM_SHA_256, 4096)], infos

    assert auth_error(conf(broker, certs, "SCRAM-SHA-256", "reader", "reader-pw")) is None
    assert auth_error(conf(broker, certs, "PLAIN", "reader", "reader-pw")) is None
    err = auth_error(conf(broker, certs, "SCRAM-SHA-512", "reader", "reader-pw"))
    assert isinstance(err, KafkaError), "no SHA-512 credential was made for reader"

    deletion = UserScramCredentialDeletion("reader", ScramMechanism.SCRAM_SHA_256)
    for f in admin.alter_user_scram_credentials([deletion]).values():
        f.result(timeout=60)
    err = auth_error(conf(broker, certs, "SCRAM-SHA-256", "reader", "reader-pw"))
    assert isinstance(err, KafkaError) and err.code() == KafkaError._AUTHENTICATION, err


def test_kafka_python_authenticates_with_scram_over_tls(broker, certs):
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"sasl-kp-{uuid.uuid4().hex[:6]}"
    kw = dict(bootstrap_servers=broker.bootstrap, security_protocol="SASL_SSL",
              ssl_cafile=os.path.join(certs, "ca.pem"), sasl_mechanism="SCRAM-SHA-512",
              sasl_plain_username=ADMIN[0], sasl_plain_password=ADMIN[1])
    p = KafkaProducer(**kw)
    for i in range(10):
        p.send(topic, value=f"kp{i}".encode())
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **kw)
    assert sorted(m.value for m in c) == sorted(f"kp{i}".encode() for i in range(10))
    c.close()


def test_clients_re_authenticate_before_their_session_ends(certs):
    """KIP-368: with an 8 s session lifetime librdkafka authenticates again on
    its open connection (at 90% of it), again and again, and a producer
    sending meanwhile loses nothing. (A shorter lifetime leaves the client
    only a few hundred milliseconds to re-authenticate, which a loaded
    machine can miss: 4 s did once, and 6 s did once while the session's
    clock still started before its answer was written.)"""
    b = sasl_broker(certs, "SCRAM-SHA-512", "--connections-max-reauth-ms", "8000")
    try:
        c = conf(b, certs, "SCRAM-SHA-512", *ADMIN)
        topic = f"reauth-{uuid.uuid4().hex[:6]}"
        admin = AdminClient(c)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
        # only the producer's connections are watched: the admin client's
        # idle one is closed
        del admin
        acked, failed = [], []
        p = Producer(c)
        start = time.time()
        i = 0
        last_check = start
        # until two re-authentications happened (about 15 s on a quiet
        # machine), for at most 40 s
        while time.time() - start < 40:
            if time.time() - last_check >= 1:
                last_check = time.time()
                if time.time() - start >= 15 and b.metric("aerostream_kafka_sasl_reauthentications_total") >= 2:
                    break
            p.produce(topic, value=f"r{i}".encode(),
                      on_delivery=lambda err, m: (failed if err else acked).append(err or m.value()))
            i += 1
            p.poll(0.1)
        assert p.flush(30) == 0
        assert failed == [] and len(acked) == i, failed[:3]
        assert b.metric("aerostream_kafka_sasl_reauthentications_total") >= 2
        assert b.metric("aerostream_kafka_sasl_sessions_expired_total") == 0
    finally:
        assert b.stop() == 0, b.log()


def cli(broker, certs, *args, login=ADMIN, mechanism="SCRAM-SHA-512"):
    """`aerostream ARGS` against the SASL_SSL listener, logged in as `login`
    (its password through the environment, as the docs advise)."""
    import subprocess
    from broker import binary
    env = {**os.environ, "AEROSTREAM_SASL_PASSWORD": login[1]}
    return subprocess.run(
        [binary(), *args, "--bootstrap", broker.bootstrap,
         "--tls-ca", os.path.join(certs, "ca.pem"),
         "--sasl-mechanism", mechanism, "--sasl-username", login[0]],
        capture_output=True, text=True, timeout=60, env=env)


def test_the_cli_logs_in_and_manages_scram_users(broker, certs):
    """`aerostream user` makes a user that librdkafka then logs in as, lists
    it and deletes it; the CLI itself logs in with SCRAM or PLAIN, and a
    wrong password is refused with a clear message."""
    import json
    made = cli(broker, certs, "user", "set", "carol", "--password", "carol-pw")
    assert made.returncode == 0, made.stderr
    assert auth_error(conf(broker, certs, "SCRAM-SHA-512", "carol", "carol-pw")) is None
    assert auth_error(conf(broker, certs, "PLAIN", "carol", "carol-pw")) is None
    listed = cli(broker, certs, "user", "list", "--output", "json", mechanism="PLAIN")
    assert listed.returncode == 0, listed.stderr
    assert {"name": "carol", "mechanism": "SCRAM-SHA-512", "iterations": 8192} in json.loads(listed.stdout)

    # carol is no superuser and has no ACL: she logs in, but may not alter users
    refused = cli(broker, certs, "user", "set", "dave", "--password", "x", login=("carol", "carol-pw"))
    assert refused.returncode != 0
    assert "authoriz" in refused.stderr.lower(), refused.stderr
    wrong = cli(broker, certs, "cluster", "info", login=("carol", "wrong"))
    assert wrong.returncode != 0
    assert "cannot log in" in wrong.stderr and "authenticat" in wrong.stderr.lower(), wrong.stderr

    gone = cli(broker, certs, "user", "delete", "carol")
    assert gone.returncode == 0, gone.stderr
    err = auth_error(conf(broker, certs, "SCRAM-SHA-512", "carol", "carol-pw"))
    assert isinstance(err, KafkaError) and err.code() == KafkaError._AUTHENTICATION, err
