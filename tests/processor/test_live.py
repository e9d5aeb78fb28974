"""The processor's live view: a WebSocket client connected before the
events arrive gets a description of the pipeline, then every window's row
as its window closes, equal to the count computed from the events, while a
second client that upgraded to WebSocket and never reads holds nothing up;
`/recent` returns the newest rows and `/` the chart page."""

import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
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
        assert hello == {"pipeline": "live-counts", "window": "tumbling", "aggregates": ["n", "top"]}

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
