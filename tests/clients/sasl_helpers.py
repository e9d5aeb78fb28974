"""What the SASL, ACL and OAUTHBEARER tests share: a broker with TLS and
SASL on the Kafka listener, and the librdkafka settings to reach it."""

import os

from broker import Broker

ADMIN = ("admin", "admin-secret")


def sasl_broker(certs, mechanisms, *extra):
    """A started broker speaking SASL_SSL with `mechanisms`, whose admin
    user is ADMIN (a superuser)."""
    return Broker(extra_args=[
        "--kafka-tls-cert", os.path.join(certs, "server.pem"),
        "--kafka-tls-key", os.path.join(certs, "server.key"),
        "--sasl-mechanisms", mechanisms,
        "--admin-user", f"{ADMIN[0]}:{ADMIN[1]}",
        *extra,
    ]).start()


def conf(broker, certs, mechanism, user, password):
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": os.path.join(certs, "ca.pem"),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
