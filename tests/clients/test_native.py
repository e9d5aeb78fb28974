"""The native protocol against the real binary, through the Rust SDK's
`produce` and `consume` examples, next to Kafka clients on the same
broker: what one protocol writes the other reads (over TCP and over QUIC),
keys land where librdkafka puts them, bad input closes only its own
connection, and native consumer groups share partitions and commit offsets
Kafka tools read."""

import os
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition


def example(name):
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "target"))
    path = os.path.join(target, "debug", "examples", name)
    if not os.path.exists(path):
        pytest.fail(f"{path} not found: run `cargo build -p sdk --examples` first")
    return path


def connection_args(broker, quic=False):
    """--bootstrap (and, over QUIC, the agent's CA to trust) for an example."""
    if quic:
        return ["--bootstrap", broker.native_quic_url, "--tls-ca", broker.native_ca]
    return ["--bootstrap", broker.native_url]


def native_produce(broker, topic, lines, quic=False, extra=()):
    r = subprocess.run([example("produce"), *connection_args(broker, quic), "--topic", topic, *extra],
                       input="".join(f"{l}\n" for l in lines), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "", "produce prints nothing but errors"
    return r


def native_consume(broker, topic, count, start="earliest", quic=False, extra=()):
    r = subprocess.run([example("consume"), *connection_args(broker, quic), "--topic", topic,
                        "--from", str(start), "--count", str(count), *extra],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def kafka_read_all(broker, topic, count, partitions=1):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    for _ in range(200):
        if len(got) >= count:
            break
        for m in c.consume(num_messages=count, timeout=0.5):
            if m.error() is None:
                got.append((m.partition(), m.offset(), m.key(), m.value().decode()))
    c.close()
    return got


def test_lines_produced_natively_are_read_by_confluent_kafka_and_the_native_consumer(broker, topic_name):
    lines = [f"line {i} ü" for i in range(500)]
    native_produce(broker, topic_name, lines)
    assert native_consume(broker, topic_name, len(lines)) == lines
    got = kafka_read_all(broker, topic_name, len(lines))
    assert [v for (_, _, _, v) in got] == lines
    assert [o for (_, o, _, _) in got] == list(range(len(lines)))


def kafka_read_isolated(broker, topic, isolation, expect):
    """Values of partition 0 a confluent-kafka consumer of `isolation` reads:
    `expect` of them, then nothing more for a while."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"i-{topic}-{isolation}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    quiet = 0
    for _ in range(120):
        msgs = [m for m in c.consume(num_messages=100, timeout=0.5) if m.error() is None]
        got += [m.value().decode() for m in msgs]
        quiet = 0 if msgs else quiet + 1
        if len(got) >= expect and quiet >= 4:
            break
    c.close()
    return got


def test_native_transactions_and_kafka_transactions_are_read_committed_by_each_other(broker, topic_name):
    tid = f"native-{topic_name}"
    aborted = [f"native-aborted-{i}" for i in range(20)]
    committed = [f"native-committed-{i}" for i in range(30)]
    native_produce(broker, topic_name, aborted, extra=["--transactional-id", tid, "--abort"])
    native_produce(broker, topic_name, committed, extra=["--transactional-id", tid])
    # confluent-kafka read_committed sees the native commit and not the abort
    assert kafka_read_isolated(broker, topic_name, "read_committed", len(committed)) == committed
    assert kafka_read_isolated(broker, topic_name, "read_uncommitted",
                               len(aborted) + len(committed)) == aborted + committed
    # and a Kafka transaction is read committed natively
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"kafka-{topic_name}",
                  "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, value=f"kafka-aborted-{i}", partition=0)
    p.abort_transaction(30)
    p.begin_transaction()
    kafka_committed = [f"kafka-committed-{i}" for i in range(10)]
    for v in kafka_committed:
        p.produce(topic_name, value=v, partition=0)
    p.commit_transaction(30)
    expected = committed + kafka_committed
    assert native_consume(broker, topic_name, len(expected),
                          extra=["--isolation", "read-committed"]) == expected


def test_records_produced_by_kafka_clients_are_read_natively_from_an_offset(broker, topic_name):
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd", "linger.ms": 5})
    values = [f"kafka-{i}" for i in range(300)]
    for v in values:
        p.produce(topic_name, value=v.encode())
    assert p.flush(30) == 0
    assert native_consume(broker, topic_name, len(values)) == values
    assert native_consume(broker, topic_name, 10, start=290) == values[290:]


def test_the_examples_and_kcat_exchange_a_thousand_lines_each_way(broker, topic_name):
    """The Rust SDK's produce example writes 1,000 lines that kcat reads back
    in order, and its consume example reads 1,000 lines kcat wrote, in order
    (one partition, so that order is defined)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    theirs = f"{topic_name}-kcat"
    for t in (topic_name, theirs):
        admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1)])[t].result(30)
    ours = [f"native line {i}" for i in range(1000)]
    native_produce(broker, topic_name, ours)
    out = subprocess.run(["kcat", "-C", "-b", broker.bootstrap, "-t", topic_name, "-o", "beginning", "-e",
                          "-q", "-f", "%s\\n"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ours
    lines = [f"kcat line {i}" for i in range(1000)]
    w = subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", theirs],
                       input="".join(f"{l}\n" for l in lines), capture_output=True, text=True, timeout=60)
    assert w.returncode == 0, w.stderr
    assert native_consume(broker, theirs, 1000) == lines


def test_kcat_reads_native_records_and_keys_land_where_librdkafka_puts_them(broker, topic_name):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, num_partitions=4, replication_factor=1)])[topic_name].result(30)
    keys = [f"customer-{i}" for i in range(40)]
    r = subprocess.run([example("produce"), "--bootstrap", broker.native_url, "--topic", topic_name,
                        "--key-sep", "="], input="".join(f"{k}=v-{k}\n" for k in keys),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # librdkafka's murmur2 partitioner (Java-compatible) places the same keys
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    placed = {}

    def record(err, msg):
        assert err is None, err
        placed[msg.key().decode()] = msg.partition()
    for k in keys:
        p.produce(topic_name, key=k.encode(), value=b"again", on_delivery=record)
    assert p.flush(30) == 0
    out = subprocess.run(["kcat", "-C", "-b", broker.bootstrap, "-t", topic_name, "-o", "beginning", "-e",
                          "-f", "%p %k %s\\n"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    native = {}
    for line in out.stdout.splitlines():
        part, key, value = line.split(" ", 2)
        if value.startswith("v-"):
            native[key] = int(part)
            assert value == f"v-{key}"
    assert native == placed, "the native producer and librdkafka agree on every key's partition"


def test_a_garbage_frame_is_answered_with_an_error_frame_and_harms_nothing(broker, topic_name):
    host, port = broker.native_url.removeprefix("aero://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\n\r\n")
        head = s.recv(7)
        assert head[:3] == bytes([0xAE, 0x01, 0x7F]), head
        (length,) = struct.unpack(">I", head[3:7])
        body = b""
        while len(body) < length:
            body += s.recv(length - len(body))
        correlation, code = struct.unpack(">IH", body[:6])
        assert (correlation, code) == (0, 4), "BAD_FRAME"
        assert s.recv(1) == b"", "then the server closes"
    native_produce(broker, topic_name, ["still serving"])
    assert native_consume(broker, topic_name, 1) == ["still serving"]


def test_the_native_consumer_of_a_missing_topic_with_auto_create_off_says_why(own_broker):
    own_broker.stop()
    own_broker.extra_args += ["--auto-create-topics", "false"]
    own_broker.start()
    r = subprocess.run([example("consume"), "--bootstrap", own_broker.native_url, "--topic", "nope",
                        "--from", "earliest", "--count", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "nope" in r.stderr, r.stderr


def group_members(broker, topic, group, n):
    """Starts `n` `consume --group` processes, each printing what it reads."""
    return [subprocess.Popen([example("consume"), "--bootstrap", broker.native_url, "--topic", topic,
                              "--group", group], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(n)]


def read_lines(procs, expected, timeout=60):
    """The lines the processes print, per process, until `expected` lines
    came from all of them together."""
    import threading
    out = [[] for _ in procs]
    lock = threading.Lock()

    def pump(i, p):
        for line in p.stdout:
            with lock:
                out[i].append(line.rstrip("\n"))
    threads = [threading.Thread(target=pump, args=(i, p), daemon=True) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    deadline = time.time() + timeout
    while time.time() < deadline:
        with lock:
            if sum(len(o) for o in out) >= expected:
                break
        for p in procs:
            assert p.poll() is None, p.stderr.read()
        time.sleep(0.1)
    return out, threads


def test_three_native_group_members_read_every_record_once_and_kafka_tools_see_the_group(broker, topic_name):
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaAdminClient
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, num_partitions=6, replication_factor=1)])[topic_name].result(30)
    group = f"g-{topic_name}"
    lines = [f"k{i}=line {i}" for i in range(600)]
    r = subprocess.run([example("produce"), "--bootstrap", broker.native_url, "--topic", topic_name,
                        "--key-sep", "="], input="".join(f"{l}\n" for l in lines),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    values = sorted(l.split("=", 1)[1] for l in lines)

    procs = group_members(broker, topic_name, group, 3)
    try:
        out, threads = read_lines(procs, len(values))
        got = sorted(v for o in out for v in o)
        assert got == values, "every record read once between the three members"
        # Kafka's admin API describes the native group and its members
        ka = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            deadline = time.time() + 30
            while True:
                described = ka.describe_groups([group])[group]
                if described["group_state"] == "Stable" and len(described["members"]) == 3 \
                        or time.time() > deadline:
                    break
                time.sleep(0.2)
            assert described["protocol_type"] == "consumer"
            assert described["protocol_data"] == "aerostream-range"
            assert len(described["members"]) == 3, described
            for m in described["members"]:
                assert m["member_metadata"]["topics"] == [topic_name]
            owned = sorted(p for m in described["members"]
                           for a in m["member_assignment"]["assigned_partitions"] if a["topic"] == topic_name
                           for p in a["partitions"])
            assert owned == list(range(6)), "the members split the six partitions"
        finally:
            ka.close()
    finally:
        # each member commits where it got to and leaves
        for p in procs:
            p.send_signal(signal.SIGINT)
        codes = [p.wait(timeout=30) for p in procs]
    assert codes == [0, 0, 0], [p.stderr.read() for p in procs]
    for t in threads:
        t.join(timeout=10)
    assert sorted(v for o in out for v in o) == values, "nothing more was read"

    # the committed offsets are the partitions' ends, as Kafka clients see them
    ends = {}
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"probe-{topic_name}"})
    for p in range(6):
        ends[p] = c.get_watermark_offsets(TopicPartition(topic_name, p), timeout=10)[1]
    c.close()
    assert sum(ends.values()) == len(lines)
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    committed = {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic_name}
    assert committed == ends

    # a member joining later starts at the group's offsets: only new records
    native_produce(broker, topic_name, ["after-1", "after-2", "after-3"])
    r = subprocess.run([example("consume"), "--bootstrap", broker.native_url, "--topic", topic_name,
                        "--group", group, "--count", "3"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["after-1", "after-2", "after-3"]
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert sum(tp.offset for tp in result.topic_partitions) == len(lines) + 3, "committed on leaving"


# ------------------------------------------------------------------ QUIC


def test_the_agent_serves_quic_on_the_native_port_and_writes_its_ca(broker):
    assert os.path.exists(broker.native_ca), "the agent wrote the CA clients trust"
    with open(broker.native_ca) as f:
        assert f.read().startswith("-----BEGIN CERTIFICATE-----")
    log = broker.run_log()
    assert broker.native_ca in log, "the CA's path is logged at startup"
    assert f"native_quic=127.0.0.1:{broker.native_port}" in log


def test_lines_produced_natively_over_quic_are_read_by_confluent_kafka_and_over_tcp(broker, topic_name):
    lines = [f"quic line {i} ü" for i in range(500)]
    native_produce(broker, topic_name, lines, quic=True)
    assert native_consume(broker, topic_name, len(lines), quic=True) == lines
    assert native_consume(broker, topic_name, len(lines)) == lines, "TCP reads what QUIC wrote"
    got = kafka_read_all(broker, topic_name, len(lines))
    assert [v for (_, _, _, v) in got] == lines
    assert [o for (_, o, _, _) in got] == list(range(len(lines)))


def test_records_produced_by_kafka_clients_are_read_natively_over_quic(broker, topic_name):
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5})
    values = [f"kafka-{i}" for i in range(300)]
    for v in values:
        p.produce(topic_name, value=v.encode())
    assert p.flush(30) == 0
    assert native_consume(broker, topic_name, len(values), quic=True) == values
    assert native_consume(broker, topic_name, 10, start=290, quic=True) == values[290:]


def test_keys_produced_over_quic_land_where_librdkafka_puts_them(broker, topic_name):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=1)])[topic_name].result(30)
    keys = [f"k-{i}" for i in range(30)]
    r = subprocess.run([example("produce"), *connection_args(broker, quic=True), "--topic", topic_name,
                        "--key-sep", "="], input="".join(f"{k}=v-{k}\n" for k in keys),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = kafka_read_all(broker, topic_name, len(keys), partitions=3)
    by_key = {key.decode(): (part, value) for (part, _, key, value) in got}
    assert sorted(by_key) == sorted(keys)
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    placed = {}

    def record(err, msg):
        assert err is None, err
        placed[msg.key().decode()] = msg.partition()
    for k in keys:
        p.produce(topic_name, key=k.encode(), value=b"again", on_delivery=record)
    assert p.flush(30) == 0
    assert {k: part for k, (part, _) in by_key.items()} == placed


def test_quic_without_a_ca_says_what_to_give_and_insecure_goes_through(broker, topic_name):
    r = subprocess.run([example("consume"), "--bootstrap", broker.native_quic_url, "--topic", topic_name,
                        "--count", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "ca.pem" in r.stderr and "tls_ca_file" in r.stderr, r.stderr
    r = subprocess.run([example("produce"), "--bootstrap", broker.native_quic_url, "--insecure",
                        "--topic", topic_name], input="unverified\n", capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert native_consume(broker, topic_name, 1, quic=True) == ["unverified"]


def test_the_ca_outlives_a_restart_and_a_stale_ca_is_refused_clearly(own_broker, topic_name, tmp_path):
    with open(own_broker.native_ca) as f:
        first = f.read()
    native_produce(own_broker, topic_name, ["before"], quic=True)
    own_broker.restart()
    with open(own_broker.native_ca) as f:
        assert f.read() == first, "clients trusting ca.pem keep trusting the agent"
    assert native_consume(own_broker, topic_name, 1, quic=True) == ["before"]
    # a new CA (its folder removed): the old ca.pem no longer verifies
    stale = tmp_path / "stale-ca.pem"
    stale.write_text(first)
    own_broker.stop()
    shutil.rmtree(os.path.dirname(own_broker.native_ca))
    own_broker.start()
    r = subprocess.run([example("consume"), "--bootstrap", own_broker.native_quic_url, "--tls-ca", str(stale),
                        "--topic", topic_name, "--count", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "TLS handshake" in r.stderr and "not trusted" in r.stderr, r.stderr
    assert native_consume(own_broker, topic_name, 1, quic=True) == ["before"]
