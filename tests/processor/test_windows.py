"""Sliding windows with a filter, weighted averages, distinct counts and
quantiles, and session windows,
end to end: ticks (symbol, price, size, ts) on a 4-partition topic, two
processors reading it at once into their own Parquet directories; the rows,
read with pyarrow, equal what is computed here from the ticks produced.
Ticks produced after every window closed land in the sliding pipeline's
late output. Its `--stats` file counts every record, the ones its filter
dropped, the late ones, and latency percentiles."""

import collections
import json
import math
import os
import random
import signal
import subprocess
import tempfile
import time

import pyarrow.dataset as ds
import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import committed
from broker import Broker, binary

TICKS = 30_000
SYMBOLS = 10
BASE = 1_700_000_000_000
STEP = 10  # ms between ticks: strictly increasing event times
QUIET = 7_000  # every symbol is silent one 7 s period in three: sessions end
SIZE, SLIDE, GAP = 3_000, 1_000, 2_000
MIN_SIZE = 100


def ticks():
    rng = random.Random(37)
    out = []
    for i in range(TICKS):
        ts = BASE + i * STEP
        n = i % SYMBOLS
        if (ts // QUIET) % 3 == n % 3:
            continue
        out.append({"symbol": f"S{n:02}", "price": round(100 + rng.random() * 10, 2),
                    "size": rng.choice([50, 100, 200, 300]), "ts": ts})
    return out


def produce(bootstrap, events, create=True):
    if create:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("ticks", 4, 1)])["ticks"].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for e in events:
        p.produce("ticks", key=e["symbol"], value=json.dumps(e))
        p.poll(0)
    assert p.flush(120) == 0


def expected_sliding(events):
    """(symbol, window_start) -> (trades, volume, vwap numerator, low, high,
    prices) over the ticks of size >= MIN_SIZE."""
    acc = {}
    for e in events:
        if e["size"] < MIN_SIZE:
            continue
        last = e["ts"] // SLIDE * SLIDE
        for start in range(last - SIZE + SLIDE, last + 1, SLIDE):
            n, vol, num, lo, hi, prices = acc.get((e["symbol"], start), (0, 0, 0.0, math.inf, -math.inf, []))
            acc[(e["symbol"], start)] = (n + 1, vol + e["size"], num + e["price"] * e["size"],
                                         min(lo, e["price"]), max(hi, e["price"]), prices + [e["price"]])
    return acc


def expected_sessions(events):
    """(symbol, session start) -> (session end, count)."""
    by_symbol = collections.defaultdict(list)
    for e in events:
        by_symbol[e["symbol"]].append(e["ts"])
    out = {}
    for symbol, times in by_symbol.items():
        times.sort()
        start = last = times[0]
        n = 0
        for t in times:
            if t - last >= GAP:
                out[(symbol, start)] = (last + GAP, n)
                start, n = t, 0
            last = t
            n += 1
        out[(symbol, start)] = (last + GAP, n)
    return out


