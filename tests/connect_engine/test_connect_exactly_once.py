"""Exactly-once source delivery (KIP-618) on three agents: a Datagen
source with `exactly.once.support=required` writes 60,000 records while the
agent running its task is killed (SIGKILL) a sixth of the way in. The task goes on on another
agent from the offset its last committed transaction carried, and a
read_committed consumer reads every seq exactly once: nothing lost, nothing
written twice."""

import json
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import Cluster, VOTERS
from connect_rest import all_running, call, eventually

RECORDS = 60_000
PARTITIONS = 3


def read_committed(bootstrap, topic):
    """Every committed record's seq, read from the start of each partition
    up to its last stable offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-" + uuid.uuid4().hex[:6],
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got, done = [], set()
        while len(done) < PARTITIONS:
            m = c.poll(10)
            assert m is not None, f"no record nor end of partition in 10 s ({len(got)} read)"
            if m.error():
                assert m.error().code() == -191, m.error()  # _PARTITION_EOF
                done.add(m.partition())
                continue
            got.append(json.loads(m.value())["seq"])
        return got
    finally:
        c.close()


def test_an_exactly_once_source_killed_mid_run_writes_each_record_once():
    c = Cluster().start_voters()
    try:
        agents = {n: c.agent(n) for n in VOTERS}
        base = agents[1].connect_url
        bootstrap = ",".join(a.bootstrap for a in agents.values())
        topic = "eos-" + uuid.uuid4().hex[:6]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics(
            [NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(60)

        code, body = call(base, "PUT", "/connector-plugins/DatagenSource/config/validate", {
            "name": "gen", "connector.class": "DatagenSource", "kafka.topic": topic,
            "exactly.once.support": "required", "transaction.boundary": "interval"})
        assert code == 200 and body["error_count"] == 1, body
        refused = [v for v in body["configs"] if v["value"]["errors"]]
        assert refused[0]["value"]["name"] == "transaction.boundary", refused

        code, body = call(base, "POST", "/connectors", {"name": "gen", "config": {
            "connector.class": "DatagenSource", "kafka.topic": topic, "max.records": str(RECORDS),
            "max.interval": "0", "exactly.once.support": "required"}})
        assert code == 201, body
        first = eventually("the source running", lambda: all_running(base, "gen", 1))
        worker = first["tasks"][0]["worker_id"]
        victim = next(n for n, a in agents.items() if a.connect_url.endswith(":" + worker.rsplit(":", 1)[1]))
        other = next(a for n, a in agents.items() if n != victim)
        def committed_seq():
            code, body = call(other.connect_url, "GET", "/connectors/gen/offsets")
            assert code == 200, body
            return max([o["offset"]["seq"] for o in body["offsets"]] or [0])
        eventually("a sixth of the records committed", lambda: committed_seq() >= RECORDS // 6, timeout=120)
        agents[victim].kill9()
        at_kill = committed_seq()
        assert at_kill < RECORDS, "the source finished before its agent was killed: make RECORDS larger"
        moved = eventually("the source's task running on another agent", lambda: (
            s := all_running(other.connect_url, "gen", 1)) and s["tasks"][0]["worker_id"] != worker and s,
            timeout=120)
        assert moved["tasks"][0]["worker_id"] != worker

        try:
            eventually("the source's committed offset at the last record",
                       lambda: committed_seq() >= RECORDS, timeout=180)
        except AssertionError as e:
            raise AssertionError(f"{e}; committed {committed_seq()} (at the kill {at_kill}); "
                                 f"status {call(other.connect_url, 'GET', '/connectors/gen/status')}") from e
        got = read_committed(other.bootstrap, topic)
        dupes = len(got) - len(set(got))
        assert dupes == 0, f"{dupes} records written twice"
        assert sorted(got) == list(range(RECORDS)), \
            f"{RECORDS - len(set(got) & set(range(RECORDS)))} records missing"
    finally:
        c.stop_all()
