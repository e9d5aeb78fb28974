"""Defects found by trying the broker as a new user would, each pinned by the
real binary and real clients: idle consumers must not keep a core busy, a
consumer's fetch.max.bytes must be kept, a compressed batch that lies about
its record count must be refused without rolling segments, and with
write.caching=false produce requests share their fdatasyncs."""

import gzip
import os
import socket
import struct
import subprocess
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition

from helpers import create_topic


def cpu_seconds(pid):
    """User plus system CPU time of a process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def metric(broker, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def test_two_idle_kcat_consumers_cost_under_five_percent_of_a_core(own_broker, topic_name):
    create_topic(own_broker, topic_name, partitions=1)
    p = Producer({"bootstrap.servers": own_broker.bootstrap})
    p.produce(topic_name, b"the only record")
    assert p.flush(15) == 0
    consumers = [
        subprocess.Popen(
            ["kcat", "-C", "-b", own_broker.bootstrap, "-t", topic_name, "-o", "end", "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    try:
        time.sleep(3)  # both consumers are connected and long-polling
        assert all(c.poll() is None for c in consumers), "kcat consumers are running"
        pid = own_broker.proc.pid
        before, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(6)
        used, elapsed = cpu_seconds(pid) - before, time.monotonic() - t0
    finally:
        for c in consumers:
            c.terminate()
            c.wait(10)
    share = used / elapsed
    print(f"broker CPU with two idle consumers: {share:.2%} of a core")
    assert share < 0.05, f"two idle consumers cost {share:.1%} of a core"


def test_a_consumer_with_fetch_max_bytes_one_million_reads_900_kib_records_from_four_partitions(
    own_broker, topic_name
):
    create_topic(own_broker, topic_name, partitions=4)
    p = Producer({"bootstrap.servers": own_broker.bootstrap, "message.max.bytes": 1_000_000})
    value = os.urandom(900 * 1024)
    for partition in range(4):
        for _ in range(3):
            p.produce(topic_name, value, partition=partition)
    assert p.flush(30) == 0
    c = Consumer({
        "bootstrap.servers": own_broker.bootstrap,
        "group.id": f"g-{topic_name}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        # librdkafka requires receive.message.max.bytes >= fetch.max.bytes + 512.
        "fetch.max.bytes": 1_000_000,
        "receive.message.max.bytes": 1_000_512,
    })
    errors = []
    c.subscribe([topic_name])
    got = 0
    deadline = time.time() + 60
    while got < 12 and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            errors.append(m.error())
            continue
        assert m.value() == value
        got += 1
    c.close()
    assert got == 12, f"read {got} of 12 records; errors: {errors[:3]}"


def crc32c(data):
    """CRC-32C (Castagnoli), as Kafka's record batches carry it."""
    table = crc32c.table
    if table is None:
        table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
        crc32c.table = table
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c.table = None


