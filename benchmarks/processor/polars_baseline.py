#!/usr/bin/env python3
"""The stream processor's computation written with Polars: the baseline
`aerostream process` is measured against (scripts/bench/processor.sh).

It reads the same pipeline file (source, window, aggregates, sink) and
writes the same output:

- reads every partition of the topic from the beginning with confluent-kafka
  (assigned, no consumer group offsets);
- decodes each batch of polled JSON values in bulk with Polars (one ndjson
  buffer through `pl.read_ndjson`, or `json.loads` per record with
  `--decode json`; ndjson measured faster, see --decode);
- keeps per (window, key) running figures; windows are tumbling
  `[k*size, (k+1)*size)` or sliding `[k*slide, k*slide+size)` (a record is
  in every window holding its event time);
- closes windows with the processor's watermark: the minimum over
  partitions of the largest event time seen, minus allowed_lateness, never
  going back; a partition that is read to its end (librdkafka's partition
  EOF) and has brought no record for idle_timeout stops holding it back;
  when every partition is idle the watermark moves to the end of the newest
  open window; a partition that has shown no record holds it back; a
  record's contribution to an already closed window is late and dropped;
- every checkpoint_interval writes the windows closed since as
  `part-<n>.parquet` under the sink's `file:///dir`: `key`, `window_start`,
  `window_end` (Int64, ms), then the aggregates in order (`count` Int64;
  `sum`, `min`, `max`, `avg`, `wavg` Float64, null when no record had the
  field, or both field and weight for `wavg`).

It does not checkpoint its state or offsets (the processor does): a
stopped baseline starts again from the beginning.

Each batch costs about a millisecond whatever its size (some ten eager
Polars operations; the same as one lazy query per batch measured slower
with Polars 2.1): at low rates, where batches are small, that is the
baseline's latency floor; at high rates batches grow and it is spread.

With `--stats FILE` it writes, every second and at exit,
`{"records", "windows_emitted", "latency_ms": {"ingest_to_state": {count,
p50, p99, p999, max}, "window_result": {...}}}` plus `late`, `skipped`,
`open_windows`, `watermark`: ingest_to_state is the wall clock when a
record's figures were added to its window minus the record's Kafka
timestamp; window_result the wall clock when a window was closed and handed
to the sink minus its window_end. Percentiles come from a log-bucketed
histogram (buckets 1.1 % wide).

Runs until SIGTERM or SIGINT; then writes the closed windows not yet
written and the stats, and exits 0.
"""

import argparse
import json
import math
import os
import re
import signal
import sys
import time

# one core unless told otherwise: the benchmark pins the baseline to one CPU
os.environ.setdefault("POLARS_MAX_THREADS", str(len(os.sched_getaffinity(0))))

import polars as pl  # noqa: E402
import yaml  # noqa: E402
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition  # noqa: E402

UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def duration_ms(text, what):
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h)\s*", str(text))
    if not m:
        raise SystemExit(f"error: {what}: expected a duration such as 500ms, 1s, 2m, 1h; got {text!r}")
    return int(m.group(1)) * UNITS[m.group(2)]


class Pipeline:
    """The parts of the pipeline file the baseline uses."""

    def __init__(self, path):
        with open(path) as f:
            doc = yaml.safe_load(f)
        src, win = doc["source"], doc["window"]
        self.name = doc["name"]
        self.bootstrap = src["bootstrap"]
        self.topic = src["topic"]
        if src.get("format", "json") != "json":
            raise SystemExit("error: source.format: only json")
        self.time_field = src["event_time"]
        self.key_field = src.get("key")
        self.idle_ms = duration_ms(src.get("idle_timeout", "5s"), "source.idle_timeout")
        kind = win["type"]
        self.size = duration_ms(win["size"], "window.size")
        if kind == "tumbling":
            self.slide = self.size
        elif kind == "sliding":
            self.slide = duration_ms(win["slide"], "window.slide")
        else:
            raise SystemExit(f"error: window.type: {kind} is not supported by the baseline")
        self.lateness = duration_ms(win.get("allowed_lateness", "0ms"), "window.allowed_lateness")
        self.aggregates = doc["aggregates"]
        for a in self.aggregates:
            if a["op"] not in ("count", "sum", "min", "max", "avg", "wavg"):
                raise SystemExit(f"error: aggregates: unknown op {a['op']}")
        url = doc["sink"]["url"]
        if not url.startswith("file://"):
            raise SystemExit("error: sink.url: the baseline writes file:///dir only")
        self.out_dir = url[len("file://"):]
        self.checkpoint_ms = duration_ms(doc.get("checkpoint_interval", "2s"), "checkpoint_interval")


