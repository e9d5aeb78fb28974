#!/usr/bin/env python3
"""One engine run of the stream processor's benchmark, and the comparison
of two engines' outputs (driven by scripts/bench/processor.sh).

  processor_run.py throughput --engine E --pipeline FILE ...
      runs engine E (aerostream or polars) pinned to --cpus over a topic
      pre-loaded with --count ticks, samples its CPU time (utime + stime of
      /proc/PID/stat) and records read every 50 ms, waits until it has read
      all of them and closed every window, stops it (SIGTERM) and writes one
      JSON result.
  processor_run.py latency --engine E --pipeline FILE ...
      starts engine E on an empty topic, runs ticks.py paced (--rate for
      --duration s, ts = wall clock), stops the engine once it has read
      every tick (before idleness closes the last windows, which would
      count the idle timeout as latency) and keeps its stats' percentiles.
  processor_run.py delete-topic --bootstrap B --topic T
      deletes a topic read for the last time (the agent's disk).
  processor_run.py compare DIR_A DIR_B
      the two output directories' rows, by (key, window_start): the same
      rows, window_end equal, integer columns equal, floating-point columns
      within 1e-9 relative; prints the mismatches and exits 1 if any.

How far an engine has read: its --stats file's `records` (written every
second); for an aerostream binary without --stats, the sum of the next
offsets in its latest checkpoint (file sink: OUTPUT/_checkpoints/<epoch>.json),
which also tells when every window has closed (no open window left).
"""

import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(ROOT, "benchmarks", "processor")
TICK = os.sysconf("SC_CLK_TCK")
SAMPLE = 0.05


# every process this run started, stopped when it ends whichever way
CHILDREN = []


def stop_children():
    for p in reversed(CHILDREN):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cpu_count(cpus):
    """How many CPUs a taskset list such as 1 or 0,2-3 names."""
    n = 0
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi) - int(lo) + 1 if hi else 1
    return n


# ---- engines --------------------------------------------------------------