def varint(n):
    """Kafka's zigzag varint."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z & ~0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        else:
            out.append(z)
            return bytes(out)


def lying_gzip_batch():
    """A gzip v2 batch with one real record whose header claims 2^31-1."""
    body = varint(0) + varint(0) + varint(-1) + varint(5) + b"hello" + varint(0)
    record = bytes([0]) + body  # attributes, then the rest
    records = gzip.compress(varint(len(record)) + record)
    count = 2**31 - 1
    after_crc = struct.pack(
        ">hiqqqhii",
        1,  # attributes: gzip
        count - 1,  # last offset delta
        1_700_000_000_000,  # base timestamp
        1_700_000_000_000,  # max timestamp
        -1,  # producer id
        -1,  # producer epoch
        -1,  # base sequence
        count,  # records count: a lie
    ) + records
    crc = crc32c(after_crc)
    after_length = struct.pack(">ibI", 0, 2, crc) + after_crc  # leader epoch, magic, crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


def kafka_string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def produce_v3(sock, correlation, topic, records):
    """A Produce v3 request by hand (no client would send this batch)."""
    body = (
        struct.pack(">hhi", 0, 3, correlation)
        + kafka_string("hostile")
        + struct.pack(">h", -1)  # transactional id: null
        + struct.pack(">hi", -1, 10_000)  # acks=all, timeout
        + struct.pack(">i", 1)
        + kafka_string(topic)
        + struct.pack(">i", 1)
        + struct.pack(">i", 0)
        + struct.pack(">i", len(records))
        + records
    )
    sock.sendall(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    resp = recv_exactly(sock, size)
    # correlation id, topics[1]: name, partitions[1]: index, error code, ...
    (got_correlation,) = struct.unpack(">i", resp[:4])
    assert got_correlation == correlation
    pos = 4 + 4
    (name_len,) = struct.unpack(">h", resp[pos : pos + 2])
    pos += 2 + name_len + 4
    _index, error, base_offset = struct.unpack(">ihq", resp[pos : pos + 14])
    return error, base_offset


def recv_exactly(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf.extend(chunk)
    return bytes(buf)


def test_a_gzip_batch_that_lies_about_its_record_count_is_refused_and_rolls_no_segment(
    own_broker, topic_name
):
    create_topic(own_broker, topic_name, partitions=1)
    part_dir = os.path.join(own_broker.dir, "data", "log", f"{topic_name}-0")
    pid = own_broker.proc.pid
    fds_before = len(os.listdir(f"/proc/{pid}/fd"))
    batch = lying_gzip_batch()
    with socket.create_connection(("127.0.0.1", own_broker.port)) as s:
        for i in range(50):
            error, _ = produce_v3(s, i + 1, topic_name, batch)
            # INVALID_RECORD (87) or CORRUPT_MESSAGE (2), as Apache Kafka answers.
            assert error in (2, 87), f"request {i}: error code {error}"
    segments = [f for f in os.listdir(part_dir) if f.endswith(".log")]
    assert len(segments) == 1, f"the lying batches rolled the partition: {segments}"
    fds_after = len(os.listdir(f"/proc/{pid}/fd"))
    assert fds_after - fds_before < 20, f"open descriptors grew from {fds_before} to {fds_after}"
    # Nothing was written, and the next honest record lands at offset 0.
    p = Producer({"bootstrap.servers": own_broker.bootstrap, "compression.type": "gzip"})
    delivered = []
    p.produce(topic_name, b"honest", on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p.flush(15) == 0
    assert delivered == [(None, 0)], delivered


def test_without_write_caching_produce_requests_share_fdatasyncs(tmp_path, topic_name):
    from broker import Broker

    b = Broker(["--write-caching", "false"]).start()
    try:
        create_topic(b, topic_name, partitions=1)
        requests_before = metric(b, "aerostream_kafka_requests_total")
        syncs_before = metric(b, "aerostream_partition_syncs_total")
        producers = [
            Producer({
                "bootstrap.servers": b.bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "batch.num.messages": 1,
                "max.in.flight.requests.per.connection": 5,
            })
            for _ in range(4)
        ]
        acked = []
        for i in range(2000):
            producers[i % 4].produce(
                topic_name, f"m{i}".encode(), on_delivery=lambda err, msg: acked.append(err)
            )
            producers[i % 4].poll(0)
        for p in producers:
            assert p.flush(60) == 0
        assert acked.count(None) == 2000
        produce_requests = metric(b, "aerostream_kafka_requests_total") - requests_before
        syncs = metric(b, "aerostream_partition_syncs_total") - syncs_before
        assert syncs >= 1, "acks=all waited for an fdatasync"
        assert syncs < produce_requests, f"{syncs:.0f} fdatasyncs for {produce_requests:.0f} requests"
        # Everything acknowledged is readable.
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
        low, high = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        c.close()
        assert (low, high) == (0, 2000)
    finally:
        b.stop()
