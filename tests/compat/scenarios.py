"""The scenarios of the client compatibility matrix, written once per
client: confluent-kafka (librdkafka), kafka-python, aiokafka and kcat here,
kafkajs in kafkajs_scenarios.js. Each scenario is what an application
relies on, checked end to end against one broker:

    run(client, scenario, bootstrap)   returns a note or None, or raises
                                       Failed / Unsupported

Unsupported means the client has no such feature (kcat has no transactions,
only confluent-kafka speaks the KIP-848 group protocol), so the matrix shows
"n/a" rather than a failure. Every scenario makes its own topics and groups
with unique names, so scenarios may run side by side on one broker.
"""

import asyncio
import json
import os
import subprocess
import threading
import time
import uuid

SCENARIOS = [
    ("produce-consume", "produce with acks=all, keys and headers; read back in order"),
    ("compression", "gzip, snappy, lz4 and zstd batches read back (kafkajs: gzip, the only codec it ships)"),
    ("idempotence", "idempotent producer: offsets without gaps or duplicates"),
    ("group-classic", "classic group: two members split four partitions, commit, a new member resumes"),
    ("group-kip848", "KIP-848 group (group.protocol=consumer): two members split four partitions"),
    ("transactions", "transactional producer: committed records read, aborted ones not (read_committed)"),
    ("admin", "create a topic with a config, describe the config, delete the topic"),
]
CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka", "kcat", "kafkajs"]
HERE = os.path.dirname(os.path.abspath(__file__))
PATIENCE = 30  # seconds any one wait may take
# replication factor of the topics the scenarios make (3 on a cluster)
RF = int(os.environ.get("COMPAT_REPLICATION_FACTOR", "1"))


class Unsupported(Exception):
    """The client has no such feature."""


class Failed(AssertionError):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def records(n, prefix="v"):
    return [(f"k{i}".encode(), f"{prefix}{i}".encode() * (1 + i % 5), [("idx", str(i).encode())]) for i in range(n)]


def run(client, scenario, bootstrap):
    if client == "kafkajs":
        return run_kafkajs(scenario, bootstrap)
    fn = IMPLEMENTATIONS.get((client, scenario))
    if fn is None:
        raise Unsupported(f"{client} has no {scenario}")
    fn(bootstrap)
    return None


# --- confluent-kafka (librdkafka) ---------------------------------------------

def ck_admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def ck_topic(bootstrap, prefix, partitions=1, config=None):
    from confluent_kafka.admin import NewTopic
    name = unique(prefix)
    a = ck_admin(bootstrap)
    a.create_topics([NewTopic(name, partitions, RF, config=config or {})])[name].result(timeout=PATIENCE)
    wait_for_leaders(bootstrap, name, partitions)
    return name


def wait_for_leaders(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.time() + PATIENCE
    while time.time() < deadline:
        md = a.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions \
                and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise Failed(f"{topic} has no leaders after {PATIENCE} s")


def ck_produce(bootstrap, topic, msgs, **conf):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **conf})
    acked, errors = [], []

    def report(err, m):
        (errors if err else acked).append(err or (m.partition(), m.offset()))

    for k, v, h in msgs:
        p.produce(topic, key=k, value=v, headers=h, on_delivery=report)
    check(p.flush(PATIENCE) == 0, "every record delivered")
    check(not errors, f"delivery errors: {errors}")
    return acked


def ck_read(bootstrap, topic, n, **conf):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    got = []
    deadline = time.time() + PATIENCE
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        check(m.error() is None, f"consume error: {m.error()}")
        got.append((m.key(), m.value(), m.headers() or []))
    # a moment more: nothing beyond what was expected
    end = time.time() + 1
    while time.time() < end:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append((m.key(), m.value(), m.headers() or []))
    c.close()
    return got


def ck_produce_consume(bootstrap):
    t = ck_topic(bootstrap, "pc")
    msgs = records(20)
    acked = ck_produce(bootstrap, t, msgs)
    check([o for _, o in acked] == list(range(20)), f"offsets {acked}")
    got = ck_read(bootstrap, t, 20)
    check(got == [(k, v, h) for k, v, h in msgs], "records read back as written, in order")