def supports_stats(binary):
    try:
        out = subprocess.run([binary, "process", "--help"], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return "--stats" in out.stdout + out.stderr


def write_pipeline(template, path, bootstrap, topic, out_dir, idle_timeout=None):
    with open(template) as f:
        doc = yaml.safe_load(f)
    doc["source"]["bootstrap"] = bootstrap
    doc["source"]["topic"] = topic
    if idle_timeout:
        doc["source"]["idle_timeout"] = idle_timeout
    doc["sink"]["url"] = "file://" + os.path.abspath(out_dir)
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return doc


class Engine:
    """One engine process, pinned, with what can be read of its progress."""

    def __init__(self, a, name, workdir):
        self.a = a
        self.name = name
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.out = os.path.join(workdir, "out")
        self.pipeline = os.path.join(workdir, "pipeline.yaml")
        self.doc = write_pipeline(a.pipeline, self.pipeline, a.bootstrap, a.topic, self.out, a.idle_timeout)
        self.stats_path = os.path.join(workdir, "stats.json")
        # one log per run: what is read back from it is this run's
        self.log_path = (os.path.join(a.logs, f"{a.cmd}-{name}-{a.engine}.log") if a.logs
                         else os.path.join(workdir, "engine.log"))
        self.has_stats = True
        env = dict(os.environ)
        if a.engine == "aerostream":
            self.has_stats = supports_stats(a.bin)
            cmd = [a.bin, "process", "--pipeline", self.pipeline]
            if self.has_stats:
                cmd += ["--stats", self.stats_path]
            env.setdefault("RUST_LOG", "info")
        else:
            os.makedirs(self.out, exist_ok=True)
            cmd = [sys.executable, os.path.join(BENCH, "polars_baseline.py"), "--pipeline", self.pipeline,
                   "--stats", self.stats_path]
            env["POLARS_MAX_THREADS"] = str(cpu_count(a.cpus) if a.cpus else len(os.sched_getaffinity(0)))
        if a.cpus:
            cmd = ["taskset", "-c", a.cpus] + cmd
        self.cmd = cmd
        self.env = env
        self.proc = None
        self.t0 = None

    def start(self):
        logf = open(self.log_path, "w")
        logf.write(f"$ {' '.join(self.cmd)}\n")
        logf.flush()
        self.t0 = time.monotonic()
        # taskset execs the engine: the PID is the engine's own
        self.proc = subprocess.Popen(self.cmd, stdout=logf, stderr=subprocess.STDOUT, env=self.env)
        CHILDREN.append(self.proc)
        logf.close()
        # for the calling script's clean-up, should this run be interrupted
        with open(os.path.join(self.dir, "engine.pid"), "w") as f:
            f.write(f"{self.proc.pid}\n")
        log(f"{self.a.engine}: started pid {self.proc.pid}: {' '.join(self.cmd)}")

    def alive(self):
        return self.proc.poll() is None

    def cpu_seconds(self):
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # fields[0] is the state (field 3): utime and stime are fields 14 and 15
            return (int(fields[11]) + int(fields[12])) / TICK
        except (OSError, IndexError, ValueError):
            return None

    def status_kb(self, key):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return None

    def stats(self):
        try:
            with open(self.stats_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def checkpoint(self):
        """The latest committed state (aerostream's file sink; see
        committed_state), or None."""
        names = checkpoint_deltas(self.out)
        for name in reversed(names):
            try:
                return committed_state(self.out, name)
            except (OSError, ValueError, KeyError):
                # a chain pruned while read: the next poll reads again
                continue
        return None

    def log_records(self):
        """The records count of the newest progress line of the log."""
        try:
            with open(self.log_path, errors="replace") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 65536))
                tail = f.read()
        except OSError:
            return None
        found = re.findall(r"records=(\d+)", tail)
        return int(found[-1]) if found else None

    def progress(self):
        """(records read, every window closed?) as far as can be seen."""
        s = self.stats() if self.has_stats else None
        records = s.get("records") if s else None
        closed = None
        if s is not None and "open_windows" in s:
            closed = s["open_windows"] == 0
        if self.a.engine == "aerostream":
            c = self.checkpoint()
            if c is not None:
                offsets = sum(c.get("offsets", {}).values())
                records = max(records or 0, offsets)
                closed = not c["open"]
            if records is None:
                records = self.log_records()
        return records, closed

    def stop(self, timeout=60):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log(f"{self.a.engine}: ignored SIGTERM for {timeout}s; killing it")
            self.proc.kill()
            return self.proc.wait()

    def log_tail(self, n=20):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def refused(self):
        """The engine's own words when it exited refusing the pipeline."""
        tail = self.log_tail(40)
        m = re.search(r"(error: .*pipeline file is not valid.*|error: .*not supported.*)", tail)
        return m.group(1).strip() if m else None


def result_base(a, eng):
    return {"engine": a.engine, "pipeline": a.name, "pipeline_file": os.path.relpath(a.pipeline, ROOT),
            "window": eng.doc.get("window"), "aggregates": eng.doc.get("aggregates"),
            "cpus": a.cpus, "stats_supported": eng.has_stats, "command": " ".join(eng.cmd)}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def failed(a, eng, res, why):
    res.update(ok=False, error=why, exit_code=eng.proc.returncode if eng.proc else None,
               log_tail=eng.log_tail())
    refused = eng.refused()
    if refused:
        res.update(unsupported=True, error=refused)
    write_json(a.json, res)
    log(f"{a.engine}: {a.name}: {'not supported by this binary' if refused else 'FAILED'}: {res['error']}")
    return 3 if refused else 1


# ---- throughput -----------------------------------------------------------

