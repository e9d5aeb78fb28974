"""`aerostream process` on Avro and fixed binary values, end to end.

Avro: two versions of a tick schema registered in the agent's own schema
registry (Confluent's REST API), ticks written in the Confluent wire format
(byte 0, the schema id, the Avro binary encoding, by fastavro) under both,
with values that cannot be used among them (an id the registry does not
know, bytes cut short, a value not in the wire format); the processor
fetches the schemas by id, counts and sums per symbol in 1-second windows
the ticks an `any` filter keeps, into Parquet files on a real S3 server
(moto). Fixed: big-endian ticks of a declared layout, with short values
among them. The rows, read with pyarrow, equal what is computed here from
the records produced, and the progress line counts the skipped ones.
A registry that cannot be reached is retried and no record skipped
meanwhile; SIGTERM still stops the processor, its last checkpoint not past
the records it could not decode, and a start with the registry back
counts every one. Avro without a registry, and bad layouts, are refused."""

import collections
import io
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile
import time
import urllib.request

import fastavro
import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import committed
import servers
from broker import Broker, binary

TICKS = 20_000
SYMBOLS = 8
BASE = 1_700_000_000_321
STEP = 3  # ms between ticks

TICK_V1 = {
    "type": "record", "name": "Tick", "namespace": "aerostream.test",
    "fields": [
        {"name": "sym", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": "double"},
        {"name": "size", "type": ["null", "int"]},
    ],
}
# a compatible second version: a new nullable field with a default
TICK_V2 = dict(TICK_V1, fields=TICK_V1["fields"] + [
    {"name": "venue", "type": ["null", "string"], "default": None}])


def register(registry_url, subject, schema):
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    req = urllib.request.Request(f"{registry_url}/subjects/{subject}/versions", data=body, method="POST",
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())["id"]


def avro_value(schema_id, parsed, record):
    out = io.BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(out, parsed, record)
    return out.getvalue()


def create_topic(bootstrap, name):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(30)


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for v in values:
        p.produce(topic, value=v)
        p.poll(0)
    assert p.flush(120) == 0, "every record delivered"


class Run:
    """A processor running `pipeline` (text with {bootstrap} and {prefix})
    into the bucket `out` under `prefix`."""

    def __init__(self, s3, pipeline):
        self.s3 = servers.s3_client(s3)
        self.dir = tempfile.mkdtemp(prefix="aerostream-formats-")
        path = os.path.join(self.dir, "p.yaml")
        with open(path, "w") as f:
            f.write(pipeline)
        self.log_path = os.path.join(self.dir, "log")
        env = dict(os.environ, **servers.s3_env(s3), RUST_LOG="info")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([binary(), "process", "--pipeline", path], stdout=log,
                                         stderr=subprocess.STDOUT, env=env)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def committed(self, prefix):
        """The rows of the files the latest checkpoint lists, and its offsets read."""
        dir_ = prefix + "_checkpoints/"

        def names():
            pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket="out", Prefix=dir_)
            return [o["Key"][len(dir_):] for page in pages for o in page.get("Contents", [])]

        def read(name):
            return self.s3.get_object(Bucket="out", Key=dir_ + name)["Body"].read()

        c = committed.latest(names, read)
        if c is None:
            return [], 0
        rows = []
        for name in c["files"]:
            body = self.s3.get_object(Bucket="out", Key=prefix + name)["Body"].read()
            rows.extend(pq.read_table(io.BytesIO(body)).to_pylist())
        return rows, sum(c["offsets"].values())

    def wait_for_rows(self, prefix, records, windows, timeout=300):
        """Waits until every record is read and `windows` rows are committed."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, f"the processor exited:\n{self.log()}"
            rows, read = self.committed(prefix)
            if read == records and len(rows) >= windows:
                return rows
            time.sleep(0.3)
        raise AssertionError(f"timed out: {self.committed(prefix)[1]} of {records} records read\n"
                             f"{self.log()[-4000:]}")

    def stop(self):
        """SIGTERM, which takes a last checkpoint; the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        return self.proc.returncode

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def by_window(rows):
    seen = collections.Counter((r["key"], r["window_start"]) for r in rows)
    assert not [k for k, n in seen.items() if n > 1], "a window written twice"
    assert all(r["window_end"] == r["window_start"] + 1000 for r in rows)
    return {(r["key"], r["window_start"]): (r["n"], r["volume"]) for r in rows}