def ck_compression(bootstrap):
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        t = ck_topic(bootstrap, f"c-{codec}")
        msgs = records(20, codec)
        ck_produce(bootstrap, t, msgs, **{"compression.type": codec})
        got = ck_read(bootstrap, t, 20)
        check([v for _, v, _ in got] == [v for _, v, _ in msgs], f"{codec} records read back")


def ck_idempotence(bootstrap):
    t = ck_topic(bootstrap, "idem")
    acked = ck_produce(bootstrap, t, records(50), **{"enable.idempotence": True})
    check(sorted(o for _, o in acked) == list(range(50)), "offsets 0..49 once each")
    check(len(ck_read(bootstrap, t, 50)) == 50, "50 records, no duplicates")


def ck_group(bootstrap, protocol):
    from confluent_kafka import Consumer
    t = ck_topic(bootstrap, "grp", partitions=4)
    group = unique("g")
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    a, b = Consumer(conf), Consumer(conf)
    a.subscribe([t])
    b.subscribe([t])
    # the members settle first, then the records come: each reads its own
    deadline = time.time() + PATIENCE * 2
    while time.time() < deadline and not (len(a.assignment()) == 2 and len(b.assignment()) == 2):
        a.poll(0.1)
        b.poll(0.1)
    check(len(a.assignment()) == 2 and len(b.assignment()) == 2,
          f"assignments {len(a.assignment())} and {len(b.assignment())}")
    ck_produce(bootstrap, t, [(f"k{i}".encode(), f"v{i}".encode(), []) for i in range(40)])
    seen = set()
    deadline = time.time() + PATIENCE
    while time.time() < deadline and len(seen) < 40:
        for c in (a, b):
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                seen.add(m.value())
    check(len(seen) == 40, f"read {len(seen)} of 40 records")
    # each member commits what it read: a member of the group resumes there
    for c in (a, b):
        c.commit(asynchronous=False)
    a.close()
    b.close()
    later = Consumer(conf)
    later.subscribe([t])
    extra = []
    end = time.time() + 8
    while time.time() < end:
        m = later.poll(0.2)
        if m is not None and m.error() is None:
            extra.append(m.value())
    committed = later.committed([__import__("confluent_kafka").TopicPartition(t, p) for p in range(4)], timeout=10)
    later.close()
    check(extra == [], f"a new member re-read {len(extra)} committed records")
    check(sum(tp.offset for tp in committed) == 40, f"committed offsets {[tp.offset for tp in committed]}")


def ck_transactions(bootstrap):
    from confluent_kafka import Producer
    t = ck_topic(bootstrap, "txn")
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx")})
    p.init_transactions(PATIENCE)
    p.begin_transaction()
    for i in range(5):
        p.produce(t, key=b"k", value=f"committed{i}".encode())
    p.commit_transaction(PATIENCE)
    p.begin_transaction()
    for i in range(5):
        p.produce(t, key=b"k", value=f"aborted{i}".encode())
    p.flush(PATIENCE)
    p.abort_transaction(PATIENCE)
    got = ck_read(bootstrap, t, 5, **{"isolation.level": "read_committed"})
    check([v for _, v, _ in got] == [f"committed{i}".encode() for i in range(5)],
          f"read_committed saw {[v for _, v, _ in got]}")


def ck_admin_scenario(bootstrap):
    from confluent_kafka.admin import ConfigResource
    t = ck_topic(bootstrap, "adm", partitions=2, config={"retention.ms": "3600000"})
    a = ck_admin(bootstrap)
    res = ConfigResource(ConfigResource.Type.TOPIC, t)
    configs = a.describe_configs([res])[res].result(timeout=PATIENCE)
    check(configs["retention.ms"].value == "3600000", f"retention.ms is {configs['retention.ms'].value}")
    a.delete_topics([t])[t].result(timeout=PATIENCE)
    deadline = time.time() + PATIENCE
    while t in a.list_topics(timeout=5).topics:
        check(time.time() < deadline, "the topic is gone after delete")
        time.sleep(0.2)


# --- kafka-python ----------------------------------------------------------------

