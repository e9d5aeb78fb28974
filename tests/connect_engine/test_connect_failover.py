"""The built-in Connect engine on three agents: the agent running the
object-storage sink's task is killed (SIGKILL) while a Datagen source
writes 10,000 records; the task goes on on another agent, and the bucket
ends up holding every record at least once with no gaps."""

import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from cluster import Cluster, VOTERS
from connect_rest import all_running, bucket_rows, call, eventually, seqs


def test_the_sink_task_moves_when_its_agent_is_killed_and_nothing_is_missing(s3):
    c = Cluster().start_voters()
    try:
        agents = {n: c.agent(n) for n in VOTERS}
        base = agents[1].connect_url
        bootstrap = ",".join(a.bootstrap for a in agents.values())
        topic = "clicks-" + uuid.uuid4().hex[:6]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics(
            [NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
        code, body = call(base, "POST", "/connectors", {"name": "s3", "config": {
            "connector.class": "ObjectStoreSink", "topics": topic, "store.url": "s3://sink/moved",
            "format": "parquet", "flush.size": "200", "rotate.schedule.interval.ms": "1000"}})
        assert code == 201, body
        first = eventually("the sink running", lambda: all_running(base, "s3", 1))
        worker = first["tasks"][0]["worker_id"]
        victim = next(n for n, a in agents.items() if a.connect_url.endswith(":" + worker.rsplit(":", 1)[1]))
        # the source on another agent's API: every agent answers the same
        other = next(a for n, a in agents.items() if n != victim)
        code, body = call(other.connect_url, "POST", "/connectors", {"name": "gen", "config": {
            "connector.class": "DatagenSource", "kafka.topic": topic, "max.records": "10000",
            "max.interval": "1"}})
        assert code == 201, body
        # each file (by name and ETag) is read once, however often polled
        files = {}
        eventually("a fifth of the records written to the bucket",
                   lambda: len(bucket_rows(s3, "sink", "moved/", files)) >= 2000, timeout=120, every=1)
        agents[victim].kill9()
        moved = eventually("the sink's task running on another agent", lambda: (
            s := all_running(other.connect_url, "s3", 1)) and s["tasks"][0]["worker_id"] != worker and s,
            timeout=120)
        assert moved["tasks"][0]["worker_id"] != worker
        rows = eventually("every record in the bucket", lambda: (
            r := bucket_rows(s3, "sink", "moved/", files)) and set(seqs(r)) >= set(range(10000)) and r,
            timeout=240, every=1)
        got = seqs(rows)
        assert set(got) == set(range(10000)), "each record at least once, no gaps, nothing else"
        print(f"rows {len(rows)} for 10000 records ({len(rows) - 10000} written twice)")
    finally:
        c.stop_all()