def test_avro_records_are_counted_per_window_with_schemas_from_the_registry(s3):
    b = Broker().start()
    run = None
    try:
        v1 = register(b.registry_url, "ticks-value", TICK_V1)
        v2 = register(b.registry_url, "ticks-value", TICK_V2)
        assert v1 != v2
        parsed = {v1: fastavro.parse_schema(TICK_V1), v2: fastavro.parse_schema(TICK_V2)}
        rng = random.Random(41)
        values, expected = [], collections.defaultdict(lambda: [0, None])
        for i in range(TICKS):
            ts = BASE + i * STEP
            sym = f"S{rng.randrange(SYMBOLS)}"
            size = rng.choice([None, 50, 100, 500, 900])
            tick = {"sym": sym, "ts": ts, "price": 100 + rng.random(), "size": size}
            schema_id = v1 if i % 2 else v2
            if schema_id == v2:
                tick["venue"] = rng.choice([None, "X", "Y"])
            values.append(avro_value(schema_id, parsed[schema_id], tick))
            # filter: [{any: [{field: size, op: ge, value: 500}, {field: venue, op: eq, value: X}]}]
            if (size is not None and size >= 500) or tick.get("venue") == "X":
                w = expected[(sym, ts // 1000 * 1000)]
                w[0] += 1
                if size is not None:  # a window no kept tick had a size of sums to null
                    w[1] = (w[1] or 0) + size
        good = values[:]
        unknown = avro_value(v2 + 1000, parsed[v1], {"sym": "S0", "ts": BASE, "price": 1.0, "size": 900})
        cut = values[0][:7]  # inside the symbol's string
        bad = [unknown, cut, b'{"sym": "S0", "ts": 1}', b""]
        for at, v in zip((10, 500, 9_000, 15_000), bad):
            values.insert(at, v)

        create_topic(b.bootstrap, "avro-ticks")
        produce(b.bootstrap, "avro-ticks", values)
        run = Run(s3, f"""
name: avro-counts
source: {{bootstrap: "{b.bootstrap}", topic: avro-ticks, format: avro, registry: "{b.registry_url}",
          event_time: ts, key: sym, idle_timeout: 2s}}
window: {{type: tumbling, size: 1s}}
filter: [{{any: [{{field: size, op: ge, value: 500}}, {{field: venue, op: eq, value: X}}]}}]
aggregates: [{{op: count, as: n}}, {{op: sum, field: size, as: volume}}]
sink: {{type: parquet, url: "s3://out/avro"}}
checkpoint_interval: 500ms
""")
        rows = run.wait_for_rows("avro/", len(values), len(expected))
        got = by_window(rows)
        want = {k: (n, None if v is None else float(v)) for k, (n, v) in expected.items()}
        wrong = {k: (got.get(k), want[k]) for k in want if got.get(k) != want[k]}
        assert not wrong, f"{len(wrong)} windows differ (got, expected), e.g. {list(wrong.items())[:5]}"
        assert set(got) == set(want), "no window that had no kept tick"
        assert len(good) == TICKS
        deadline = time.time() + 30
        while f"skipped={len(bad)}" not in run.log() and time.time() < deadline:
            time.sleep(0.5)
        log = run.log()
        assert f"skipped={len(bad)}" in log, log[-3000:]
        assert "the schema registry does not know it" in log, log[-3000:]
        assert run.stop() == 0, run.log()
    finally:
        if run is not None:
            run.cleanup()
        b.stop()


def test_fixed_binary_records_are_read_by_layout(s3):
    b = Broker().start()
    run = None
    try:
        rng = random.Random(43)
        values, expected = [], collections.defaultdict(lambda: [0, 0])
        for i in range(TICKS):
            ts = BASE + i * STEP
            sym = f"S{rng.randrange(SYMBOLS)}"
            size = rng.choice([10, 100, 300])
            # big-endian: i64 ts, 8 bytes of symbol padded with NULs or spaces, f64 price, i32 size
            pad = b"\0" if i % 2 else b" "
            values.append(struct.pack(">q8sdi", ts, sym.encode().ljust(8, pad), 50 + rng.random(), size))
            w = expected[(sym, ts // 1000 * 1000)]
            w[0] += 1
            w[1] += size
        short = [values[3][:27], b"", b"\x00" * 12]
        for at, v in zip((7, 7_000, 19_000), short):
            values.insert(at, v)

        create_topic(b.bootstrap, "bin-ticks")
        produce(b.bootstrap, "bin-ticks", values)
        run = Run(s3, f"""
name: fixed-counts
source:
  bootstrap: "{b.bootstrap}"
  topic: bin-ticks
  format: fixed
  endian: big
  layout: [{{name: ts, type: i64}}, {{name: sym, type: "str:8"}}, {{name: price, type: f64}}, {{name: size, type: i32}}]
  event_time: ts
  key: sym
  idle_timeout: 2s
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}, {{op: sum, field: size, as: volume}}, {{op: wavg, field: price, weight: size, as: vwap}}]
sink: {{type: parquet, url: "s3://out/fixed"}}
checkpoint_interval: 500ms
""")
        rows = run.wait_for_rows("fixed/", len(values), len(expected))
        got = by_window(rows)
        want = {k: (n, float(v)) for k, (n, v) in expected.items()}
        wrong = {k: (got.get(k), want[k]) for k in want if got.get(k) != want[k]}
        assert not wrong, f"{len(wrong)} windows differ (got, expected), e.g. {list(wrong.items())[:5]}"
        assert set(got) == set(want)
        assert all(50 <= r["vwap"] <= 51 for r in rows)
        deadline = time.time() + 30
        while f"skipped={len(short)}" not in run.log() and time.time() < deadline:
            time.sleep(0.5)
        assert f"skipped={len(short)}" in run.log(), run.log()[-3000:]
        assert "shorter than the layout's 28" in run.log()
        assert run.stop() == 0, run.log()
    finally:
        if run is not None:
            run.cleanup()
        b.stop()


def test_avro_without_a_registry_and_a_bad_layout_are_refused(tmp_path):
    p = tmp_path / "p.yaml"
    base = """
name: t
source: {bootstrap: "127.0.0.1:9092", topic: t, format: FORMAT, event_time: ts, key: k}
window: {type: tumbling, size: 1s}
aggregates: [{op: sum, field: x, as: s}]
sink: {type: parquet, url: "s3://bucket/t"}
"""
    cases = [
        ("avro", "source.registry: format: avro needs the schema registry's URL"),
        ("fixed, layout: [{name: ts, type: i64}, {name: k, type: 'str:4'}]",
         'source.layout: has no field "x" (aggregates)'),
        ("fixed, layout: [{name: ts, type: i64}, {name: k, type: 'string'}, {name: x, type: f64}]",
         'unknown field type "string"'),
    ]
    for fmt, message in cases:
        p.write_text(base.replace("FORMAT", fmt))
        r = subprocess.run([binary(), "process", "--pipeline", str(p)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 1, r
        assert message in r.stderr, r.stderr


def test_an_unreachable_registry_is_waited_for_and_nothing_is_skipped_meanwhile(tmp_path):
    b = Broker().start()
    procs = []
    try:
        schema_id = register(b.registry_url, "few-value", TICK_V1)
        parsed = fastavro.parse_schema(TICK_V1)
        create_topic(b.bootstrap, "few")
        ticks = [{"sym": f"S{i % 2}", "ts": BASE + i * 400, "price": 1.0, "size": 1} for i in range(10)]
        produce(b.bootstrap, "few", [avro_value(schema_id, parsed, t) for t in ticks])
        out = tmp_path / "out"

        def start(registry):
            path = tmp_path / "p.yaml"
            path.write_text(f"""
name: few
source: {{bootstrap: "{b.bootstrap}", topic: few, format: avro, registry: "{registry}",
          event_time: ts, key: sym, idle_timeout: 1s}}
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}]
sink: {{type: parquet, url: "file://{out}"}}
checkpoint_interval: 200ms
""")
            log = open(tmp_path / f"log{len(procs)}", "w")
            proc = subprocess.Popen([binary(), "process", "--pipeline", str(path)], stdout=log,
                                    stderr=subprocess.STDOUT, env=dict(os.environ, RUST_LOG="info"))
            procs.append((proc, log.name))
            return proc, log.name

        def checkpoint():
            d = out / "_checkpoints"
            return committed.latest(lambda: os.listdir(d) if d.exists() else [],
                                    lambda name: (d / name).read_bytes())

        # no registry listens there: the processor waits, retrying
        proc, log = start(f"http://127.0.0.1:{servers.free_port()}")
        deadline = time.time() + 60
        while open(log).read().count("cannot read schema id") < 3:
            assert proc.poll() is None and time.time() < deadline, open(log).read()
            time.sleep(0.2)
        proc.terminate()
        assert proc.wait(timeout=30) == 0, open(log).read()
        text = open(log).read()
        assert "skipping a record" not in text, text
        c = checkpoint()
        assert c is not None and sum(c["offsets"].values()) == 0, f"nothing counts as read: {c}"

        # the registry back: every tick counted, once
        proc, log = start(b.registry_url)
        expected = collections.Counter((t["sym"], t["ts"] // 1000 * 1000) for t in ticks)
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None and time.time() < deadline, open(log).read()
            c = checkpoint()
            rows = [r for f in c["files"] for r in pq.read_table(out / f).to_pylist()] if c else []
            if len(rows) >= len(expected):
                break
            time.sleep(0.3)
        assert {(r["key"], r["window_start"]): r["n"] for r in rows} == dict(expected)
        assert len(rows) == len(expected)
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        b.stop()