def kp_topic(bootstrap, prefix, partitions=1, config=None):
    from kafka.admin import KafkaAdminClient, NewTopic
    name = unique(prefix)
    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        a.create_topics([NewTopic(name, partitions, RF, topic_configs=config or {})])
    finally:
        a.close()
    wait_for_leaders(bootstrap, name, partitions)
    return name


def kp_produce(bootstrap, topic, msgs, **conf):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **conf)
    futures = [p.send(topic, key=k, value=v, headers=h) for k, v, h in msgs]
    offsets = [f.get(timeout=PATIENCE).offset for f in futures]
    p.close()
    return offsets


def kp_read(bootstrap, topic, n, **conf):
    from kafka import KafkaConsumer
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=unique("g"), auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=2000, **conf)
    got = []
    deadline = time.time() + PATIENCE
    while len(got) < n and time.time() < deadline:
        for tp_records in c.poll(timeout_ms=500).values():
            got.extend((r.key, r.value, list(r.headers)) for r in tp_records)
    end = time.time() + 1
    while time.time() < end:
        for tp_records in c.poll(timeout_ms=200).values():
            got.extend((r.key, r.value, list(r.headers)) for r in tp_records)
    c.close()
    return got


def kp_produce_consume(bootstrap):
    t = kp_topic(bootstrap, "pc")
    msgs = records(20)
    check(kp_produce(bootstrap, t, msgs) == list(range(20)), "offsets 0..19")
    got = kp_read(bootstrap, t, 20)
    check(got == [(k, v, h) for k, v, h in msgs], "records read back as written, in order")


def kp_compression(bootstrap):
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        t = kp_topic(bootstrap, f"c-{codec}")
        msgs = records(20, codec)
        kp_produce(bootstrap, t, msgs, compression_type=codec)
        check([v for _, v, _ in kp_read(bootstrap, t, 20)] == [v for _, v, _ in msgs], f"{codec} records read back")


def kp_idempotence(bootstrap):
    t = kp_topic(bootstrap, "idem")
    offsets = kp_produce(bootstrap, t, records(50), enable_idempotence=True)
    check(sorted(offsets) == list(range(50)), "offsets 0..49 once each")
    check(len(kp_read(bootstrap, t, 50)) == 50, "50 records, no duplicates")


def kp_group(bootstrap):
    from kafka import KafkaConsumer, TopicPartition
    t = kp_topic(bootstrap, "grp", partitions=4)
    group = unique("g")

    def member():
        return KafkaConsumer(t, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500)
    # Each consumer polls on a thread of its own, as applications run them.
    # Polling both in turn from one thread trips kafka-python 3.0.12: a
    # JoinGroup/SyncGroup round that completes while the other consumer is
    # being polled is thrown away and the member joins again, and a leader
    # doing so rebalances the group every time.
    seen, lock = set(), threading.Lock()
    done = threading.Event()
    members = []

    def run():
        c = member()
        with lock:
            members.append(c)
        while not done.is_set():
            for recs in c.poll(timeout_ms=100).values():
                with lock:
                    seen.update(r.value for r in recs)
    threads = [threading.Thread(target=run, daemon=True) for _ in range(2)]
    for th in threads:
        th.start()

    def assigned():
        with lock:
            return sorted(len(c.assignment()) for c in members)
    deadline = time.time() + PATIENCE * 2
    while time.time() < deadline and assigned() != [2, 2]:
        time.sleep(0.1)
    split = assigned()
    if split == [2, 2]:
        kp_produce(bootstrap, t, [(f"k{i}".encode(), f"v{i}".encode(), []) for i in range(40)])
        deadline = time.time() + PATIENCE
        while time.time() < deadline and len(seen) < 40:
            time.sleep(0.1)
    done.set()
    for th in threads:
        th.join()
    check(split == [2, 2], f"partitions per member {split}")
    check(len(seen) == 40, f"read {len(seen)} of 40 records")
    for c in members:
        c.commit()
        c.close()
    later = member()
    extra = []
    end = time.time() + 8
    while time.time() < end:
        for recs in later.poll(timeout_ms=200).values():
            extra.extend(r.value for r in recs)
    committed = [later.committed(TopicPartition(t, p)) for p in range(4)]
    later.close()
    check(extra == [], f"a new member re-read {len(extra)} committed records")
    check(sum(o or 0 for o in committed) == 40, f"committed offsets {committed}")


