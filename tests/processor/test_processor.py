"""`aerostream process` end to end: 200,000 JSON events with known event
times on a 4-partition topic, counted per key in 1-second tumbling windows
into Parquet files on a real S3 server (moto); the files, read with
pyarrow, hold each (key, window) exactly once with the count computed here
from the events produced, also after the processor is killed with SIGKILL
mid-run (leaving a data file no checkpoint committed) and restarted, and
after the broker is killed and restarted under it; a bad pipeline file is
refused with the bad key named."""

import collections
import io
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time

import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import committed
import servers
from broker import Broker, binary
from process import Process

EVENTS = 200_000
KEYS = 50
# not a multiple of the window size: windows are aligned to the epoch
BASE = 1_700_000_000_123
PREFIX = "counts/"


def produce(bootstrap):
    """Produces the events; returns the expected count per (key, window start)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("events", 4, 1)])["events"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "queue.buffering.max.messages": 400_000, "enable.idempotence": True})
    rng = random.Random(36)
    expected = collections.Counter()
    for i in range(EVENTS):
        key = f"key-{i % KEYS}"
        # 5 ms apart, up to 4 ms of jitter: every key's times increase
        ts = BASE + i * 5 + rng.randrange(5)
        expected[(key, ts // 1000 * 1000)] += 1
        producer.produce("events", key=key, value=json.dumps({"k": key, "ts": ts}))
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0, "every event delivered"
    return expected


class Processor(Process):
    def __init__(self, bootstrap, s3, checkpoint_interval, state=None):
        """`state`: the local state store's folder (one of its own by default)."""
        super().__init__(lambda d: f"""
name: counts
source: {{bootstrap: "{bootstrap}", topic: events, format: json, event_time: ts, key: k, idle_timeout: 3s}}
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}]
sink: {{type: parquet, url: "s3://out/counts"}}
checkpoint_interval: {checkpoint_interval}
state: {{dir: "{state or os.path.join(d, 'state')}"}}
""", s3, "processor")


class Output:
    """What the processor committed: its latest checkpoint and the rows of
    the files it lists (each file fetched once: committed files never change)."""

    def __init__(self, s3):
        self.client = servers.s3_client(s3)
        self.files = {}

    def keys(self, prefix):
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket="out", Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def checkpoint(self):
        """The latest committed state (its base and deltas put together)."""
        folder = PREFIX + "_checkpoints/"
        return committed.latest(
            lambda: [k[len(folder):] for k in self.keys(folder)],
            lambda name: self.client.get_object(Bucket="out", Key=folder + name)["Body"].read())

    def rows(self, names):
        rows = []
        for name in names:
            if name not in self.files:
                body = self.client.get_object(Bucket="out", Key=PREFIX + name)["Body"].read()
                self.files[name] = pq.read_table(io.BytesIO(body)).to_pylist()
            rows.extend(self.files[name])
        return rows

    def committed_rows(self):
        c = self.checkpoint()
        return (c, self.rows(c["files"])) if c else (None, [])


def wait_for(what, check, timeout, proc):
    deadline = time.time() + timeout
    while time.time() < deadline:
        proc.alive()
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}:\n{proc.log()[-4000:]}")


def assert_exact(out, expected):
    checkpoint, rows = out.committed_rows()
    seen = collections.Counter((r["key"], r["window_start"]) for r in rows)
    duplicates = [k for k, n in seen.items() if n > 1]
    assert not duplicates, f"windows written twice: {duplicates[:5]}"
    got = {(r["key"], r["window_start"]): r["n"] for r in rows}
    missing = set(expected) - set(got)
    assert not missing, f"{len(missing)} windows missing, e.g. {sorted(missing)[:5]}"
    wrong = {k: (got[k], expected[k]) for k in expected if got[k] != expected[k]}
    assert not wrong, f"{len(wrong)} wrong counts (got, expected), e.g. {list(wrong.items())[:5]}"
    assert set(got) == set(expected), "no window that had no event"
    assert all(r["window_end"] == r["window_start"] + 1000 for r in rows)
    # every data file of the prefix is a committed one: listing the prefix
    # reads the same rows as the checkpoint's list
    data = sorted(k[len(PREFIX):] for k in out.keys(PREFIX) if k.endswith(".parquet"))
    assert data == sorted(checkpoint["files"]), (data, checkpoint["files"])
    assert sum(checkpoint["offsets"].values()) == EVENTS


def complete(out, expected):
    checkpoint, rows = out.committed_rows()
    return checkpoint is not None and len(rows) >= len(expected)


def test_counts_per_key_and_window_equal_the_events(s3):
    b = Broker().start()
    processors = []
    try:
        expected = produce(b.bootstrap)
        out = Output(s3)
        p = Processor(b.bootstrap, s3, "1s").start()
        processors.append(p)
        wait_for("every window in the output", lambda: complete(out, expected), 600, p)
        assert_exact(out, expected)
        # the periodic progress line counts every record read
        wait_for("a progress line with every record", lambda: f"records={EVENTS} " in p.log(), 60, p)
        assert p.stop() == 0, p.log()
        assert "taking a last checkpoint" in p.log()
    finally:
        for q in processors:
            q.cleanup()
        b.stop()


