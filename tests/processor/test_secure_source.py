"""The processor reading a broker that takes only SASL over TLS
(SASL_SSL), as a secured deployment runs it: with `source.tls` and
`source.sasl` (the password from the environment) it counts every window
exactly, as one process and as a distributed pipeline's worker (which
logs in to the REST API for its leases); with a wrong password it stops
with the authentication error instead of retrying forever."""

import collections
import io
import json
import os
import shutil
import subprocess
import tempfile
import time

import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import servers
from broker import binary
from sasl_helpers import ADMIN, conf, sasl_broker
from tls_certs import certs  # noqa: F401 (the fixture)

EVENTS = 5_000
BASE = 1_700_000_000_000


def pipeline_file(d, broker, certs, password_env, prefix="secure", extra=""):
    path = os.path.join(d, f"{prefix}.yaml")
    with open(path, "w") as f:
        f.write(f"""
name: counts
source:
  bootstrap: "{broker.bootstrap}"
  topic: events
  format: json
  event_time: ts
  key: k
  idle_timeout: 1s
  tls: {{ca: "{os.path.join(certs, 'ca.pem')}"}}
  sasl: {{mechanism: SCRAM-SHA-512, username: {ADMIN[0]}, password_env: {password_env}}}
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}]
sink: {{type: parquet, url: "s3://out/{prefix}"}}
checkpoint_interval: 300ms
{extra}
""")
    return path


def test_a_sasl_ssl_source_is_read_with_the_pipelines_login(s3, certs):  # noqa: F811
    b = sasl_broker(certs, "SCRAM-SHA-512")
    d = tempfile.mkdtemp(prefix="aerostream-secure-")
    proc = None
    try:
        c = conf(b, certs, "SCRAM-SHA-512", *ADMIN)
        admin = AdminClient(c)
        admin.create_topics([NewTopic("events", 2, 1)])["events"].result(30)
        producer = Producer({**c, "linger.ms": 10})
        expected = collections.Counter()
        for i in range(EVENTS):
            key = f"k{i % 10}"
            ts = BASE + i * 3
            expected[(key, ts // 1000 * 1000)] += 1
            producer.produce("events", key=key, value=json.dumps({"k": key, "ts": ts}))
        assert producer.flush(60) == 0

        log_path = os.path.join(d, "process.log")
        env = dict(os.environ, **servers.s3_env(s3), RUST_LOG="info", COUNTS_PASSWORD=ADMIN[1])
        proc = subprocess.Popen(
            [binary(), "process", "--pipeline", pipeline_file(d, b, certs, "COUNTS_PASSWORD")],
            stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=env)
        client = servers.s3_client(s3)

        def rows(prefix="secure/"):
            pages = client.get_paginator("list_objects_v2").paginate(Bucket="out", Prefix=prefix)
            keys = [o["Key"] for p in pages for o in p.get("Contents", []) if o["Key"].endswith(".parquet")]
            out = []
            for k in keys:
                body = client.get_object(Bucket="out", Key=k)["Body"].read()
                out.extend(pq.read_table(io.BytesIO(body)).to_pylist())
            return out

        deadline = time.time() + 120
        while time.time() < deadline and len(rows()) < len(expected):
            assert proc.poll() is None, open(log_path).read()[-3000:]
            time.sleep(0.3)
        got = {(r["key"], r["window_start"]): r["n"] for r in rows()}
        assert got == dict(expected), open(log_path).read()[-3000:]
        proc.terminate()
        assert proc.wait(60) == 0, open(log_path).read()[-3000:]

        # as a distributed pipeline's worker: it logs in to the REST API
        # (HTTP Basic) with the same user for its leases
        extra = (f'distribution: {{coordinators: ["http://127.0.0.1:{b.http_port}"], '
                 f'worker: w1, lease_ttl: 3s}}')
        path = pipeline_file(d, b, certs, "COUNTS_PASSWORD", "secure-dist", extra)
        proc = subprocess.Popen([binary(), "process", "--pipeline", path],
                                stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 120
        while time.time() < deadline and len(rows("secure-dist/")) < len(expected):
            assert proc.poll() is None, open(log_path).read()[-3000:]
            time.sleep(0.3)
        got = {(r["key"], r["window_start"]): r["n"] for r in rows("secure-dist/")}
        assert got == dict(expected), open(log_path).read()[-3000:]
        proc.terminate()
        assert proc.wait(60) == 0, open(log_path).read()[-3000:]

        # a wrong password: the run ends with the broker's refusal
        env["COUNTS_PASSWORD"] = "not-the-password"
        out = subprocess.run(
            [binary(), "process", "--pipeline", pipeline_file(d, b, certs, "COUNTS_PASSWORD")],
            capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 1, out.stderr[-3000:]
        assert "error:" in out.stderr and "auth" in out.stderr.lower(), out.stderr[-3000:]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        shutil.rmtree(d, ignore_errors=True)
        b.stop()