def kp_transactions(bootstrap):
    from kafka import KafkaProducer
    t = kp_topic(bootstrap, "txn")
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("tx"))
    p.init_transactions()
    p.begin_transaction()
    for i in range(5):
        p.send(t, key=b"k", value=f"committed{i}".encode())
    p.commit_transaction()
    p.begin_transaction()
    for i in range(5):
        p.send(t, key=b"k", value=f"aborted{i}".encode())
    p.flush()
    p.abort_transaction()
    p.close()
    got = kp_read(bootstrap, t, 5, isolation_level="read_committed")
    check([v for _, v, _ in got] == [f"committed{i}".encode() for i in range(5)],
          f"read_committed saw {[v for _, v, _ in got]}")


def kp_admin(bootstrap):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    t = kp_topic(bootstrap, "adm", partitions=2, config={"retention.ms": "3600000"})
    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        resp = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)], config_filter="all")
        value = find_config(resp, "retention.ms")
        check(value == "3600000", f"retention.ms is {value}")
        a.delete_topics([t])
        deadline = time.time() + PATIENCE
        while t in a.list_topics():
            check(time.time() < deadline, "the topic is gone after delete")
            time.sleep(0.2)
    finally:
        a.close()


def find_config(resp, key):
    """The value of `key` in kafka-python's nested describe_configs answer."""
    if isinstance(resp, dict):
        if key in resp:
            v = resp[key]
            return v.get("value", v.get("config_value")) if isinstance(v, dict) else v
        for v in resp.values():
            found = find_config(v, key)
            if found is not None:
                return found
    return None


# --- aiokafka --------------------------------------------------------------------

def aio(coro_fn):
    def wrapped(bootstrap):
        return asyncio.run(coro_fn(bootstrap))
    return wrapped


async def ak_produce(bootstrap, topic, msgs, **conf):
    from aiokafka import AIOKafkaProducer
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **conf)
    await p.start()
    try:
        return [(await p.send_and_wait(topic, key=k, value=v, headers=h)).offset for k, v, h in msgs]
    finally:
        await p.stop()


async def ak_read(bootstrap, topic, n, **conf):
    from aiokafka import AIOKafkaConsumer
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=unique("g"), auto_offset_reset="earliest",
                         enable_auto_commit=False, **conf)
    await c.start()
    got = []
    try:
        deadline = time.time() + PATIENCE
        while len(got) < n and time.time() < deadline:
            for recs in (await c.getmany(timeout_ms=500)).values():
                got.extend((r.key, r.value, list(r.headers)) for r in recs)
        for recs in (await c.getmany(timeout_ms=1000)).values():
            got.extend((r.key, r.value, list(r.headers)) for r in recs)
    finally:
        await c.stop()
    return got


async def ak_produce_consume(bootstrap):
    t = kp_topic(bootstrap, "pc")
    msgs = records(20)
    check(await ak_produce(bootstrap, t, msgs) == list(range(20)), "offsets 0..19")
    got = await ak_read(bootstrap, t, 20)
    check(got == [(k, v, h) for k, v, h in msgs], "records read back as written, in order")


async def ak_compression(bootstrap):
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        t = kp_topic(bootstrap, f"c-{codec}")
        msgs = records(20, codec)
        await ak_produce(bootstrap, t, msgs, compression_type=codec)
        got = await ak_read(bootstrap, t, 20)
        check([v for _, v, _ in got] == [v for _, v, _ in msgs], f"{codec} records read back")


async def ak_idempotence(bootstrap):
    t = kp_topic(bootstrap, "idem")
    offsets = await ak_produce(bootstrap, t, records(50), enable_idempotence=True)
    check(sorted(offsets) == list(range(50)), "offsets 0..49 once each")
    check(len(await ak_read(bootstrap, t, 50)) == 50, "50 records, no duplicates")