def test_killed_mid_run_and_restarted_the_output_is_still_exact(s3):
    # one host: the restarts find the local state store of the run before
    state = tempfile.mkdtemp(prefix="aerostream-process-state-")
    b = Broker().start()
    processors = []
    try:
        expected = produce(b.bootstrap)
        out = Output(s3)
        p = Processor(b.bootstrap, s3, "300ms", state).start()
        processors.append(p)
        # some windows committed, not all
        first = wait_for("a checkpoint with a data file",
                         lambda: (c := out.checkpoint()) and c["files"] and c, 300, p)
        p.kill9()
        at_kill, rows = out.committed_rows()
        print(f"killed at epoch {at_kill['epoch']}: {sum(at_kill['offsets'].values())} events read, "
              f"{len(rows)} of {len(expected)} windows committed")
        assert at_kill["epoch"] >= first["epoch"] and 0 < len(rows) < len(expected), \
            "killed mid-run, after a checkpoint and before the output was complete"
        # a crash between a data file and its checkpoint leaves a file no
        # checkpoint lists, holding windows the restart writes again: one
        # where the next epoch's file goes (the restart may overwrite it),
        # one further on (only the start's clean-up removes it)
        body = out.client.get_object(Bucket="out", Key=PREFIX + at_kill["files"][-1])["Body"].read()
        for epoch in (at_kill["epoch"] + 1, at_kill["epoch"] + 1000):
            out.client.put_object(Bucket="out", Key=PREFIX + f"part-{epoch:020}.parquet", Body=body)

        p = Processor(b.bootstrap, s3, "300ms", state).start()
        processors.append(p)
        wait_for("every window in the output after the restart", lambda: complete(out, expected), 600, p)
        assert_exact(out, expected)
        assert "resuming from the latest checkpoint" in p.log()
        assert p.stop() == 0, p.log()
        # after a clean stop and a start with nothing new, nothing changes
        before = out.checkpoint()
        p = Processor(b.bootstrap, s3, "300ms", state).start()
        processors.append(p)
        wait_for("the restart to resume", lambda: "resuming" in p.log(), 120, p)
        # a clean stop's last checkpoint is in the local store: nothing downloaded
        assert "from_local_state=true" in p.log(), p.log()
        time.sleep(1)
        assert p.stop() == 0, p.log()
        assert_exact(out, expected)
        assert out.checkpoint()["files"] == before["files"]
    finally:
        for q in processors:
            q.cleanup()
        shutil.rmtree(state, ignore_errors=True)
        b.stop()


def test_over_the_native_protocol_killed_and_restarted_the_output_is_exact(s3):
    """The same pipeline reading over AeroStream's native protocol (push
    subscriptions with credit): killed mid-run and restarted, every window
    is still in the output exactly once."""
    b = Broker().start()
    processors = []
    try:
        expected = produce(b.bootstrap)
        out = Output(s3)
        p = Processor(b.native_url, s3, "300ms").start()
        processors.append(p)
        wait_for("a checkpoint with a data file", lambda: (c := out.checkpoint()) and c["files"], 300, p)
        p.kill9()
        _, rows = out.committed_rows()
        assert len(rows) < len(expected), "killed before the output was complete"
        p = Processor(b.native_url, s3, "300ms").start()
        processors.append(p)
        wait_for("every window in the output", lambda: complete(out, expected), 600, p)
        assert_exact(out, expected)
        assert "resuming from the latest checkpoint" in p.log()
        assert p.stop() == 0, p.log()
    finally:
        for q in processors:
            q.cleanup()
        b.stop()


def test_a_broker_restarted_mid_run_is_reconnected_to_and_the_output_stays_exact(s3):
    b = Broker().start()
    processors = []
    try:
        expected = produce(b.bootstrap)
        out = Output(s3)
        p = Processor(b.bootstrap, s3, "300ms").start()
        processors.append(p)
        wait_for("a checkpoint with a data file", lambda: (c := out.checkpoint()) and c["files"], 300, p)
        b.kill9()
        b.start()
        wait_for("every window in the output", lambda: complete(out, expected), 600, p)
        assert_exact(out, expected)
        assert "fetch from broker" in p.log(), "the processor saw the broker go"
        assert p.stop() == 0, p.log()
    finally:
        for q in processors:
            q.cleanup()
        b.stop()


def test_a_bad_pipeline_file_is_refused_naming_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("""
name: counts
source: {bootstrap: "127.0.0.1:9092", topic: events, format: json, event_time: ts, key: k}
window: {type: tumbling, size: 1s, hop: 500ms}
aggregates: [{op: count, as: n}]
sink: {type: parquet, url: "s3://bucket/counts"}
""")
    run = subprocess.run([binary(), "process", "--pipeline", str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1
    assert "unknown field `hop`" in run.stderr, run.stderr
    bad.write_text(bad.read_text().replace("hop: 500ms", "slide: 500ms"))
    run = subprocess.run([binary(), "process", "--pipeline", str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1
    assert "window.slide: a tumbling window does not take it" in run.stderr, run.stderr
    bad.write_text(bad.read_text().replace(", slide: 500ms", "").replace("{op: count, as: n}", "{op: sum, as: n}"))
    run = subprocess.run([binary(), "process", "--pipeline", str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1
    assert "aggregates[0].field" in run.stderr, run.stderr


def test_sigterm_while_the_broker_is_unreachable_stops_at_once(tmp_path):
    closed_port = servers.free_port()
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"""
name: counts
source: {{bootstrap: "127.0.0.1:{closed_port}", topic: events, format: json, event_time: ts}}
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}]
sink: {{type: parquet, url: "file://{tmp_path}/out"}}
""")
    log = tmp_path / "log"
    with open(log, "w") as f:
        proc = subprocess.Popen([binary(), "process", "--pipeline", str(pipeline)], stdout=f,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while "retrying" not in log.read_text():
            assert proc.poll() is None and time.time() < deadline, log.read_text()
            time.sleep(0.1)
        assert "cannot reach a broker" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
