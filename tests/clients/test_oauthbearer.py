"""SASL/OAUTHBEARER with real clients over SASL_SSL: a JWT signed by a key
of the configured JWKS file authenticates its `sub` as the principal (the
ACLs then apply to it), with confluent-kafka's oauth_cb and kafka-python's
token provider; a token signed by another key, an expired one and one from
another issuer get the authentication error."""

import base64
import json
import os
import tempfile
import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from sasl_helpers import ADMIN, conf, sasl_broker

ISSUER = "https://idp.example"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def int_bytes(n):
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


class Issuer:
    """An identity provider's RS256 key, its JWKS entry, and tokens it signs."""

    def __init__(self, kid):
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pub = self.key.public_key().public_numbers()
        self.jwk = {"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
                    "n": b64(int_bytes(pub.n)), "e": b64(int_bytes(pub.e))}

    def token(self, sub, lifetime=600, iss=ISSUER):
        now = int(time.time())
        head = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": self.kid}).encode())
        body = b64(json.dumps({"sub": sub, "iss": iss, "iat": now, "exp": now + lifetime}).encode())
        sig = self.key.sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{head}.{body}.{b64(sig)}", now + lifetime


@pytest.fixture(scope="module")
def issuer():
    return Issuer("key-1")


@pytest.fixture(scope="module")
def broker(certs, issuer):
    d = tempfile.mkdtemp(prefix="aerostream-jwks-")
    jwks = os.path.join(d, "jwks.json")
    with open(jwks, "w") as f:
        json.dump({"keys": [issuer.jwk]}, f)
    b = sasl_broker(certs, "OAUTHBEARER,SCRAM-SHA-512", "--sasl-oauthbearer-jwks", jwks,
                    "--sasl-oauthbearer-issuer", ISSUER)
    yield b
    assert b.stop() == 0, b.log()


def oauth_conf(broker, certs, token_and_expiry):
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": os.path.join(certs, "ca.pem"),
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: token_and_expiry,
    }


def admin(broker, certs):
    return AdminClient(conf(broker, certs, "SCRAM-SHA-512", *ADMIN))


def produce_error(c, topic):
    """The first error producing to `topic` as `c` (None: acknowledged)."""
    errors = []
    p = Producer({**c, "message.timeout.ms": 10000, "error_cb": errors.append})
    p.produce(topic, value=b"x", on_delivery=lambda err, _m: errors.append(err) if err else None)
    p.flush(15)
    return errors[0] if errors else None


def test_a_token_from_the_issuer_authenticates_its_subject(broker, certs, issuer):
    topic = f"oauth-{uuid.uuid4().hex[:6]}"
    a = admin(broker, certs)
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    conf = oauth_conf(broker, certs, issuer.token("svc-orders"))
    err = produce_error(conf, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, \
        "authenticated, but no ACL names User:svc-orders yet"
    grant = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:svc-orders",
                       "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in a.create_acls([grant]).values():
        f.result(timeout=15)
    assert produce_error(conf, topic) is None


@pytest.mark.parametrize("case", ["another key", "expired", "another issuer"])
def test_a_token_the_issuer_did_not_sign_or_that_expired_is_refused(broker, certs, issuer, case):
    if case == "another key":
        token = Issuer("key-1").token("mallory")
    elif case == "expired":
        # librdkafka itself refuses a token it knows has expired: tell it
        # a later expiry than the one the token carries
        token = (issuer.token("svc-orders", lifetime=-3600)[0], time.time() + 600)
    else:
        token = issuer.token("svc-orders", iss="https://elsewhere")
    errors = []
    p = Producer({**oauth_conf(broker, certs, token), "error_cb": errors.append})
    deadline = time.time() + 15
    while time.time() < deadline and not any(
            e.code() == KafkaError._AUTHENTICATION for e in errors):
        p.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_kafka_python_authenticates_with_a_token_provider(broker, certs, issuer):
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self):
            return issuer.token("svc-kp")[0]

    topic = f"oauth-kp-{uuid.uuid4().hex[:6]}"
    a = admin(broker, certs)
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    grant = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:svc-kp",
                       "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in a.create_acls([grant]).values():
        f.result(timeout=15)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, security_protocol="SASL_SSL",
                      ssl_cafile=os.path.join(certs, "ca.pem"), sasl_mechanism="OAUTHBEARER",
                      sasl_oauth_token_provider=Provider())
    meta = p.send(topic, value=b"from kafka-python").get(timeout=15)
    assert meta.offset == 0
    p.close()