async def ak_group(bootstrap):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    t = kp_topic(bootstrap, "grp", partitions=4)
    group = unique("g")

    def member():
        return AIOKafkaConsumer(t, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500)
    a, b = member(), member()
    await a.start()
    await b.start()
    deadline = time.time() + PATIENCE * 2
    while time.time() < deadline and not (len(a.assignment()) == 2 and len(b.assignment()) == 2):
        await a.getmany(timeout_ms=100)
        await b.getmany(timeout_ms=100)
    check(len(a.assignment()) == 2 and len(b.assignment()) == 2,
          f"assignments {len(a.assignment())} and {len(b.assignment())}")
    await ak_produce(bootstrap, t, [(f"k{i}".encode(), f"v{i}".encode(), []) for i in range(40)])
    seen = set()
    deadline = time.time() + PATIENCE
    while time.time() < deadline and len(seen) < 40:
        for c in (a, b):
            for recs in (await c.getmany(timeout_ms=100)).values():
                seen.update(r.value for r in recs)
    check(len(seen) == 40, f"read {len(seen)} of 40 records")
    for c in (a, b):
        await c.commit()
    await a.stop()
    await b.stop()
    later = member()
    await later.start()
    extra = []
    end = time.time() + 8
    while time.time() < end:
        for recs in (await later.getmany(timeout_ms=200)).values():
            extra.extend(r.value for r in recs)
    committed = [await later.committed(TopicPartition(t, p)) for p in range(4)]
    await later.stop()
    check(extra == [], f"a new member re-read {len(extra)} committed records")
    check(sum(o or 0 for o in committed) == 40, f"committed offsets {committed}")


async def ak_transactions(bootstrap):
    from aiokafka import AIOKafkaProducer
    t = kp_topic(bootstrap, "txn")
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("tx"))
    await p.start()
    try:
        async with p.transaction():
            for i in range(5):
                await p.send(t, key=b"k", value=f"committed{i}".encode())
        await p.begin_transaction()
        for i in range(5):
            await p.send(t, key=b"k", value=f"aborted{i}".encode())
        await p.flush()
        await p.abort_transaction()
    finally:
        await p.stop()
    got = await ak_read(bootstrap, t, 5, isolation_level="read_committed")
    check([v for _, v, _ in got] == [f"committed{i}".encode() for i in range(5)],
          f"read_committed saw {[v for _, v, _ in got]}")


async def ak_admin(bootstrap):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    t = unique("adm")
    a = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await a.start()
    try:
        await a.create_topics([NewTopic(t, 2, RF, topic_configs={"retention.ms": "3600000"})])
        wait_for_leaders(bootstrap, t, 2)
        resp = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])
        entries = {}
        for r in resp:
            for res in r.resources:
                for e in res[4]:
                    entries[e[0]] = e[1]
        check(entries.get("retention.ms") == "3600000", f"retention.ms is {entries.get('retention.ms')}")
        await a.delete_topics([t])
        deadline = time.time() + PATIENCE
        while t in await a.list_topics():
            check(time.time() < deadline, "the topic is gone after delete")
            await asyncio.sleep(0.2)
    finally:
        await a.close()


# --- kcat ------------------------------------------------------------------------

def kcat(bootstrap, *args, stdin=None):
    r = subprocess.run(["kcat", "-b", bootstrap, *args], input=stdin, capture_output=True, timeout=PATIENCE * 2)
    check(r.returncode == 0, f"kcat {' '.join(args)}: {r.stderr.decode(errors='replace')[-300:]}")
    return r.stdout


def kcat_lines(bootstrap, topic, n):
    out = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-c", str(n), "-e",
               "-f", "%k|%s|%h\n", "-X", "fetch.wait.max.ms=100")
    return out.decode().splitlines()


def kc_produce_consume(bootstrap):
    t = ck_topic(bootstrap, "pc")
    lines = "".join(f"k{i}|v{i}\n" for i in range(20))
    kcat(bootstrap, "-P", "-t", t, "-K", "|", "-H", "src=kcat", "-X", "acks=all", stdin=lines.encode())
    got = kcat_lines(bootstrap, t, 20)
    check(got == [f"k{i}|v{i}|src=kcat" for i in range(20)], f"kcat read {got[:3]}...")


