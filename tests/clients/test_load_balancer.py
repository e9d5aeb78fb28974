"""Three real agents behind haproxy in TCP mode, as a platform team deploys
AeroStream behind a network load balancer: every agent advertises the
balancer's address, so clients see one broker and each connection lands on
an arbitrary agent, which forwards what it does not own to the agent that
does. confluent-kafka, kafka-python and kafkajs produce and consume in
groups through the balancer, and keep doing so when an agent behind it is
killed with SIGKILL; every acknowledged record is read back. A rolling
restart with SIGTERM under acks=all load hands every leadership over
before each agent closes: nothing acknowledged is lost and no write fails.
"""

import json
import os
import re
import subprocess
import threading
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from cluster import (VOTERS, Production, assert_nothing_lost, assert_one_record_per_offset,
                     balanced_cluster, eventually, longest_pause, metadata, read_back)

JS_DIR = os.path.join(os.path.dirname(__file__), "..", "js")
PARTITIONS = 6


@pytest.fixture(scope="module")
def deployment():
    yield from balanced_cluster(["--replica-lag-time-max-ms", "2000"])


def forwarded_served(agent):
    """How many requests other agents forwarded to `agent`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{agent.http_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^aerostream_forwarded_requests_served_total (\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def create_topic(balancer, topic):
    admin = AdminClient({"bootstrap.servers": balancer.bootstrap})
    fs = admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                             operation_timeout=10)
    fs[topic].result(timeout=20)
    # each check may reach another agent: all of them must know the topic
    for _ in VOTERS:
        eventually("every partition has a leader",
                   lambda: all(err == 0 and leader == 0
                               for err, leader in metadata(balancer.port)["topics"][topic].values()))


# ---- one producer and one group consumer per client stack -------------------

def confluent_produce(bootstrap, topic, prefix, n, acked):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000})

    def done(err, msg):
        if err is None:
            acked.append(msg.value().decode())

    for i in range(n):
        p.produce(topic, key=f"k{i % 16}", value=f"{prefix}-{i}", on_delivery=done)
        p.poll(0)
        time.sleep(0.005)
    assert p.flush(90) == 0, "records still unacknowledged after 90 s"


def confluent_consume(bootstrap, topic, group, want, stop=None, timeout=90):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": True,
                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    seen = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen.append(m.value().decode())
            if (stop is None or stop.is_set()) and want() <= set(seen):
                break
    finally:
        c.close()
    return seen


def kafka_python_produce(bootstrap, topic, prefix, n):
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20,
                      retry_backoff_ms=300, request_timeout_ms=15000,
                      max_in_flight_requests_per_connection=1)
    futures = [(f"{prefix}-{i}", p.send(topic, key=f"k{i % 16}".encode(), value=f"{prefix}-{i}".encode()))
               for i in range(n)]
    p.flush(timeout=90)
    acked = []
    for value, f in futures:
        try:
            f.get(timeout=1)
            acked.append(value)
        except Exception:  # not acknowledged: not expected back
            pass
    p.close()
    return acked


def kafka_python_consume(bootstrap, topic, group, want, timeout=90):
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=True,
                      session_timeout_ms=10000, heartbeat_interval_ms=500)
    seen = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and not want <= set(seen):
            for records in c.poll(timeout_ms=500).values():
                seen.extend(r.value.decode() for r in records)
    finally:
        c.close()
    return seen


def kafkajs(*args):
    out = subprocess.run(["node", "lb_client.js", *map(str, args)], cwd=JS_DIR,
                         capture_output=True, text=True, timeout=150)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# ---- the scenario -------------------------------------------------------------

def test_clients_see_one_broker_at_the_balancer_address(deployment):
    _cluster, balancer = deployment
    topic = f"lb-meta-{uuid.uuid4().hex[:6]}"
    create_topic(balancer, topic)
    md = metadata(balancer.port)
    assert md["brokers"] == {0: ("127.0.0.1", balancer.port, None)}
    assert md["controller"] == 0
    for p in range(PARTITIONS):
        assert md["replicas"][(topic, p)] == ([0], [0])


def client_bytes(agent):
    with urllib.request.urlopen(f"http://127.0.0.1:{agent.http_port}/v1/cost", timeout=5) as r:
        return json.loads(r.read())["cross_zone"]["clients"]


def test_a_client_that_names_its_zone_is_sent_to_the_balancer_in_its_zone(deployment):
    cluster, balancer = deployment
    zone_port = balancer.zone_ports["rack-2"]
    topic = f"lb-zone-{uuid.uuid4().hex[:6]}"
    create_topic(balancer, topic)
    client_id = "orders,aerostream_az=rack-2"
    md = AdminClient({"bootstrap.servers": balancer.bootstrap, "client.id": client_id}).list_topics(timeout=10)
    assert {i: (b.host, b.port) for i, b in md.brokers.items()} == {0: ("127.0.0.1", zone_port)}
    # a client that names another zone, or none, gets the balancer's own address
    for other in ("orders,aerostream_az=rack-9", "orders"):
        md = AdminClient({"bootstrap.servers": balancer.bootstrap, "client.id": other}).list_topics(timeout=10)
        assert {i: (b.host, b.port) for i, b in md.brokers.items()} == {0: ("127.0.0.1", balancer.port)}

    before = {n: client_bytes(cluster.agent(n)) for n in VOTERS}
    records, size = 100, 10_000
    p = Producer({"bootstrap.servers": balancer.bootstrap, "client.id": client_id, "acks": "all",
                  "linger.ms": 5})
    errors = []
    for i in range(records):
        p.produce(topic, value=b"z" * size, key=str(i).encode(),
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0 and errors == []
    after = {n: client_bytes(cluster.agent(n)) for n in VOTERS}
    # every produced byte reached agent 2 (the zone's balancer knows no
    # other agent), from a client in its own zone: nothing crossed zones
    grew = after[2]["same_zone_bytes"] - before[2]["same_zone_bytes"]
    assert grew >= records * size, (before[2], after[2])
    for n in (1, 3):
        crossed = after[n]["cross_zone_received_bytes"] - before[n]["cross_zone_received_bytes"]
        assert crossed < records * size // 10, (n, before[n], after[n])


def partitions_seen_by(agent, topic):
    """Each partition's (leader, ISR) as the agent's REST API tells them
    (Kafka Metadata shows the balancer instead)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{agent.http_port}/v1/topics/{topic}",
                                timeout=5) as r:
        return {p["partition"]: (p["leader"], p["isr"]) for p in json.load(r)["partitions"]}


