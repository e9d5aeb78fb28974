"""A pipeline run by several `aerostream process` workers sharing the
source's partitions through leases the metastore keeps (each worker
heartbeats to an agent's `/v1/processors` API): two workers split four
partitions; one is killed with SIGKILL mid-run and the other resumes its
partitions from their last checkpoints once the lease runs out; a third
joins and is handed partitions the second checkpoints and releases; the
Parquet output, read with pyarrow, holds each (key, window) exactly once
with the count computed from the events produced."""

import collections
import io
import json
import os
import random
import time
import urllib.request

import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker import Broker
from process import Process
import servers

KEYS = 40
BASE = 1_700_000_000_000
PARTITIONS = 4


class Events:
    """Produces events keyed by their key (so each key is in one
    partition); counts what it produced per (key, window)."""

    def __init__(self, bootstrap):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("events", PARTITIONS, 1)])["events"].result(30)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                  "enable.idempotence": True})
        self.rng = random.Random(37)
        self.expected = collections.Counter()
        self.i = 0
        self.t = BASE

    def produce(self, n):
        """n events 4 ms apart, starting in a window after every earlier
        one: a partition idle between two batches has closed its windows,
        and an event for one of them would be late."""
        start = (self.t // 1000 + 2) * 1000
        for j in range(n):
            key = f"key-{self.i % KEYS}"
            ts = start + j * 4 + self.rng.randrange(4)
            self.t = max(self.t, ts)
            self.expected[(key, ts // 1000 * 1000)] += 1
            self.producer.produce("events", key=key, value=json.dumps({"k": key, "ts": ts}))
            self.i += 1
            if self.i % 5_000 == 0:
                self.producer.poll(0)
        assert self.producer.flush(60) == 0, "every event delivered"


class Worker(Process):
    def __init__(self, name, bootstrap, coordinators, s3):
        urls = ", ".join(f'"{u}"' for u in coordinators)
        super().__init__(lambda d: f"""
name: counts
source: {{bootstrap: "{bootstrap}", topic: events, format: json, event_time: ts, key: k, idle_timeout: 2s}}
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}]
sink: {{type: parquet, url: "s3://out/counts"}}
checkpoint_interval: 300ms
state: {{dir: "{os.path.join(d, 'state')}"}}
distribution: {{coordinators: [{urls}], worker: {name}, lease_ttl: 3s}}
""", s3, name)


def leases(http_port):
    """Partition -> worker, as the agent's REST API shows the pipeline."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v1/processors", timeout=5) as r:
        for p in json.load(r):
            if p["pipeline"] == "counts":
                return {int(k): v for k, v in p["leases"].items()}
    return {}


def wait_for(what, check, timeout, workers):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for w in workers:
            w.alive()
        got = check()
        if got:
            return got
        time.sleep(0.2)
    logs = "\n".join(f"--- {w.name}\n{w.log()[-3000:]}" for w in workers)
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


class Output:
    def __init__(self, s3):
        self.client = servers.s3_client(s3)

    def data_files(self):
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket="out", Prefix="counts/partitions/")
        return sorted(o["Key"] for page in pages for o in page.get("Contents", [])
                      if o["Key"].endswith(".parquet") and "/late/" not in o["Key"])

    def rows(self):
        rows = []
        for key in self.data_files():
            body = self.client.get_object(Bucket="out", Key=key)["Body"].read()
            rows.extend(pq.read_table(io.BytesIO(body)).to_pylist())
        return rows


def test_workers_share_partitions_and_a_killed_ones_are_resumed_exactly(s3):
    b = Broker().start()
    workers = []
    try:
        events = Events(b.bootstrap)
        events.produce(20_000)
        coordinators = [f"http://127.0.0.1:{b.http_port}"]
        w1 = Worker("w1", b.bootstrap, coordinators, s3).start()
        w2 = Worker("w2", b.bootstrap, coordinators, s3).start()
        workers += [w1, w2]
        split = wait_for("the partitions split two and two",
                         lambda: (l := leases(b.http_port)) and len(l) == PARTITIONS
                         and collections.Counter(l.values()) == {"w1": 2, "w2": 2} and l,
                         120, workers)
        out = Output(s3)
        wait_for("output from both workers' partitions",
                 lambda: {k.split("/")[2] for k in out.data_files()} >= {str(p) for p in split},
                 120, workers)
        events.produce(20_000)
        w1.kill9()
        workers.remove(w1)
        events.produce(20_000)
        wait_for("w2 holding every partition after w1's leases ran out",
                 lambda: set(leases(b.http_port).values()) == {"w2"}
                 and len(leases(b.http_port)) == PARTITIONS, 60, workers)
        # w2 took w1's partitions over (resuming from w1's checkpoints)
        took = [line for line in w2.log().splitlines() if "taking the partition" in line]
        for p in (p for p, w in split.items() if w == "w1"):
            assert any(f"partition={p} " in line for line in took), (p, took)
        w3 = Worker("w3", b.bootstrap, coordinators, s3).start()
        workers.append(w3)
        wait_for("w3 handed two partitions",
                 lambda: collections.Counter(leases(b.http_port).values()) == {"w2": 2, "w3": 2},
                 60, workers)
        assert "giving the partition up" in w2.log()
        events.produce(20_000)
        expected = events.expected
        # the last windows close once every partition has been idle
        wait_for("every window in the output",
                 lambda: len(out.rows()) >= len(expected), 300, workers)
        time.sleep(1)
        rows = out.rows()
        seen = collections.Counter((r["key"], r["window_start"]) for r in rows)
        twice = [k for k, n in seen.items() if n > 1]
        assert not twice, f"windows written twice: {twice[:5]}"
        got = {(r["key"], r["window_start"]): r["n"] for r in rows}
        missing = set(expected) - set(got)
        assert not missing, f"{len(missing)} windows missing, e.g. {sorted(missing)[:5]}"
        wrong = {k: (got[k], expected[k]) for k in expected if got[k] != expected[k]}
        assert not wrong, f"{len(wrong)} wrong counts (got, expected): {list(wrong.items())[:5]}"
        assert set(got) == set(expected)
        for w in (w2, w3):
            assert w.stop() == 0, w.log()[-3000:]
            assert "stopped and left" in w.log()
        assert leases(b.http_port) == {}, "stopped workers hold nothing"
    finally:
        for w in workers:
            w.cleanup()
        b.stop()


def test_a_heartbeat_the_metastore_refuses_is_answered_with_the_reason():
    """A time to live out of range is a 400 naming it."""
    b = Broker().start()
    try:
        body = json.dumps({"worker": "w", "ttl_ms": 10, "partitions": [0]}).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{b.http_port}/v1/processors/counts/heartbeat",
            data=body, headers={"content-type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=5)
            raise AssertionError("a 10 ms time to live was accepted")
        except urllib.error.HTTPError as e:
            assert e.code == 400
            assert "time to live" in json.load(e)["message"]
    finally:
        b.stop()