def kc_compression(bootstrap):
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        t = ck_topic(bootstrap, f"c-{codec}")
        lines = "".join(f"k{i}|{codec}{i}\n" for i in range(20))
        kcat(bootstrap, "-P", "-t", t, "-K", "|", "-z", codec, stdin=lines.encode())
        got = kcat_lines(bootstrap, t, 20)
        check([g.split("|")[1] for g in got] == [f"{codec}{i}" for i in range(20)], f"{codec} records read back")


def kc_idempotence(bootstrap):
    t = ck_topic(bootstrap, "idem")
    lines = "".join(f"v{i}\n" for i in range(50))
    kcat(bootstrap, "-P", "-t", t, "-X", "enable.idempotence=true", stdin=lines.encode())
    out = kcat(bootstrap, "-C", "-t", t, "-o", "beginning", "-e", "-f", "%o %s\n")
    got = out.decode().splitlines()
    check(got == [f"{i} v{i}" for i in range(50)], f"offsets and values {got[:3]}...")


def kc_group(bootstrap):
    """kcat's balanced consumer (-G): two members of one group read a topic
    of four partitions, together every record once."""
    t = ck_topic(bootstrap, "grp", partitions=4)
    ck_produce(bootstrap, t, [(f"k{i}".encode(), f"v{i}".encode(), []) for i in range(40)])
    group = unique("g")
    procs = [subprocess.Popen(["kcat", "-b", bootstrap, "-G", group, t, "-f", "%s\n", "-X", "auto.offset.reset=earliest",
                               "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) for _ in range(2)]
    time.sleep(10)
    for p in procs:
        p.terminate()
    outs = [p.communicate(timeout=PATIENCE)[0].decode().split() for p in procs]
    everything = outs[0] + outs[1]
    check(sorted(everything) == sorted(f"v{i}" for i in range(40)), f"read {len(everything)} records, 40 expected once")


IMPLEMENTATIONS = {
    ("confluent-kafka", "produce-consume"): ck_produce_consume,
    ("confluent-kafka", "compression"): ck_compression,
    ("confluent-kafka", "idempotence"): ck_idempotence,
    ("confluent-kafka", "group-classic"): lambda b: ck_group(b, "classic"),
    ("confluent-kafka", "group-kip848"): lambda b: ck_group(b, "consumer"),
    ("confluent-kafka", "transactions"): ck_transactions,
    ("confluent-kafka", "admin"): ck_admin_scenario,
    ("kafka-python", "produce-consume"): kp_produce_consume,
    ("kafka-python", "compression"): kp_compression,
    ("kafka-python", "idempotence"): kp_idempotence,
    ("kafka-python", "group-classic"): kp_group,
    ("kafka-python", "transactions"): kp_transactions,
    ("kafka-python", "admin"): kp_admin,
    ("aiokafka", "produce-consume"): aio(ak_produce_consume),
    ("aiokafka", "compression"): aio(ak_compression),
    ("aiokafka", "idempotence"): aio(ak_idempotence),
    ("aiokafka", "group-classic"): aio(ak_group),
    ("aiokafka", "transactions"): aio(ak_transactions),
    ("aiokafka", "admin"): aio(ak_admin),
    ("kcat", "produce-consume"): kc_produce_consume,
    ("kcat", "compression"): kc_compression,
    ("kcat", "idempotence"): kc_idempotence,
    ("kcat", "group-classic"): kc_group,
}


# --- kafkajs (node) --------------------------------------------------------------

def run_kafkajs(scenario, bootstrap):
    script = os.path.join(HERE, "kafkajs_scenarios.js")
    env = dict(os.environ, NODE_PATH=os.path.join(HERE, "..", "js", "node_modules"),
               KAFKAJS_NO_PARTITIONER_WARNING="1")
    r = subprocess.run(["node", script, bootstrap, scenario], capture_output=True, timeout=PATIENCE * 3, env=env)
    out = r.stdout.decode(errors="replace").strip()
    if r.returncode == 3:
        raise Unsupported(out)
    if r.returncode != 0:
        raise Failed(f"{out} {r.stderr.decode(errors='replace')[-400:]}".strip())
    return out or None


def describe_error(e):
    text = str(e) or type(e).__name__
    return json.dumps(text)[1:-1][:300]
