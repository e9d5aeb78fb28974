"""The admin command line (`aerostream topic|group|produce|consume|cluster`)
run as a real process against a real broker, checked against what real
Kafka clients (confluent-kafka, kafka-python) see of the same topics and
groups."""

import json
import subprocess
import time

from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from broker import binary, free_port
from helpers import consume


def cli(broker, *args, stdin=None, check=True, bootstrap=None, timeout=60):
    """Runs `aerostream ARGS --bootstrap ...`; returns the completed process."""
    cmd = [binary(), *args, "--bootstrap", bootstrap or broker.bootstrap]
    p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    if check:
        assert p.returncode == 0, f"{cmd} exited {p.returncode}: {p.stderr.decode(errors='replace')}"
    return p


def cli_json(broker, *args, **kw):
    return json.loads(cli(broker, *args, "--output", "json", **kw).stdout)


def assert_clean_failure(p, *needles):
    """A non-zero exit with one readable `error:` line naming the problem, no panic."""
    err = p.stderr.decode(errors="replace")
    assert p.returncode != 0, f"expected a failure, got exit 0 and {p.stdout!r}"
    assert err.startswith("error: "), err
    assert "panicked" not in err and "backtrace" not in err.lower(), err
    for n in needles:
        assert n in err, f"{n!r} not in {err!r}"


