"""Kafka Connect's REST API calls and the bucket's Parquet rows, for the
Connect engine's tests."""

import io
import json
import urllib.error
import urllib.request
import uuid

import pyarrow.parquet as pq
from confluent_kafka import Consumer, TopicPartition

import cluster
import servers


def call(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, (json.loads(raw) if raw else None)


def eventually(what, check, timeout=90, every=0.5):
    """Polls `check` until it returns something truthy (cluster.eventually,
    with JSON and HTTP errors counted as not yet)."""
    return cluster.eventually(what, lambda: _quiet(check), timeout, every)


def _quiet(check):
    try:
        return check()
    except (OSError, ValueError) as e:
        raise AssertionError(e) from e


def status(base, name):
    code, body = call(base, "GET", f"/connectors/{name}/status")
    assert code == 200, body
    return body


def all_running(base, name, tasks):
    s = status(base, name)
    states = [t["state"] for t in s["tasks"]]
    return s if s["connector"]["state"] == "RUNNING" and states == ["RUNNING"] * tasks else None


def end_offsets(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe-" + uuid.uuid4().hex[:6]})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        c.close()


def bucket_rows(s3, bucket, prefix, seen=None):
    """Every row of every Parquet file under the prefix. With `seen` (a
    dict kept between calls) a file already read, with the same ETag, is not
    fetched again: polling a growing bucket then costs a listing and the new
    or rewritten files, not a download of everything (which slows moto, and
    the sink with it)."""
    client = servers.s3_client(s3)
    seen = {} if seen is None else seen
    rows = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            key, etag = obj["Key"], obj["ETag"]
            assert key.endswith(".parquet"), key
            if (key, etag) not in seen:
                body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
                seen[(key, etag)] = pq.read_table(io.BytesIO(body)).to_pylist()
            rows.extend(seen[(key, etag)])
    return rows


def seqs(rows):
    return [json.loads(r["value"])["seq"] for r in rows]