def all_in_sync(agent, topic):
    return all(len(isr) == 3 and leader is not None
               for leader, isr in partitions_seen_by(agent, topic).values())


def test_a_rolling_restart_with_sigterm_under_acks_all_load_loses_nothing(deployment):
    cluster, balancer = deployment
    topic = f"lb-roll-{uuid.uuid4().hex[:6]}"
    create_topic(balancer, topic)
    prod = Production(cluster, topic, partitions=PARTITIONS, bootstrap_servers=balancer.bootstrap)
    prod.wait_acked(300)
    pauses = {}
    for node in VOTERS:
        agent = cluster.agent(node)
        other = cluster.agent(next(n for n in VOTERS if n != node))
        eventually("every partition has three in-sync replicas", lambda: all_in_sync(other, topic),
                   timeout=60)
        led = sum(1 for leader, _ in partitions_seen_by(other, topic).values() if leader == node)
        stopped = time.time()
        assert agent.stop() == 0, "a controlled shutdown exits 0"
        log = agent.run_log()
        assert "handed partition leadership over" in log, log[-2000:]
        # it led nothing any more when it closed
        assert all(leader != node for leader, _ in partitions_seen_by(other, topic).values())
        n = len(prod.acked)
        prod.wait_acked(n + 200)
        pauses[node] = (led, longest_pause(prod.ack_times, stopped - 0.5, time.time()))
        agent.start(timeout=90)
    eventually("every partition has three in-sync replicas again",
               lambda: all_in_sync(cluster.agent(1), topic), timeout=60)
    n = len(prod.acked)
    prod.wait_acked(n + 200)
    acked = prod.finish()
    print("leaderships and the longest acknowledgement pause (s) at each SIGTERM: "
          + ", ".join(f"agent {n}: {led} led, {pause:.3f}" for n, (led, pause) in pauses.items()))
    assert not prod.errors, prod.errors[:3]
    assert_one_record_per_offset(prod)
    got = read_back(cluster, topic, PARTITIONS, len(acked), bootstrap_servers=balancer.bootstrap)
    assert_nothing_lost(acked, got)


def test_three_client_stacks_produce_and_consume_in_groups_and_survive_an_agent_killed(deployment):
    cluster, balancer = deployment
    lb = balancer.bootstrap
    topic = f"lb-{uuid.uuid4().hex[:6]}"
    create_topic(balancer, topic)
    before = {n: forwarded_served(cluster.agent(n)) for n in VOTERS}

    # Before the kill: each stack produces, then reads it all in a group.
    acked = []
    confluent_produce(lb, topic, "ck-a", 150, acked)
    acked += kafka_python_produce(lb, topic, "kp-a", 150)
    acked += kafkajs("produce", lb, topic, "js-a", 150)
    assert len(acked) == 450, f"only {len(acked)} of 450 records acknowledged with every agent up"
    want = set(acked)
    assert want <= set(confluent_consume(lb, topic, "ck-group", lambda: want))
    assert want <= set(kafka_python_consume(lb, topic, "kp-group", want))
    assert want <= set(kafkajs("consume", lb, topic, "js-group", len(want)))
    # Data and groups are spread over the agents, so requests were forwarded
    # to at least two of them.
    served = [forwarded_served(cluster.agent(n)) - before[n] for n in VOTERS]
    assert sum(1 for s in served if s > 0) >= 2, served

    # An agent dies under a running producer and a running group consumer.
    live_acked = []
    stop = threading.Event()
    consumed = []
    consumer = threading.Thread(target=lambda: consumed.extend(confluent_consume(
        lb, topic, "ck-live", lambda: want | set(live_acked), stop=stop, timeout=150)))
    consumer.start()
    producer = threading.Thread(target=confluent_produce, args=(lb, topic, "ck-b", 400, live_acked))
    producer.start()
    time.sleep(1.0)
    victim = 2
    cluster.agent(victim).kill9()
    producer.join(timeout=150)
    assert not producer.is_alive()

    # The other stacks keep working through the balancer without that agent.
    after = kafka_python_produce(lb, topic, "kp-b", 100)
    after += kafkajs("produce", lb, topic, "js-b", 100)
    assert len(live_acked) >= 350, f"only {len(live_acked)} of 400 acknowledged across the kill"
    assert len(after) == 200, f"only {len(after)} of 200 acknowledged after the kill"
    stop.set()
    consumer.join(timeout=160)
    assert not consumer.is_alive()
    assert want | set(live_acked) <= set(consumed), \
        f"the live group missed {len(want | set(live_acked) - set(consumed))} acknowledged records"

    # Fresh groups read every acknowledged record, from any stack.
    every = want | set(live_acked) | set(after)
    assert every <= set(confluent_consume(lb, topic, "ck-final", lambda: every))
    assert every <= set(kafka_python_consume(lb, topic, "kp-final", every))
    assert every <= set(kafkajs("consume", lb, topic, "js-final", len(every)))
