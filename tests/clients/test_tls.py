"""TLS on the Kafka listener (Kafka's SSL security protocol) with real
clients: confluent-kafka (librdkafka), kafka-python, aiokafka and kcat
produce and consume over TLS; a plaintext client is refused; with a client
CA only clients presenting a certificate it issued get in; and a
certificate replaced on disk is used for new connections without a
restart."""

import asyncio
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker import Broker, binary


def tls_broker(certs, *extra):
    return Broker(extra_args=[
        "--kafka-tls-cert", os.path.join(certs, "server.pem"),
        "--kafka-tls-key", os.path.join(certs, "server.key"),
        *extra,
    ]).start()


def ssl_conf(certs, client=None, ca="ca"):
    conf = {"security.protocol": "SSL", "ssl.ca.location": os.path.join(certs, f"{ca}.pem")}
    if client:
        conf["ssl.certificate.location"] = os.path.join(certs, f"{client}.pem")
        conf["ssl.key.location"] = os.path.join(certs, f"{client}.key")
    return conf


def roundtrip_confluent(broker, conf, topic, n=200):
    a = AdminClient({"bootstrap.servers": broker.bootstrap, **conf})
    a.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=15)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **conf})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode() * 50)
    assert p.flush(30) == 0, "every record acknowledged over TLS"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", **conf})
    c.subscribe([topic])
    got = []
    deadline = time.time() + 60
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert sorted(got) == sorted(f"v{i}".encode() * 50 for i in range(n))


def refused(broker, conf):
    """Whether a client with `conf` cannot even read metadata."""
    a = AdminClient({"bootstrap.servers": broker.bootstrap, **conf})
    try:
        a.list_topics(timeout=4)
    except KafkaException:
        return True
    return False


def handshake_failures(broker):
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("aerostream_kafka_tls_handshake_failures_total "):
                return int(line.split()[1])
    return 0


def test_kafka_clients_produce_and_consume_over_tls_and_plaintext_is_refused(certs):
    b = tls_broker(certs)
    try:
        roundtrip_confluent(b, ssl_conf(certs), f"tls-{uuid.uuid4().hex[:6]}")

        # kafka-python
        from kafka import KafkaConsumer, KafkaProducer
        topic = f"tls-kp-{uuid.uuid4().hex[:6]}"
        kp = dict(bootstrap_servers=b.bootstrap, security_protocol="SSL",
                  ssl_cafile=os.path.join(certs, "ca.pem"))
        prod = KafkaProducer(**kp)
        for i in range(20):
            prod.send(topic, value=f"kp{i}".encode())
        prod.flush(30)
        prod.close()
        cons = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **kp)
        assert sorted(m.value for m in cons) == sorted(f"kp{i}".encode() for i in range(20))
        cons.close()

        # aiokafka
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        topic = f"tls-aio-{uuid.uuid4().hex[:6]}"

        async def aio():
            ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
            p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, security_protocol="SSL", ssl_context=ctx)
            await p.start()
            try:
                for i in range(10):
                    await p.send_and_wait(topic, f"aio{i}".encode())
            finally:
                await p.stop()
            c = AIOKafkaConsumer(topic, bootstrap_servers=b.bootstrap, security_protocol="SSL",
                                 ssl_context=ctx, auto_offset_reset="earliest")
            await c.start()
            try:
                got = []
                while len(got) < 10:
                    m = await asyncio.wait_for(c.getone(), 15)
                    got.append(m.value)
                return got
            finally:
                await c.stop()

        assert sorted(asyncio.run(aio())) == sorted(f"aio{i}".encode() for i in range(10))

        # kcat, where installed
        if shutil.which("kcat"):
            topic = f"tls-kcat-{uuid.uuid4().hex[:6]}"
            opts = ["-b", b.bootstrap, "-X", "security.protocol=SSL",
                    "-X", f"ssl.ca.location={os.path.join(certs, 'ca.pem')}"]
            subprocess.run(["kcat", *opts, "-P", "-t", topic], input=b"a\nb\nc\n", check=True, timeout=30)
            out = subprocess.run(["kcat", *opts, "-C", "-t", topic, "-o", "beginning", "-c", "3", "-e"],
                                 capture_output=True, check=True, timeout=30)
            assert out.stdout.split() == [b"a", b"b", b"c"]

        # the admin command line
        cli = [binary(), "topic", "list", "--bootstrap", b.bootstrap, "--output", "json"]
        out = subprocess.run([*cli, "--tls-ca", os.path.join(certs, "ca.pem")],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert topic in out.stdout
        out = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and out.stderr.strip(), "plaintext to a TLS listener fails with a message"

        before = handshake_failures(b)
        assert refused(b, {}), "a plaintext client gets nothing from a TLS listener"
        assert refused(b, ssl_conf(certs, ca="other-ca")), "nor does one that does not trust the certificate"
        assert handshake_failures(b) > before
    finally:
        assert b.stop() == 0, b.log()


def test_with_a_client_ca_only_clients_with_its_certificates_get_in(certs):
    # mutual TLS authenticates clients, so ACLs apply: this one may do anything
    b = tls_broker(certs, "--kafka-tls-client-ca", os.path.join(certs, "ca.pem"),
                   "--superusers", "User:CN=client")
    try:
        topic = f"mtls-{uuid.uuid4().hex[:6]}"
        roundtrip_confluent(b, ssl_conf(certs, client="client"), topic, n=50)
        cli = [binary(), "topic", "describe", topic, "--bootstrap", b.bootstrap,
               "--tls-ca", os.path.join(certs, "ca.pem")]
        out = subprocess.run([*cli, "--tls-cert", os.path.join(certs, "client.pem"),
                              "--tls-key", os.path.join(certs, "client.key")],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        out = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert out.returncode != 0, "the command line without a client certificate is refused"
        assert refused(b, ssl_conf(certs)), "no client certificate"
        assert refused(b, ssl_conf(certs, client="stranger")), "a certificate from another CA"
    finally:
        assert b.stop() == 0, b.log()


def test_a_certificate_replaced_on_disk_serves_new_connections_without_a_restart(certs):
    live = tempfile.mkdtemp(prefix="aerostream-tls-live-")
    try:
        for ext in ("pem", "key"):
            shutil.copy(os.path.join(certs, f"server.{ext}"), os.path.join(live, f"server.{ext}"))
        b = tls_broker(live)
        try:
            assert not refused(b, ssl_conf(certs))
            # the new pair is written next to the old and renamed over it,
            # as certificate tools do
            for ext in ("key", "pem"):
                tmp = os.path.join(live, f"next.{ext}")
                shutil.copy(os.path.join(certs, f"server-next.{ext}"), tmp)
                os.replace(tmp, os.path.join(live, f"server.{ext}"))
            deadline = time.time() + 45
            while refused(b, ssl_conf(certs, ca="other-ca")):
                assert time.time() < deadline, f"the new certificate was never served:\n{b.log()}"
                time.sleep(1)
            assert refused(b, ssl_conf(certs)), "the old certificate is gone"
            assert "certificate reloaded" in b.run_log()
        finally:
            assert b.stop() == 0, b.log()
    finally:
        shutil.rmtree(live, ignore_errors=True)