def busy_end(samples, done_at):
    """(seconds, CPU seconds) when the engine finished the work, seen at the
    50 ms grain of the samples rather than when its stats or checkpoints
    showed every record read (done_at, up to seconds later): the first
    sample after which, until done_at, it used no more CPU time than it does
    idle. Its idle use is measured after done_at, while it waits for its
    last windows to close (0.5 % to 5 % of a core, counted 1.5 times); one
    clock tick and 0.5 % of its total are allowed on top for the odd
    checkpoint or flush."""
    samples = [(t, c) for t, c, _ in samples if c is not None]
    before = [(t, c) for t, c in samples if t <= done_at + 1e-9]
    after = [(t, c) for t, c in samples if t > done_at + 1e-9]
    if not before:
        return None
    t_done, c_done = before[-1]
    idle = 0.02
    if after and after[-1][0] - t_done >= 1.0:
        idle = (after[-1][1] - c_done) / (after[-1][0] - t_done)
    idle = 1.5 * min(0.05, max(0.005, idle))
    for t, c in before:
        if c_done - c <= 1.0 / TICK + 0.005 * c_done + idle * (t_done - t):
            return t, c
    return t_done, c_done


def throughput(a):
    eng = Engine(a, a.name, a.workdir)
    res = result_base(a, eng)
    res.update(phase="throughput", count=a.count)
    eng.start()
    samples = []
    done_at = None
    peak_kb = None
    deadline = time.monotonic() + a.timeout
    next_line = time.monotonic() + 5
    records = None
    while True:
        time.sleep(SAMPLE)
        now = time.monotonic()
        if not eng.alive():
            return failed(a, eng, res, f"exited with status {eng.proc.returncode}")
        cpu = eng.cpu_seconds()
        peak_kb = eng.status_kb("VmHWM") or peak_kb
        records, closed = eng.progress()
        samples.append((now - eng.t0, cpu, records))
        if done_at is None and records is not None and records >= a.count:
            done_at = now - eng.t0
            log(f"{a.engine}: {a.name}: all {a.count:,} records read (seen at {done_at:.2f} s); "
                "waiting for every window to close")
        if done_at is not None and closed:
            break
        if done_at is not None and closed is None and now - eng.t0 > done_at + a.settle:
            # nothing tells when windows close: give idleness its time
            break
        if now > deadline:
            eng.stop()
            return failed(a, eng, res, f"timed out after {a.timeout} s with {records} of {a.count} records read")
        if now >= next_line:
            log(f"{a.engine}: {a.name}: {records if records is not None else '?'} records read, "
                f"{cpu or 0:.1f} CPU s, {now - eng.t0:.1f} s")
            next_line = now + 5
    closed_at = time.monotonic() - eng.t0
    peak_kb = eng.status_kb("VmHWM") or peak_kb
    # the last checkpoint or flush writes the windows closed since the last one
    rc = eng.stop()
    stats = eng.stats()
    end = busy_end(samples, done_at)
    if end is None:
        return failed(a, eng, res, "no CPU time could be read from /proc")
    wall, cpu = end
    res.update(
        ok=rc == 0, exit_code=rc,
        wall_s=round(wall, 3), cpu_s=round(cpu, 3),
        events_per_s_core=round(a.count / cpu) if cpu else None,
        events_per_s_wall=round(a.count / wall) if wall else None,
        records_seen_at_s=round(done_at, 3), all_windows_closed_at_s=round(closed_at, 3),
        peak_rss_mb=round(peak_kb / 1024, 1) if peak_kb else None,
        stats=stats, output=eng.out,
        cpu_samples=[(round(t, 3), c) for t, c, _ in samples[:: max(1, len(samples) // 400)]],
    )
    if rc != 0:
        res["error"] = f"exited with status {rc} when stopped"
        res["log_tail"] = eng.log_tail()
    write_json(a.json, res)
    log(f"{a.engine}: {a.name}: {a.count:,} events in {wall:.2f} s wall, {cpu:.2f} CPU s: "
        f"{res['events_per_s_core'] or 0:,} events/s per core, {res['events_per_s_wall'] or 0:,} events/s wall, "
        f"peak RSS {res['peak_rss_mb']} MB")
    return 0 if rc == 0 else 1


# ---- latency --------------------------------------------------------------

def latency(a):
    eng = Engine(a, a.name, a.workdir)
    res = result_base(a, eng)
    res.update(phase="latency", rate=a.rate, duration_s=a.duration)
    eng.start()
    # ready: it has connected (a stats file, a checkpoint or its start line)
    ready_by = time.monotonic() + 60
    while time.monotonic() < ready_by:
        if not eng.alive():
            return failed(a, eng, res, f"exited with status {eng.proc.returncode}")
        if os.path.exists(eng.stats_path) or eng.checkpoint() is not None or re.search(
                r"starting afresh|reading .* from the beginning", eng.log_tail(40)):
            break
        time.sleep(0.1)
    # its first fetches done (connections, metadata, offsets) before the
    # first tick, so that they do not count as latency
    time.sleep(a.warmup)
    cpu0 = eng.cpu_seconds()
    t0 = time.monotonic()
    gen = [sys.executable, os.path.join(BENCH, "ticks.py"), "--bootstrap", a.bootstrap, "--topic", a.topic,
           "--symbols", str(a.symbols), "--seed", str(a.seed), "--rate", str(a.rate),
           "--duration", str(a.duration), "--compression", a.compression, "--linger-ms", "0"]
    if a.producer_cpus:
        gen = ["taskset", "-c", a.producer_cpus] + gen
    log(f"{a.engine}: {a.name}: {a.rate:,.0f} ticks/s for {a.duration:.0f} s")
    produced = None
    gen_out = []
    with subprocess.Popen(gen, stdout=subprocess.PIPE, text=True) as p:
        CHILDREN.append(p)
        for line in p.stdout:
            line = line.rstrip()
            if line.startswith("{"):
                produced = json.loads(line)
            else:
                gen_out.append(line)
                print(f"    {line}", flush=True)
        p.wait()
    if p.returncode != 0 or produced is None:
        eng.stop()
        return failed(a, eng, res, f"ticks.py exited with status {p.returncode}")
    # wait until the engine has read every tick, then stop it at once
    want = produced["ticks"]
    drain_by = time.monotonic() + a.drain
    records = None
    peak_kb = None
    while time.monotonic() < drain_by:
        if not eng.alive():
            return failed(a, eng, res, f"exited with status {eng.proc.returncode}")
        peak_kb = eng.status_kb("VmHWM") or peak_kb
        records, _ = eng.progress()
        if records is not None and records >= want:
            break
        time.sleep(0.1)
    caught_up = records is not None and records >= want
    wall = time.monotonic() - t0
    cpu1 = eng.cpu_seconds()
    peak_kb = eng.status_kb("VmHWM") or peak_kb
    rc = eng.stop()
    stats = eng.stats() if eng.has_stats else None
    res.update(
        ok=rc == 0 and caught_up, exit_code=rc, produced=produced, records_read=records, caught_up=caught_up,
        wall_s=round(wall, 3),
        cpu_s=round(cpu1 - cpu0, 3) if cpu0 is not None and cpu1 is not None else None,
        cpu_share=round((cpu1 - cpu0) / wall, 3) if cpu0 is not None and cpu1 is not None else None,
        peak_rss_mb=round(peak_kb / 1024, 1) if peak_kb else None,
        stats=stats,
        latency_ms=(stats or {}).get("latency_ms"),
    )
    if not caught_up:
        res["error"] = f"read {records} of {want} ticks within {a.drain} s of the producer's end"
    write_json(a.json, res)
    lat = res["latency_ms"] or {}
    i2s, wr = lat.get("ingest_to_state") or {}, lat.get("window_result") or {}
    log(f"{a.engine}: {a.name}: read {records}/{want}; CPU {res['cpu_share']} of a core; "
        + (f"ingest->state p50/p99/p99.9 {i2s.get('p50')}/{i2s.get('p99')}/{i2s.get('p999')} ms, "
           f"window result {wr.get('p50')}/{wr.get('p99')}/{wr.get('p999')} ms" if lat else "no stats (--stats not supported)"))
    return 0 if res["ok"] else 1


# ---- compare --------------------------------------------------------------

def checkpoint_deltas(d):
    """aerostream's checkpoint objects with the offsets (one delta per
    checkpoint, `<epoch>.json`; bases are `<epoch>.base.json`), oldest first."""
    return sorted(n for n in glob.glob(os.path.join(d, "_checkpoints", "*.json"))
                  if re.fullmatch(r"\d{20}\.json", os.path.basename(n)))


def committed_state(d, latest):
    """The state the checkpoint `latest` (a delta's path) commits, as a
    dict with `offsets`, `files` and `open` (the open windows by (key,
    start)): its base with every delta after it applied."""
    with open(latest) as f:
        head = json.load(f)
    if "base" not in head:  # a whole checkpoint, from before deltas
        return {"offsets": head["offsets"], "files": head["files"],
                "open": {(w["key"], w["start"]): w for w in head["windows"]["open"]}}
    folder = os.path.join(d, "_checkpoints")
    with open(os.path.join(folder, f"{head['base']:020}.base.json")) as f:
        base = json.load(f)
    files = base["files"]
    open_windows = {(w["key"], w["start"]): w for w in base["windows"]["open"]}
    for epoch in range(head["base"] + 1, head["epoch"] + 1):
        with open(os.path.join(folder, f"{epoch:020}.json")) as f:
            delta = json.load(f)
        files += delta["files"]
        for w in delta["removed"]:
            open_windows.pop((w["key"], w["start"]), None)
        for w in delta["changed"]:
            open_windows[(w["key"], w["start"])] = w
    return {"offsets": head["offsets"], "files": files, "open": open_windows}


def read_rows(d):
    """The rows of an output directory: the files its latest checkpoint
    lists when there is one (aerostream), else every part file."""
    import pyarrow.parquet as pq

    names = checkpoint_deltas(d)
    files = None
    if names:
        files = [os.path.join(d, x) for x in committed_state(d, names[-1])["files"]]
    if files is None:
        files = sorted(glob.glob(os.path.join(d, "part-*.parquet")))
    rows, schema = [], None
    for path in files:
        t = pq.read_table(path)
        schema = schema or t.schema
        rows.extend(t.to_pylist())
    return rows, schema


def compare(a):
    rows_a, schema_a = read_rows(a.a)
    rows_b, schema_b = read_rows(a.b)
    la, lb = a.label_a, a.label_b
    problems = []
    if schema_a is not None and schema_b is not None and schema_a.names != schema_b.names:
        problems.append(f"columns differ: {la} {schema_a.names}, {lb} {schema_b.names}")

    def index(rows, label):
        out = {}
        for r in rows:
            k = (r["key"], r["window_start"])
            if k in out:
                problems.append(f"{label}: window {k} written twice")
            out[k] = r
        return out

    ia, ib = index(rows_a, la), index(rows_b, lb)
    only_a = sorted(set(ia) - set(ib))
    only_b = sorted(set(ib) - set(ia))
    if only_a:
        problems.append(f"{len(only_a)} windows only in {la}, e.g. {only_a[:3]}")
    if only_b:
        problems.append(f"{len(only_b)} windows only in {lb}, e.g. {only_b[:3]}")
    cols = [c for c in (schema_a.names if schema_a else []) if c not in ("key", "window_start")]
    wrong = 0
    for k in sorted(set(ia) & set(ib)):
        ra, rb = ia[k], ib[k]
        for c in cols:
            x, y = ra.get(c), rb.get(c)
            if isinstance(x, float) or isinstance(y, float):
                same = (x is None and y is None) or (
                    x is not None and y is not None
                    and (x == y or abs(x - y) <= 1e-9 * max(abs(x), abs(y))))
            else:
                same = x == y
            if not same:
                wrong += 1
                if wrong <= 5:
                    problems.append(f"window {k}: {c}: {la} {x!r}, {lb} {y!r}")
    if wrong > 5:
        problems.append(f"... {wrong} differing values in all")
    summary = {"rows_a": len(rows_a), "rows_b": len(rows_b), "columns": cols, "equal": not problems,
               "problems": problems[:20]}
    if a.json:
        write_json(a.json, summary)
    if problems:
        print(f"MISMATCH between {la} ({a.a}) and {lb} ({a.b}):", flush=True)
        for p in problems[:20]:
            print(f"  {p}", flush=True)
        return 1
    print(f"equal: {len(rows_a):,} windows, columns {', '.join(cols)} "
          "(integers equal, floats within 1e-9 relative)", flush=True)
    return 0


def delete_topic(a):
    """Frees the agent's disk of a topic read for the last time."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": a.bootstrap, "log_level": 4})
    try:
        admin.delete_topics([a.topic])[a.topic].result(30)
        log(f"deleted topic {a.topic}")
    except Exception as e:  # the run's figures stand without it
        log(f"could not delete topic {a.topic}: {e}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("throughput", "latency"):
        s = sub.add_parser(name)
        s.add_argument("--engine", choices=["aerostream", "polars"], required=True)
        s.add_argument("--bin", help="the aerostream binary")
        s.add_argument("--pipeline", required=True, help="a pipeline template (benchmarks/processor/*.yaml)")
        s.add_argument("--name", help="the pipeline's name in results (default: the file's)")
        s.add_argument("--bootstrap", required=True)
        s.add_argument("--topic", required=True)
        s.add_argument("--workdir", required=True, help="pipeline file, output and stats go here")
        s.add_argument("--logs", help="the engine's log goes here (default: the workdir)")
        s.add_argument("--cpus", help="taskset CPU list the engine is pinned to")
        s.add_argument("--idle-timeout", help="overrides the pipeline's source.idle_timeout")
        s.add_argument("--json", required=True, help="the result is written here")
        if name == "throughput":
            s.add_argument("--count", type=int, required=True)
            s.add_argument("--timeout", type=float, default=1800)
            s.add_argument("--settle", type=float, default=15,
                           help="seconds waited after every record is read when nothing tells when windows close")
        else:
            s.add_argument("--rate", type=float, required=True)
            s.add_argument("--duration", type=float, required=True)
            s.add_argument("--symbols", type=int, default=100)
            s.add_argument("--seed", type=int, default=1)
            s.add_argument("--compression", default="lz4")
            s.add_argument("--producer-cpus")
            s.add_argument("--warmup", type=float, default=float(os.environ.get("LATENCY_WARMUP", 3)),
                           help="seconds between the engine's start and the first tick")
            s.add_argument("--drain", type=float, default=30,
                           help="seconds the engine may take after the producer's end to read every tick")
    d = sub.add_parser("delete-topic")
    d.add_argument("--bootstrap", required=True)
    d.add_argument("--topic", required=True)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--label-a", default="aerostream")
    c.add_argument("--label-b", default="polars")
    c.add_argument("--json")
    a = ap.parse_args(argv)
    if a.cmd == "compare":
        return compare(a)
    if a.cmd == "delete-topic":
        return delete_topic(a)
    if a.engine == "aerostream" and not a.bin:
        ap.error("--bin is needed for aerostream")
    a.name = a.name or os.path.splitext(os.path.basename(a.pipeline))[0]

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        return throughput(a) if a.cmd == "throughput" else latency(a)
    finally:
        stop_children()


if __name__ == "__main__":
    sys.exit(main())