class Plan:
    """Which partial figures a batch's group-by computes, how each merges
    into a window's accumulator (sum, min, max), and how the output columns
    are made from the accumulator."""

    def __init__(self, pipeline):
        exprs, merges, index = [pl.len().alias("a0")], ["sum"], {("count",): 0}

        def need(spec, expr, merge):
            if spec not in index:
                index[spec] = len(exprs)
                exprs.append(expr.alias(f"a{len(exprs)}"))
                merges.append(merge)
            return index[spec]

        self.fields = []
        self.outputs = []  # (name, kind, indices)
        for a in pipeline.aggregates:
            op, name = a["op"], a["as"]
            if op == "count":
                self.outputs.append((name, "count", (0,)))
                continue
            f = a["field"]
            if f not in self.fields:
                self.fields.append(f)
            c = pl.col(f)
            n = need(("n", f), c.count(), "sum")
            if op in ("sum", "avg"):
                s = need(("sum", f), c.sum(), "sum")
                self.outputs.append((name, op, (n, s)))
            elif op == "min":
                self.outputs.append((name, op, (n, need(("min", f), c.min(), "min"))))
            elif op == "max":
                self.outputs.append((name, op, (n, need(("max", f), c.max(), "max"))))
            else:  # wavg
                w = a["weight"]
                if w not in self.fields:
                    self.fields.append(w)
                both = c.is_not_null() & pl.col(w).is_not_null()
                bn = need(("wn", f, w), both.sum().cast(pl.Int64), "sum")
                fw = need(("fw", f, w), (c * pl.col(w)).sum(), "sum")
                ww = need(("ww", f, w), pl.when(both).then(pl.col(w)).sum(), "sum")
                self.outputs.append((name, op, (bn, fw, ww)))
        self.exprs = exprs
        self.merges = merges
        self.width = len(exprs)

    def new_acc(self, row):
        return list(row)

    def merge(self, acc, row):
        for i, kind in enumerate(self.merges):
            v = row[i]
            if v is None:
                continue
            a = acc[i]
            if a is None:
                acc[i] = v
            elif kind == "sum":
                acc[i] = a + v
            elif kind == "min":
                if v < a:
                    acc[i] = v
            elif v > a:
                acc[i] = v

    def finish(self, acc):
        out = []
        for _name, kind, ix in self.outputs:
            if kind == "count":
                out.append(acc[0])
                continue
            n = acc[ix[0]] or 0
            if n == 0:
                out.append(None)
            elif kind == "sum":
                out.append(float(acc[ix[1]]))
            elif kind == "avg":
                out.append(acc[ix[1]] / n)
            elif kind in ("min", "max"):
                out.append(float(acc[ix[1]]))
            else:  # wavg
                den = acc[ix[2]]
                out.append(acc[ix[1]] / den if den else None)
        return out

    def schema(self):
        s = {"key": pl.Utf8, "window_start": pl.Int64, "window_end": pl.Int64}
        for name, kind, _ in self.outputs:
            s[name] = pl.Int64 if kind == "count" else pl.Float64
        return s


