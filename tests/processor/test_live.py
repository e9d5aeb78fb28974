"""The processor's live view: a WebSocket client connected before the
events arrive gets a description of the pipeline, then every window's row
as its window closes, equal to the count computed from the events, while a
second client that upgraded to WebSocket and never reads holds nothing up;
`/recent` returns the newest rows and `/` the chart page. With early results,
the figures so far of an open window arrive marked not final before it
closes, and `/metrics` counts what was produced, filtered, skipped and
emitted."""

import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import re
import urllib.request

import websocket  # websocket-client
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import servers
from broker import Broker, binary

EVENTS = 20_000
KEYS = 10
BASE = 1_700_000_000_000


def test_the_live_view_streams_every_closed_window_and_a_stalled_client_holds_nothing_up():
    b = Broker().start()
    root = tempfile.mkdtemp(prefix="aerostream-live-")
    port = servers.free_port()
    proc = None
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("events", 2, 1)])["events"].result(30)
        pipeline = os.path.join(root, "p.yaml")
        with open(pipeline, "w") as f:
            f.write(f"""
name: live-counts
source: {{bootstrap: "{b.bootstrap}", topic: events, format: json, event_time: ts, key: k, idle_timeout: 2s}}
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}, {{op: max, field: x, as: top}}]
sink: {{type: parquet, url: "file://{root}/out"}}
state: {{dir: "{root}/state"}}
live: {{listen: "127.0.0.1:{port}"}}
""")
        log = open(os.path.join(root, "log"), "w")
        proc = subprocess.Popen([binary(), "process", "--pipeline", pipeline], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            try:
                ws = websocket.create_connection(f"ws://127.0.0.1:{port}/ws", timeout=30)
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, open(log.name).read()
                time.sleep(0.2)
        hello = json.loads(ws.recv())
        assert hello == {"pipeline": "live-counts", "window": "tumbling", "aggregates": ["n", "top"], "early_ms": None}

        # a client that upgrades and then never reads a byte
        stalled = socket.create_connection(("127.0.0.1", port))
        stalled.sendall(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n".encode())
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)

        expected = collections.Counter()
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
        for i in range(EVENTS):
            key, ts = f"k{i % KEYS}", BASE + i * 5
            expected[(key, ts // 1000 * 1000)] += 1
            p.produce("events", key=key, value=json.dumps({"k": key, "ts": ts, "x": i}))
            p.poll(0)
        assert p.flush(60) == 0

        got = {}
        while len(got) < len(expected):
            m = json.loads(ws.recv())
            assert "lagged" not in m, "a reading client kept up"
            assert m["final"] is True, "no early results were asked for"
            assert (m["key"], m["window_start"]) not in got, m
            got[(m["key"], m["window_start"])] = m
        assert {k: m["n"] for k, m in got.items()} == dict(expected)
        assert all(m["window_end"] == m["window_start"] + 1000 and isinstance(m["top"], float) for m in got.values())
        ws.close()

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/recent", timeout=10) as r:
            recent = json.loads(r.read())
        assert 0 < len(recent) <= 1000 and recent[-1] in list(got.values())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            assert "AeroStream live view" in r.read().decode()
        stalled.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, open(log.name).read()[-3000:]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        b.stop()
        shutil.rmtree(root, ignore_errors=True)


def scrape(port):
    """`/metrics` as {series: value}, checking each sample follows its TYPE line."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    typed, out = set(), {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
        elif line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            name = series.split("{")[0]
            assert re.sub(r"_(sum|count)$", "", name) in typed or name in typed, line
            out[series] = float(value)
    return out


def wait_for(what, check, timeout=30):
    deadline = time.time() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.time() < deadline, f"never: {what}"
        time.sleep(0.1)


def test_early_results_come_before_the_window_closes_and_metrics_count_the_run():
    b = Broker().start()
    root = tempfile.mkdtemp(prefix="aerostream-early-")
    port = servers.free_port()
    proc = None
    keys, per_key, below, garbage = 5, 40, 7, 3
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("ticks", 1, 1)])["ticks"].result(30)
        pipeline = os.path.join(root, "p.yaml")
        with open(pipeline, "w") as f:
            f.write(f"""
name: early
source: {{bootstrap: "{b.bootstrap}", topic: ticks, format: json, event_time: ts, key: k, idle_timeout: 5m}}
window: {{type: tumbling, size: 10s, early: 200ms}}
filter: [{{field: x, op: ge, value: 0}}]
aggregates: [{{op: count, as: n}}]
sink: {{type: parquet, url: "file://{root}/out"}}
live: {{listen: "127.0.0.1:{port}"}}
checkpoint_interval: 500ms
""")
        log = open(os.path.join(root, "log"), "w")
        proc = subprocess.Popen([binary(), "process", "--pipeline", pipeline, "--stats", os.path.join(root, "stats.json")],
                                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            try:
                ws = websocket.create_connection(f"ws://127.0.0.1:{port}/ws", timeout=30)
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, open(log.name).read()
                time.sleep(0.2)
        assert json.loads(ws.recv())["early_ms"] == 200

        # [BASE, BASE + 10s) of every key, some filtered out, some unreadable
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        for i in range(keys * per_key):
            key = f"k{i % keys}"
            p.produce("ticks", key=key, value=json.dumps({"k": key, "ts": BASE + i, "x": i}))
        for i in range(below):
            p.produce("ticks", key="k0", value=json.dumps({"k": "k0", "ts": BASE + i, "x": -1}))
        for _ in range(garbage):
            p.produce("ticks", key="k0", value=b"not json")
        assert p.flush(60) == 0
        produced = keys * per_key + below + garbage

        # early rows until every key's shows all its records; nothing final
        latest = {}
        while any(latest.get(f"k{k}", {}).get("n") != per_key for k in range(keys)):
            m = json.loads(ws.recv())
            assert m["final"] is False, f"the window cannot have closed: {m}"
            assert m["window_start"] == BASE // 10_000 * 10_000 and m["n"] <= per_key, m
            latest[m["key"]] = m
        def recent():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/recent", timeout=10) as r:
                return json.loads(r.read())
        want = [(f"k{k}", per_key, False) for k in range(keys)]
        wait_for("/recent with the early rows", lambda: sorted((m["key"], m["n"], m["final"]) for m in recent()) == want)

        label = '{pipeline="early"}'

        def counted():
            m = scrape(port)
            done = m[f"aerostream_processor_records_total{label}"] == produced \
                and m.get(f"aerostream_processor_ingest_to_state_seconds_count{label}") == produced
            return m if done else None
        metrics = wait_for("the records counted", counted)
        assert metrics[f"aerostream_processor_records_filtered_total{label}"] == below
        assert metrics[f"aerostream_processor_records_skipped_total{label}"] == garbage
        assert metrics[f"aerostream_processor_windows_emitted_total{label}"] == 0
        assert metrics[f"aerostream_processor_open_windows{label}"] == keys
        assert metrics[f"aerostream_processor_early_results_total{label}"] >= keys
        assert metrics['aerostream_processor_consumer_lag{pipeline="early",partition="0"}'] == 0
        assert metrics[f"aerostream_processor_ingest_to_state_seconds_count{label}"] == produced

        # an event past the window's end closes it: one final row per key,
        # and no early row of it after that
        p.produce("ticks", key="k0", value=json.dumps({"k": "k0", "ts": BASE + 30_000, "x": 1}))
        assert p.flush(60) == 0
        finals = {}
        while len(finals) < keys:
            m = json.loads(ws.recv())
            if m["final"]:
                finals[m["key"]] = m
            else:
                assert m["key"] not in finals or m["window_start"] != finals[m["key"]]["window_start"], m
        assert {k: m["n"] for k, m in finals.items()} == {f"k{k}": per_key for k in range(keys)}
        metrics = wait_for("a checkpoint", lambda: (lambda m: m if m[f"aerostream_processor_checkpoints_total{label}"] >= 1
                                                     and m[f"aerostream_processor_windows_emitted_total{label}"] == keys else None)(scrape(port)))
        assert metrics[f"aerostream_processor_records_total{label}"] == produced + 1
        assert metrics[f"aerostream_processor_checkpoint_failures_total{label}"] == 0
        assert metrics[f"aerostream_processor_watermark_milliseconds{label}"] == BASE + 30_000
        assert all(m["final"] for m in recent() if m["window_start"] == BASE // 10_000 * 10_000)
        ws.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, open(log.name).read()[-3000:]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        b.stop()
        shutil.rmtree(root, ignore_errors=True)
