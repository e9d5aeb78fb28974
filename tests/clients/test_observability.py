"""What operators watch: the OTLP export to a real OTLP/HTTP receiver, and
the Grafana dashboard's queries against what /metrics really exposes."""

import json
import os
import re
import time
import urllib.request
import uuid

from broker import Broker
from helpers import consume, create_topic, messages, produce_all
from otlp_receiver import Receiver

DASHBOARD = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "grafana", "aerostream.json")


def scrape(broker):
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics", timeout=5) as r:
        return r.read().decode()


def exposed_names(text):
    """Every sample name /metrics shows (histograms as _bucket, _sum, _count)."""
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def traffic(broker, topic, group, partitions=2, n=40):
    create_topic(broker, topic, partitions=partitions)
    produce_all(broker, topic, messages(n))
    c, got = consume(broker, topic, n, group=group)
    try:
        assert len(got) == n
        # half the records committed: the group lags by the other half
        c.commit(message=got[n // 2 - 1], asynchronous=False)
    finally:
        c.close()


def metric_values(broker):
    values = {}
    for line in scrape(broker).splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def tiered_traffic(broker, topic, n=300):
    """Sealed segments uploaded and gone from local disk, then read back
    from object storage."""
    create_topic(broker, topic, config={
        "segment.bytes": "1048576",
        "segment.ms": "1000",
        "local.retention.bytes": "0",
    })
    produce_all(broker, topic, [(None, b"x" * 4096, None) for _ in range(n)])
    log_dir = os.path.join(broker.dir, "data", "log", f"{topic}-0")
    deadline = time.time() + 60
    while True:
        m = metric_values(broker)
        local = [f for f in os.listdir(log_dir) if f.endswith(".log")]
        if m["aerostream_tier_pending_segments"] == 0 and m["aerostream_tier_uploaded_segments_total"] > 0 \
                and len(local) <= 1:
            break
        assert time.time() < deadline, f"segments not tiered: {local} {m['aerostream_tier_pending_segments']}"
        time.sleep(0.2)
    c, got = consume(broker, topic, n, group=f"g-{topic}")
    c.close()
    assert len(got) == n


def test_otlp_export_carries_request_spans_and_the_broker_metrics():
    with Receiver() as rx:
        b = Broker(extra_args=[
            "--otlp-endpoint", rx.url,
            "--otlp-sample-ratio", "1",
            "--otlp-export-interval-ms", "500",
        ]).start()
        topic = f"otel-{uuid.uuid4().hex[:8]}"
        cold = f"cold-{uuid.uuid4().hex[:8]}"
        try:
            traffic(b, topic, group=f"g-{topic}")
            tiered_traffic(b, cold)
            # a periodic export after the traffic, then the flush at shutdown
            time.sleep(1.5)
        finally:
            assert b.stop() == 0, b.log()
        spans, metrics, resources = rx.snapshot()

    def spans_named(name):
        return [s for s in spans if s["name"] == name and s["attributes"].get("topic") == topic]

    produced = spans_named("produce")
    fetched = spans_named("fetch")
    assert produced, f"no produce span for {topic}: {sorted({s['name'] for s in spans})}"
    assert fetched, f"no fetch span for {topic}: {sorted({s['name'] for s in spans})}"
    assert {s["attributes"]["partition"] for s in produced} == {0, 1}
    assert all("partition" in s["attributes"] for s in fetched)
    assert all(s["attributes"]["bytes"] > 0 for s in produced)
    assert any(r.get("service.name") == "aerostream" for r in resources)

    uploads = [s for s in spans if s["name"] == "upload"]
    assert uploads and all("partition" in s["attributes"] and s["attributes"].get("bytes", 0) > 0 for s in uploads)
    assert [s for s in spans if s["name"] == "cold_read" and s["attributes"].get("topic") == cold], \
        f"no cold_read span for {cold}: {sorted({s['name'] for s in spans})}"

    names = {m["name"] for m in metrics}
    for expected in [
        "aerostream_kafka_requests_total",
        "aerostream_produce_latency_seconds_bucket",
        "aerostream_produce_latency_seconds_count",
        "aerostream_fetch_latency_seconds_bucket",
        "aerostream_partition_bytes_in_total",
        "aerostream_partition_records_in_total",
        "aerostream_partition_log_end_offset",
        "aerostream_consumer_group_lag",
        "aerostream_connections_open",
    ]:
        assert expected in names, f"{expected} not exported; got {sorted(names)}"
    records_in = [
        m for m in metrics
        if m["name"] == "aerostream_partition_records_in_total" and m["attributes"].get("topic") == topic
    ]
    assert records_in and max(m["value"] for m in records_in) > 0
    # the last export holds every record produced, over both partitions
    last = {m["attributes"]["partition"]: m["value"] for m in records_in}
    assert sum(last.values()) == 40, last
    produce_counts = [m["value"] for m in metrics if m["name"] == "aerostream_produce_latency_seconds_count"]
    assert max(produce_counts) > 0


def test_followers_export_a_replicate_span_for_what_they_copy_from_the_leader():
    import shutil

    from confluent_kafka import Producer

    from cluster import VOTERS, Cluster, bootstrap, create_replicated, state

    with Receiver() as rx:
        c = Cluster(extra_args=[
            "--otlp-endpoint", rx.url,
            "--otlp-sample-ratio", "1",
            "--otlp-export-interval-ms", "500",
        ])
        topic = f"otel-repl-{uuid.uuid4().hex[:8]}"
        try:
            for n in VOTERS:
                c.agent(n).launch()
            for n in VOTERS:
                c.agent(n).wait_ready(timeout=90)
            create_replicated(c, topic)
            leader, _replicas, _isr = state(c, topic)
            p = Producer({"bootstrap.servers": bootstrap(c), "acks": "all"})
            for i in range(20):
                p.produce(topic, value=f"r{i}".encode())
            assert p.flush(30) == 0
            time.sleep(1.5)
        finally:
            c.stop_all()
            shutil.rmtree(c.dir, ignore_errors=True)
        spans, _metrics, _resources = rx.snapshot()

    copied = [s for s in spans if s["name"] == "replicate" and s["attributes"].get("topic") == topic
              and s["attributes"].get("bytes", 0) > 0]
    assert copied, f"no replicate span for {topic}: {sorted({s['name'] for s in spans})}"
    assert {s["attributes"]["leader"] for s in copied} == {leader}, copied
    assert all(s["attributes"]["partition"] == 0 for s in copied)


def dashboard_queries():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = []

    def walk(panels):
        for p in panels:
            exprs.extend(t["expr"] for t in p.get("targets", []) if t.get("expr"))
            walk(p.get("panels", []))

    walk(dash["panels"])
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        if isinstance(q, str) and "aerostream_" in q:
            exprs.append(q)
    return exprs


def test_every_dashboard_query_names_metrics_the_broker_exposes(broker):
    topic = f"dash-{uuid.uuid4().hex[:8]}"
    traffic(broker, topic, group=f"g-{topic}")
    exposed = exposed_names(scrape(broker))
    exprs = dashboard_queries()
    assert len(exprs) >= 10, exprs
    missing = {}
    for e in exprs:
        used = set(re.findall(r"\b(aerostream_[a-zA-Z0-9_]+)", e))
        assert used, f"query names no AeroStream metric: {e}"
        gone = used - exposed
        if gone:
            missing[e] = sorted(gone)
    assert not missing, f"queries naming metrics /metrics does not show: {json.dumps(missing, indent=1)}"


def test_without_an_endpoint_nothing_is_exported(monkeypatch):
    with Receiver() as rx:
        # the SDK's own variable must not turn the export on by itself
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        b = Broker(extra_args=["--otlp-export-interval-ms", "200"]).start()
        topic = f"quiet-{uuid.uuid4().hex[:8]}"
        try:
            traffic(b, topic, group=f"g-{topic}", partitions=1, n=10)
        finally:
            assert b.stop() == 0, b.log()
        spans, metrics, _ = rx.snapshot()
    assert spans == [] and metrics == []