def test_topic_create_describe_alter_delete(broker, topic_name):
    created = cli_json(broker, "topic", "create", topic_name, "--partitions", "3",
                       "--replication-factor", "1", "--config", "retention.ms=3600000")
    assert created["name"] == topic_name and created["partitions"] == 3

    listed = {t["name"]: t for t in cli_json(broker, "topic", "list")}
    assert listed[topic_name]["partitions"] == 3
    assert listed[topic_name]["replication_factor"] == 1
    assert topic_name in cli(broker, "topic", "list").stdout.decode()

    desc = cli_json(broker, "topic", "describe", topic_name)
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    for p in desc["partitions"]:
        assert p["leader"] >= 0 and p["replicas"] == [p["leader"]] and p["isr"] == [p["leader"]]
    configs = {c["name"]: c for c in desc["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "dynamic-topic"
    table = cli(broker, "topic", "describe", topic_name).stdout.decode()
    assert "PARTITION" in table and "retention.ms" in table and "3600000" in table

    # a second create of the same name fails clearly
    assert_clean_failure(cli(broker, "topic", "create", topic_name, check=False), "already exists")

    cli(broker, "topic", "alter-config", topic_name, "--set", "retention.bytes=1048576",
        "--delete", "retention.ms")
    configs = {c["name"]: c for c in cli_json(broker, "topic", "describe", topic_name)["configs"]}
    assert configs["retention.bytes"]["value"] == "1048576"
    assert configs["retention.bytes"]["source"] == "dynamic-topic"
    assert configs["retention.ms"]["source"] != "dynamic-topic", "the deleted override is gone"
    assert_clean_failure(
        cli(broker, "topic", "alter-config", topic_name, "--set", "no.such.config=1", check=False),
        topic_name)

    assert cli(broker, "topic", "delete", topic_name).stdout.decode() == f"deleted topic {topic_name}\n"
    assert topic_name not in {t["name"] for t in cli_json(broker, "topic", "list")}
    assert_clean_failure(cli(broker, "topic", "describe", topic_name, check=False),
                         "unknown topic", topic_name)


def test_produced_lines_come_back_exactly(broker, topic_name):
    cli(broker, "topic", "create", topic_name, "--partitions", "4")
    lines = [f"line {i} ünïcode \t tab" for i in range(2000)] + ["", "last"]
    cli(broker, "produce", "--topic", topic_name, stdin=("\n".join(lines) + "\n").encode())

    out = cli(broker, "consume", "--topic", topic_name).stdout.decode()
    assert sorted(out.split("\n")[:-1]) == sorted(lines)

    # a real client reads the same records
    c, got = consume(broker, topic_name, len(lines))
    c.close()
    assert sorted(m.value().decode() for m in got) == sorted(lines)

    # within a partition: offsets dense from 0, lines in the order produced
    rows = [json.loads(r) for r in
            cli(broker, "consume", "--topic", topic_name, "--output", "json").stdout.splitlines()]
    order = {line: i for i, line in enumerate(lines)}
    busiest = max({r["partition"] for r in rows}, key=lambda p: sum(r["partition"] == p for r in rows))
    for part in {r["partition"] for r in rows}:
        mine = [r for r in rows if r["partition"] == part]
        assert [r["offset"] for r in mine] == list(range(len(mine)))
        assert [order[r["value"]] for r in mine] == sorted(order[r["value"]] for r in mine)
    text = cli(broker, "consume", "--topic", topic_name, "--partition", str(busiest),
               "--format", "%p %o %v").stdout.decode().splitlines()
    mine = [r for r in rows if r["partition"] == busiest]
    assert text == [f"{busiest} {r['offset']} {r['value']}" for r in mine]

    # --count and --from
    two = cli(broker, "consume", "--topic", topic_name, "--partition", str(busiest), "--from", "5",
              "--count", "2", "--format", "%o").stdout.decode()
    assert two == "5\n6\n"
    assert cli(broker, "consume", "--topic", topic_name, "--from", "latest").stdout == b""


def test_keys_route_like_the_java_partitioner_and_print_with_format(broker, topic_name):
    cli(broker, "topic", "create", topic_name, "--partitions", "3")
    records = [(f"user-{i % 5}", f"event {i}") for i in range(50)]
    cli(broker, "produce", "-t", topic_name, "--key-separator", "::", "--acks", "1",
        stdin="".join(f"{k}::{v}\n" for k, v in records).encode())
    rows = [json.loads(line) for line in
            cli(broker, "consume", "-t", topic_name, "--output", "json").stdout.splitlines()]
    assert sorted((r["key"], r["value"]) for r in rows) == sorted(records)
    # one key, one partition; per key, the order it was produced in
    for key in {k for k, _ in records}:
        mine = [r for r in rows if r["key"] == key]
        assert len({r["partition"] for r in mine}) == 1
        assert [r["value"] for r in mine] == [v for k, v in records if k == key]
    # a librdkafka producer with the Java client's partitioner agrees on each key's partition
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    delivered = {}
    for key in {k for k, _ in records}:
        p.produce(topic_name, key=key.encode(), value=b"x",
                  on_delivery=lambda err, m: delivered.__setitem__(m.key().decode(), m.partition()))
    assert p.flush(30) == 0
    assert delivered == {r["key"]: r["partition"] for r in rows}

    text = cli(broker, "consume", "-t", topic_name, "--count", "1", "--partition",
               str(rows[0]["partition"]), "--format", "%k=%v").stdout.decode()
    first = [r for r in rows if r["partition"] == rows[0]["partition"]][0]
    assert text == f"{first['key']}={first['value']}\n"


def test_acks_zero_delivers_too(broker, topic_name):
    cli(broker, "topic", "create", topic_name, "--partitions", "1")
    cli(broker, "produce", "-t", topic_name, "--acks", "0", stdin=b"a\nb\nc\n")
    deadline = time.time() + 10
    while time.time() < deadline:
        out = cli(broker, "consume", "-t", topic_name).stdout
        if out == b"a\nb\nc\n":
            break
        time.sleep(0.2)
    assert out == b"a\nb\nc\n"


def test_group_shows_a_real_consumers_members_offsets_and_lag(broker, topic_name):
    cli(broker, "topic", "create", topic_name, "--partitions", "2")
    cli(broker, "produce", "-t", topic_name, "--partition", "0",
        stdin="".join(f"a{i}\n" for i in range(30)).encode())
    cli(broker, "produce", "-t", topic_name, "--partition", "1",
        stdin="".join(f"b{i}\n" for i in range(12)).encode())
    group = f"g-{topic_name}"
    c = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                      client_id="cli-test-reader", auto_offset_reset="earliest",
                      enable_auto_commit=False)
    try:
        deadline = time.time() + 30
        while not c.assignment() and time.time() < deadline:
            c.poll(timeout_ms=200)
        assert len(c.assignment()) == 2
        c.commit({
            TopicPartition(topic_name, 0): OffsetAndMetadata(10, "", -1),
            TopicPartition(topic_name, 1): OffsetAndMetadata(12, "", -1),
        })

        assert group in {g["group"] for g in cli_json(broker, "group", "list")}
        desc = cli_json(broker, "group", "describe", group)
        assert desc["state"] == "Stable"
        assert desc["protocol_type"] == "consumer"
        [member] = desc["members"]
        assert member["client_id"] == "cli-test-reader"
        assert "127.0.0.1" in member["client_host"]
        assert member["assignment"] == [{"topic": topic_name, "partitions": [0, 1]}]
        offsets = {(o["topic"], o["partition"]): o for o in desc["offsets"]}
        assert offsets[(topic_name, 0)]["committed_offset"] == 10
        assert offsets[(topic_name, 0)]["log_end_offset"] == 30
        assert offsets[(topic_name, 0)]["lag"] == 20
        assert offsets[(topic_name, 1)]["committed_offset"] == 12
        assert offsets[(topic_name, 1)]["lag"] == 0
        assert offsets[(topic_name, 0)]["member_id"] == member["member_id"]

        table = cli(broker, "group", "describe", group).stdout.decode()
        assert "cli-test-reader" in table and "LAG" in table
        row = [line.split() for line in table.splitlines() if line.startswith(topic_name)]
        assert [topic_name, "0", "10", "30", "20", member["member_id"]] in row
    finally:
        c.close()

    # once the member left, the group is empty and its offsets remain
    desc = cli_json(broker, "group", "describe", group)
    assert desc["state"] == "Empty" and desc["members"] == []
    assert {(o["partition"], o["committed_offset"], o["lag"]) for o in desc["offsets"]} == {(0, 10, 20), (1, 12, 0)}


def test_cluster_info_names_this_broker(broker):
    info = cli_json(broker, "cluster", "info")
    assert info["cluster_id"]
    assert [(b["host"], b["port"]) for b in info["brokers"]] == [("127.0.0.1", broker.port)]
    assert info["controller_id"] == info["brokers"][0]["id"]
    assert isinstance(info["topics"], int)
    assert "BROKER" in cli(broker, "cluster", "info").stdout.decode()


def test_errors_are_one_clear_line_and_a_failing_exit(broker, topic_name):
    dead = f"127.0.0.1:{free_port()}"
    for args in (["topic", "list"], ["group", "list"], ["cluster", "info"],
                 ["consume", "-t", topic_name]):
        assert_clean_failure(cli(broker, *args, bootstrap=dead, check=False), "cannot reach", dead)
    assert_clean_failure(cli(broker, "produce", "-t", topic_name, bootstrap=dead, stdin=b"x\n",
                             check=False), "cannot reach")

    assert_clean_failure(cli(broker, "consume", "-t", topic_name, check=False),
                         "unknown topic", topic_name)
    assert_clean_failure(cli(broker, "topic", "delete", topic_name, check=False), topic_name)
    assert_clean_failure(cli(broker, "group", "describe", f"no-such-{topic_name}", check=False),
                         "does not exist")

    cli(broker, "topic", "create", topic_name, "--partitions", "2")
    assert_clean_failure(cli(broker, "produce", "-t", topic_name, "--partition", "5",
                             stdin=b"x\n", check=False), "no partition 5")
    assert_clean_failure(cli(broker, "consume", "-t", topic_name, "--partition", "5",
                             check=False), "no partition 5")


def test_follow_waits_for_records_produced_later(broker, topic_name):
    cli(broker, "topic", "create", topic_name, "--partitions", "2")
    reader = subprocess.Popen(
        [binary(), "consume", "-t", topic_name, "--follow", "--count", "3", "--format", "%v",
         "--bootstrap", broker.bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1)
        assert reader.poll() is None, "an empty topic does not end a --follow consumer"
        cli(broker, "produce", "-t", topic_name, stdin=b"one\ntwo\nthree\n")
        out, err = reader.communicate(timeout=30)
        assert reader.returncode == 0, err
        assert sorted(out.decode().splitlines()) == ["one", "three", "two"]
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()


def test_three_agents_leaders_everywhere_and_one_bootstrap(topic_name):
    """Requests go to each partition's leader and each group's coordinator,
    wherever they are, from one bootstrap address."""
    import shutil

    from cluster import VOTERS, Cluster, eventually

    c = Cluster()
    try:
        c.start_voters(timeout=90)
        first = c.agent(VOTERS[0])

        info = eventually("three brokers in cluster info",
                          lambda: (lambda i: i if len(i["brokers"]) == 3 else None)(
                              cli_json(first, "cluster", "info")), timeout=30)
        assert {(b["id"], b["rack"], b["port"]) for b in info["brokers"]} == {
            (n, f"rack-{n}", c.agent(n).port) for n in VOTERS}
        assert info["controller_id"] in VOTERS

        cli(first, "topic", "create", topic_name, "--partitions", "6", "--replication-factor", "3")

        def all_in_sync():
            desc = cli_json(first, "topic", "describe", topic_name)
            ok = all(sorted(p["isr"]) == list(VOTERS) and sorted(p["replicas"]) == list(VOTERS)
                     for p in desc["partitions"])
            return desc if ok else None
        desc = eventually("every replica in sync", all_in_sync, timeout=30)
        assert len({p["leader"] for p in desc["partitions"]}) > 1, "leaders spread over agents"

        lines = [f"k{i % 40}:v{i}" for i in range(600)]
        cli(first, "produce", "-t", topic_name, "-K", ":", stdin=("\n".join(lines) + "\n").encode())
        rows = [json.loads(r) for r in
                cli(first, "consume", "-t", topic_name, "--output", "json").stdout.splitlines()]
        assert sorted(f"{r['key']}:{r['value']}" for r in rows) == sorted(lines)
        assert len({r["partition"] for r in rows}) == 6

        # a group whose coordinator may be any agent, found from agent 1
        group = f"g-{topic_name}"
        consumer = KafkaConsumer(topic_name, bootstrap_servers=first.bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            got = 0
            deadline = time.time() + 60
            while got < len(lines) and time.time() < deadline:
                got += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
            assert got == len(lines)
            consumer.commit()
            assert group in {g["group"] for g in cli_json(first, "group", "list")}
            desc = cli_json(first, "group", "describe", group)
            assert len(desc["offsets"]) == 6
            assert all(o["lag"] == 0 and o["committed_offset"] == o["log_end_offset"]
                       for o in desc["offsets"])
            assert sum(o["committed_offset"] for o in desc["offsets"]) == len(lines)
        finally:
            consumer.close()
    finally:
        c.stop_all()
        shutil.rmtree(c.dir, ignore_errors=True)