class Pipeline:
    def __init__(self, root, name, bootstrap, body, stats=False, sink_extra=""):
        self.out = os.path.join(root, name)
        self.path = os.path.join(root, f"{name}.yaml")
        self.stats = os.path.join(root, f"{name}-stats.json") if stats else None
        with open(self.path, "w") as f:
            f.write(f"""
name: {name}
source: {{bootstrap: "{bootstrap}", topic: ticks, format: json, event_time: ts, key: symbol, idle_timeout: 2s}}
{body}
sink: {{type: parquet, url: "file://{self.out}"{sink_extra}}}
state: {{dir: "{self.out}-state"}}
checkpoint_interval: 500ms
""")
        self.log_path = os.path.join(root, f"{name}.log")
        args = [binary(), "process", "--pipeline", self.path]
        if self.stats:
            args += ["--stats", self.stats]
        self.proc = subprocess.Popen(args, stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT,
                                     env=dict(os.environ, RUST_LOG="info"))

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def rows(self):
        state = committed.latest_in_folder(os.path.join(self.out, "_checkpoints"))
        files = state["files"] if state else []
        return [r for name in files for r in pq.read_table(os.path.join(self.out, name)).to_pylist()]

    def late_rows(self):
        state = committed.latest_in_folder(os.path.join(self.out, "_checkpoints"))
        files = state.get("late_files", []) if state else []
        return [r for name in files for r in pq.read_table(os.path.join(self.out, name)).to_pylist()]

    def wait_for_rows(self, n, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, self.log()
            rows = self.rows()
            if len(rows) >= n:
                return rows
            time.sleep(0.3)
        raise AssertionError(f"{len(self.rows())} of {n} rows after {timeout} s:\n{self.log()[-3000:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def test_sliding_filtered_weighted_and_session_windows_equal_the_ticks():
    events = ticks()
    b = Broker().start()
    root = tempfile.mkdtemp(prefix="aerostream-windows-")
    running = []
    try:
        produce(b.bootstrap, events)
        sliding = Pipeline(root, "vwap", b.bootstrap, f"""
window: {{type: sliding, size: {SIZE}ms, slide: {SLIDE}ms, late_records: write}}
filter: [{{field: size, op: ge, value: {MIN_SIZE}}}, {{field: symbol, op: ne, value: NONE}}]
aggregates:
  - {{op: count, as: trades}}
  - {{op: sum, field: size, as: volume}}
  - {{op: wavg, field: price, weight: size, as: vwap}}
  - {{op: min, field: price, as: low}}
  - {{op: max, field: price, as: high}}
  - {{op: distinct, field: price, as: prices}}
  - {{op: quantile, field: price, q: 0.5, as: median}}
""", stats=True)
        running.append(sliding)
        sessions = Pipeline(root, "sessions", b.bootstrap, f"""
window: {{type: session, gap: {GAP}ms}}
aggregates: [{{op: count, as: n}}]
""")
        running.append(sessions)

        want = expected_sliding(events)
        rows = sliding.wait_for_rows(len(want))
        got = {(r["key"], r["window_start"]): r for r in rows}
        assert len(got) == len(rows), "no window written twice"
        assert set(got) == set(want), (sorted(set(want) - set(got))[:5], sorted(set(got) - set(want))[:5])
        for k, (n, vol, num, lo, hi, prices) in want.items():
            r = got[k]
            assert r["window_end"] == k[1] + SIZE
            assert (r["trades"], r["volume"], r["low"], r["high"]) == (n, vol, lo, hi), (k, r)
            assert math.isclose(r["vwap"], num / vol, rel_tol=1e-9), (k, r, num / vol)
            # approximate: HyperLogLog++ (exact-ish while small), DDSketch
            # within 1% of the lower median
            distinct = len(set(prices))
            assert abs(r["prices"] - distinct) <= max(1, 0.02 * distinct), (k, r["prices"], distinct)
            median = sorted(prices)[(len(prices) - 1) // 2]
            assert math.isclose(r["median"], median, rel_tol=0.011), (k, r["median"], median)

        want = expected_sessions(events)
        assert len(want) > SYMBOLS * 10, "the quiet periods cut every symbol's ticks into sessions"
        rows = sessions.wait_for_rows(len(want))
        got = {(r["key"], r["window_start"]): (r["window_end"], r["n"]) for r in rows}
        assert len(got) == len(rows), "no session written twice"
        assert got == want, [(k, got.get(k), v) for k, v in want.items() if got.get(k) != v][:5]

        # every window has closed (the partitions went idle): ticks from
        # the first second now are late, and the sliding pipeline writes them
        # to its late output, committed like its windows
        late = [{"symbol": "S00", "price": 99.5, "size": 200, "ts": BASE + 100 + i} for i in range(5)]
        produce(b.bootstrap, late, create=False)
        deadline = time.time() + 120
        while not (late_rows := sliding.late_rows()):
            assert time.time() < deadline and sliding.proc.poll() is None, sliding.log()[-3000:]
            time.sleep(0.3)
        assert sorted(r["event_time"] for r in late_rows) == [e["ts"] for e in late]
        assert all(r["key"] == "S00" and json.loads(r["value"]) in late for r in late_rows), late_rows
        assert len({(r["partition"], r["offset"]) for r in late_rows}) == len(late)

        for p in running:
            assert p.stop() == 0, p.log()
        with open(sliding.stats) as f:
            stats = json.load(f)
        dropped = sum(1 for e in events if e["size"] < MIN_SIZE)
        assert (stats["records"], stats["filtered"], stats["late"]) == \
            (len(events) + len(late), dropped, len(late)), stats
        ingest = stats["latency_ms"]["ingest_to_state"]
        assert ingest["count"] == len(events) + len(late) and 0 < ingest["p50"] <= ingest["p99"] <= ingest["max"], stats
        assert stats["latency_ms"]["window_result"]["count"] == stats["windows_emitted"] == len(expected_sliding(events))
        assert f"filtered={dropped}" in sliding.log()
    finally:
        for p in running:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()
        b.stop()
        subprocess.run(["rm", "-rf", root])


def test_files_in_hour_folders_read_back_as_hive_partitions(tmp_path):
    """`sink.partition_by: hour`: each window's row is in the folder of its
    start's UTC day and hour, which pyarrow reads as Hive partitions."""
    b = Broker().start()
    p = None
    try:
        # two symbols taking turns every 10 minutes, 08:00 to 10:50 UTC
        start = 1_796_630_400_000  # 2026-12-07T08:00:00Z
        events = [{"symbol": f"S{i % 2}", "price": 1.0, "size": 100, "ts": start + i * 600_000}
                  for i in range(18)]
        produce(b.bootstrap, events)
        p = Pipeline(str(tmp_path), "hourly", b.bootstrap,
                     "window: {type: tumbling, size: 10m}\naggregates: [{op: count, as: n}]",
                     sink_extra=", partition_by: hour")
        p.wait_for_rows(len(events))
        state = committed.latest_in_folder(os.path.join(p.out, "_checkpoints"))
        folders = sorted({os.path.dirname(name) for name in state["files"]})
        assert folders == ["dt=2026-12-07/hour=08", "dt=2026-12-07/hour=09",
                           "dt=2026-12-07/hour=10"], state["files"]
        table = ds.dataset(p.out, format="parquet", partitioning="hive").to_table()
        rows = table.to_pylist()
        assert len(rows) == len(events)
        for r in rows:
            hour = (r["window_start"] - start) // 3_600_000 + 8
            assert (str(r["dt"]), int(r["hour"])) == ("2026-12-07", hour), r
        per_hour = collections.Counter(int(r["hour"]) for r in rows)
        assert per_hour == {8: 6, 9: 6, 10: 6}
        assert p.stop() == 0, p.log()
    finally:
        if p is not None and p.proc.poll() is None:
            p.proc.kill()
        b.stop()