class Histogram:
    """Latencies in ms, log-bucketed: bucket i holds values v (in µs) with
    floor(log2(v + 1) * 64) == i, about 1.1 % wide."""

    SUB = 64

    def __init__(self):
        self.counts = {}
        self.n = 0
        self.max = 0.0

    def add_series(self, ms):
        """ms: a Polars Float64 series of latencies."""
        if ms.len() == 0:
            return
        ms = ms.clip(lower_bound=0.0)
        self.max = max(self.max, ms.max())
        idx = ((ms * 1000.0 + 1.0).log(2) * self.SUB).floor().cast(pl.Int64)
        vc = idx.value_counts()
        for i, c in vc.iter_rows():
            self.counts[i] = self.counts.get(i, 0) + c
        self.n += ms.len()

    def add(self, ms):
        ms = max(ms, 0.0)
        self.max = max(self.max, ms)
        i = math.floor(math.log2(ms * 1000.0 + 1.0) * self.SUB)
        self.counts[i] = self.counts.get(i, 0) + 1
        self.n += 1

    def value(self, i):
        # the bucket's geometric middle, in ms
        return (2 ** ((i + 0.5) / self.SUB) - 1.0) / 1000.0

    def summary(self):
        out = {"count": self.n}
        if self.n == 0:
            out.update(p50=None, p99=None, p999=None, max=None)
            return out
        keys = sorted(self.counts)
        for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
            rank = max(1, math.ceil(q * self.n))
            seen = 0
            for i in keys:
                seen += self.counts[i]
                if seen >= rank:
                    out[name] = round(min(self.value(i), self.max), 4)
                    break
        out["max"] = round(self.max, 4)
        return out


class Clock:
    __slots__ = ("max_t", "last_record", "caught_up")

    def __init__(self, now):
        self.max_t = None
        self.last_record = now
        self.caught_up = False


class Engine:
    def __init__(self, pipeline, decode, stats_path):
        self.p = pipeline
        self.plan = Plan(pipeline)
        self.decode_mode = decode
        self.stats_path = stats_path
        self.open = {}  # window start -> {key: acc}
        self.clocks = {}
        self.watermark = None
        self.records = 0
        self.skipped = 0
        self.late = 0
        self.emitted = 0
        self.pending = []
        self.files = 0
        self.ingest = Histogram()
        self.result = Histogram()
        need = [pipeline.time_field] + ([pipeline.key_field] if pipeline.key_field else [])
        self.value_fields = [f for f in self.plan.fields if f not in need]
        self.schema = {}
        if pipeline.key_field:
            self.schema[pipeline.key_field] = pl.Utf8
        self.schema[pipeline.time_field] = pl.Int64
        for f in self.value_fields:
            self.schema[f] = pl.Float64

    # ---- decoding -------------------------------------------------------

    def decode(self, values):
        """The batch's values as a frame with k (key), t (event time) and
        the aggregated fields; a value that is not a JSON object gives a row
        of nulls (then skipped)."""
        p = self.p
        if self.decode_mode == "ndjson":
            try:
                df = pl.read_ndjson(b"\n".join(values), schema=self.schema, ignore_errors=True)
                if df.height != len(values):
                    raise ValueError("row count")
            except Exception:  # a value that is not one JSON object per line
                return self.decode_json(values)
        else:
            return self.decode_json(values)
        ren = {p.time_field: "t"}
        if p.key_field:
            ren[p.key_field] = "k"
        return df.rename(ren)

    def decode_json(self, values):
        p = self.p
        cols = {f: [] for f in self.schema}
        for v in values:
            try:
                o = json.loads(v)
            except ValueError:
                o = None
            if not isinstance(o, dict):
                for c in cols.values():
                    c.append(None)
                continue
            for f, c in cols.items():
                x = o.get(f)
                if f == p.key_field:
                    c.append(x if isinstance(x, str) else (json.dumps(x) if x is not None else None))
                elif f == p.time_field:
                    c.append(x if isinstance(x, int) and not isinstance(x, bool) else None)
                else:
                    c.append(float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None)
        ren = {p.time_field: "t"}
        if p.key_field:
            ren[p.key_field] = "k"
        return pl.DataFrame(cols, schema=self.schema).rename(ren)

    # ---- the batch ------------------------------------------------------

    def add_batch(self, values, keys, parts, stamps):
        n = len(values)
        self.records += n
        df = self.decode(values)
        cols = [pl.Series("p", parts, dtype=pl.Int32), pl.Series("ct", stamps, dtype=pl.Int64)]
        if not self.p.key_field:
            cols.append(pl.Series("k", [k.decode("utf-8", "replace") if k is not None else None for k in keys],
                                  dtype=pl.Utf8))
        df = df.with_columns(cols).filter(pl.col("t").is_not_null() & pl.col("k").is_not_null())
        self.skipped += n - df.height
        if df.height == 0:
            return
        size, slide = self.p.size, self.p.slide
        now = time.monotonic()
        for part, t in df.group_by("p").agg(pl.col("t").max()).iter_rows():
            c = self.clocks[part]
            c.max_t = t if c.max_t is None else max(c.max_t, t)
            c.last_record = now
        # the windows of a record: k_lo..k_hi (one for tumbling windows)
        df = df.with_columns((pl.col("t") // slide).alias("hi"), ((pl.col("t") - size) // slide + 1).alias("lo"))
        w = self.watermark
        if w is not None:
            # records whose newest window has closed add to nothing
            live = pl.col("hi") * slide + size > w
            late = df.height - df.select(live.sum()).item()
            if late:
                self.late += late
                df = df.filter(live)
        groups = df.group_by("k", "lo", "hi").agg(self.plan.exprs)
        plan, open_ = self.plan, self.open
        for row in groups.iter_rows():
            key, lo, hi, vals = row[0], row[1], row[2], row[3:]
            for k in range(lo, hi + 1):
                start = k * slide
                if w is not None and start + size <= w:
                    continue
                per_key = open_.get(start)
                if per_key is None:
                    per_key = open_[start] = {}
                acc = per_key.get(key)
                if acc is None:
                    per_key[key] = list(vals)
                else:
                    plan.merge(acc, vals)
        wall = time.time() * 1000.0
        self.ingest.add_series(wall - df.get_column("ct").cast(pl.Float64))

    def set_caught_up(self, part, caught_up):
        c = self.clocks.get(part)
        if c is not None:
            c.caught_up = caught_up

    def advance(self):
        now = time.monotonic()
        idle_s = self.p.idle_ms / 1000.0
        clocks = self.clocks.values()

        def idle(c):
            return c.caught_up and now - c.last_record >= idle_s

        if all(idle(c) for c in clocks):
            newest_end = max(self.open) + self.p.size if self.open else None
            times = [c.max_t for c in clocks if c.max_t is not None]
            newest_event = max(times) - self.p.lateness if times else None
            cands = [x for x in (newest_end, newest_event) if x is not None]
            candidate = max(cands) if cands else None
        else:
            candidate, held = None, False
            for c in clocks:
                if idle(c):
                    continue
                if c.max_t is None:
                    held = True
                    break
                t = c.max_t - self.p.lateness
                candidate = t if candidate is None else min(candidate, t)
            if held:
                candidate = None
        if candidate is not None and (self.watermark is None or candidate > self.watermark):
            self.watermark = candidate
        w = self.watermark
        if w is None or not self.open:
            return
        size = self.p.size
        closing = sorted(s for s in self.open if s + size <= w)
        if not closing:
            return
        wall = time.time() * 1000.0
        for start in closing:
            end = start + size
            per_key = self.open.pop(start)
            for key in sorted(per_key):
                self.pending.append((key, start, end, *self.plan.finish(per_key[key])))
                self.result.add(wall - end)
            self.emitted += len(per_key)

    # ---- output ---------------------------------------------------------

    def flush(self):
        if not self.pending:
            return
        self.files += 1
        schema = self.plan.schema()
        df = pl.DataFrame(self.pending, schema=schema, orient="row")
        path = os.path.join(self.p.out_dir, f"part-{self.files:020d}.parquet")
        tmp = path + ".tmp"
        df.write_parquet(tmp, compression="zstd")
        os.replace(tmp, path)
        self.pending = []

    def stats(self):
        return {
            "engine": "polars",
            "records": self.records,
            "windows_emitted": self.emitted,
            "latency_ms": {"ingest_to_state": self.ingest.summary(), "window_result": self.result.summary()},
            "late": self.late,
            "skipped": self.skipped,
            "open_windows": sum(len(v) for v in self.open.values()),
            "watermark": self.watermark,
            "files": self.files,
        }

    def write_stats(self):
        if not self.stats_path:
            return
        tmp = self.stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.stats(), f)
        os.replace(tmp, self.stats_path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipeline", required=True, help="the pipeline file (YAML), as for aerostream process")
    ap.add_argument("--stats", help="write stats JSON here every second and at exit")
    ap.add_argument("--decode", choices=["ndjson", "json"], default="ndjson",
                    help="ndjson: one buffer per batch through pl.read_ndjson (default, the faster); "
                         "json: json.loads per record")
    ap.add_argument("--batch", type=int, default=20_000, help="most records taken per poll")
    a = ap.parse_args(argv)
    p = Pipeline(a.pipeline)
    os.makedirs(p.out_dir, exist_ok=True)
    eng = Engine(p, a.decode, a.stats)

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    consumer = Consumer({
        "bootstrap.servers": p.bootstrap,
        "group.id": f"polars-baseline-{p.name}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 200,
        "fetch.min.bytes": 1,
        "fetch.max.bytes": 16 << 20,
        "max.partition.fetch.bytes": 1 << 20,
        # prefetch per partition: a few batches ahead, not librdkafka's
        # default 100,000 records (peak RSS)
        "queued.min.messages": 20_000,
        "queued.max.messages.kbytes": 32 << 10,
        # librdkafka waits 1 s by default before fetching again once its
        # queue is past those bounds: the baseline stalled 0.4 s a second
        "fetch.queue.backoff.ms": 5,
        "api.version.request": True,
    })
    deadline = time.monotonic() + 60
    while True:
        md = consumer.list_topics(p.topic, timeout=10)
        t = md.topics.get(p.topic)
        if t is not None and t.error is None and t.partitions:
            break
        if time.monotonic() > deadline or stop:
            print(f"error: topic {p.topic} not found", file=sys.stderr)
            return 1
        time.sleep(0.5)
    parts = sorted(t.partitions)
    now = time.monotonic()
    eng.clocks = {q: Clock(now) for q in parts}
    consumer.assign([TopicPartition(p.topic, q, OFFSET_BEGINNING) for q in parts])
    print(f"polars baseline: {p.name}: reading {p.topic} ({len(parts)} partitions) from the beginning, "
          f"decode={a.decode}, polars {pl.__version__}, {os.environ['POLARS_MAX_THREADS']} thread(s)",
          file=sys.stderr, flush=True)

    eof = KafkaError._PARTITION_EOF
    next_stats = time.monotonic() + 1.0
    ckpt = p.checkpoint_ms / 1000.0
    next_flush = time.monotonic() + ckpt
    next_line = time.monotonic() + 5.0
    last_records, last_line = 0, time.monotonic()
    while not stop:
        # what is there now, without waiting for a full batch; else wait
        # for the first record only
        msgs = consumer.consume(a.batch, 0)
        if not msgs:
            m = consumer.poll(0.05)
            msgs = [m] if m is not None else []
            if m is not None:
                msgs.extend(consumer.consume(a.batch - 1, 0))
        values, keys, partl, stamps = [], [], [], []
        caught = {}
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == eof:
                    caught[m.partition()] = True
                else:
                    print(f"polars baseline: consumer error: {err}", file=sys.stderr, flush=True)
                continue
            q = m.partition()
            caught[q] = False
            values.append(m.value() or b"")
            keys.append(m.key())
            partl.append(q)
            stamps.append(m.timestamp()[1])
        if values:
            eng.add_batch(values, keys, partl, stamps)
        for q, c in caught.items():
            eng.set_caught_up(q, c)
        eng.advance()
        now = time.monotonic()
        if now >= next_flush:
            eng.flush()
            next_flush = now + ckpt
        if now >= next_stats:
            eng.write_stats()
            next_stats = now + 1.0
        if now >= next_line:
            rate = (eng.records - last_records) / (now - last_line)
            print(f"polars baseline: progress records={eng.records} records_per_s={rate:.0f} "
                  f"watermark={eng.watermark} open_windows={sum(len(v) for v in eng.open.values())} "
                  f"windows_emitted={eng.emitted} late={eng.late} skipped={eng.skipped}",
                  file=sys.stderr, flush=True)
            last_records, last_line, next_line = eng.records, now, now + 5.0
    print("polars baseline: stopping: writing the closed windows", file=sys.stderr, flush=True)
    eng.flush()
    eng.write_stats()
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
