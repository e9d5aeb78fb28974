"""The cost report against what the object store itself saw: an agent on
moto's S3 seals and uploads segments large enough for multipart uploads;
moto's request recorder logs every request it receives, and `/v1/cost` must
count the same PUTs, multipart steps, GETs, HEADs and listings, and
`aerostream cost --json` print the same counts."""

import base64
import json
import os
import subprocess
import tempfile
from urllib.parse import parse_qs, urlparse

import pytest

import servers
from harness import Broker, binary, consume_and_check, create_topic, produce, wait_all_tiered, wait_until

BUCKET = "costs"
PREFIX = "cluster-1"
# above the uploader's 16 MiB multipart threshold: each sealed segment is a
# multipart upload of three parts (8 + 8 + up to 8 MiB)
SEGMENT_BYTES = 24 << 20
RECORD_BYTES = 16 << 10
RECORDS = (52 << 20) // RECORD_BYTES


@pytest.fixture
def recorded_moto():
    """moto with its request recorder on, logging to a file of our own."""
    log = tempfile.NamedTemporaryFile(prefix="moto-requests-", suffix=".jsonl", delete=False)
    log.close()
    s = servers.moto(env={"MOTO_ENABLE_RECORDING": "true", "MOTO_RECORDER_FILEPATH": log.name})
    servers.create_bucket(s, BUCKET)
    yield s, log.name
    s.cleanup()
    os.unlink(log.name)


def kind(entry):
    """The request kind of one recorded request, as the cost report names
    it; None for requests outside AeroStream's objects (bucket
    configuration)."""
    url = urlparse(entry["url"])
    query = parse_qs(url.query, keep_blank_values=True)
    path = url.path.strip("/")
    if not (path == BUCKET or path.startswith(f"{BUCKET}/")):
        return None
    agent = next((v for k, v in entry["headers"].items() if k.lower() == "user-agent"), "")
    if "Boto" in agent or "botocore" in agent:
        # this test's own look at the bucket
        return None
    if "lifecycle" in query:
        # the start-up lifecycle check reads bucket configuration, not objects
        return None
    method = entry["method"]
    is_object = path.startswith(f"{BUCKET}/")
    if method == "PUT" and is_object:
        if "partNumber" in query:
            return "put_part"
        headers = {k.lower() for k in entry["headers"]}
        return "copy" if "x-amz-copy-source" in headers else "put"
    if method == "POST" and "uploads" in query:
        return "create_multipart"
    if method == "POST" and "uploadId" in query:
        return "complete_multipart"
    if method == "DELETE" and "uploadId" in query:
        return "abort_multipart"
    if method == "DELETE" and is_object:
        return "delete"
    if method == "POST" and "delete" in query:
        return "delete_batch"
    if method == "GET" and not is_object:
        return "list"
    if method == "GET":
        return "get"
    if method == "HEAD" and is_object:
        return "head"
    return f"other {method} {url.path}?{url.query}"


def recorded(log_path):
    """The recorder's entries. moto serves requests on several threads and
    writes an entry and its newline in two writes, so entries may run
    together or be followed by stray newlines: decode them one after another
    whatever separates them; a last entry still being written is left out."""
    with open(log_path) as f:
        text = f.read()
    decoder = json.JSONDecoder()
    entries, at = [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return entries
        try:
            entry, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return entries
        entries.append(entry)


def moto_counts(log_path, skip):
    counts = {}
    for entry in recorded(log_path)[skip:]:
        k = kind(entry)
        if k == "delete_batch":
            # one request deleting several objects: the report counts objects
            body = entry["body"]
            text = base64.b64decode(body).decode() if entry["body_encoded"] else body
            counts["delete"] = counts.get("delete", 0) + text.count("<Key>")
        elif k is not None:
            counts[k] = counts.get(k, 0) + 1
    return counts


COMPARED = ["put", "create_multipart", "put_part", "complete_multipart", "abort_multipart",
            "get", "head", "list", "delete", "copy"]


def reported(requests):
    return {k: requests[k] for k in COMPARED if requests[k]}


def test_cost_report_counts_the_requests_moto_received(recorded_moto):
    moto, log_path = recorded_moto
    before = len(recorded(log_path))
    broker = Broker(object_store=f"s3://{BUCKET}/{PREFIX}", env=servers.s3_env(moto),
                    extra_args=["--rack", "us-east-1a", "--pack-target-bytes", "0"]).start()
    try:
        # segment.ms: long enough that only size seals the full segments,
        # short enough that the tail seals soon after
        create_topic(broker.bootstrap, "costly", {"segment.bytes": str(SEGMENT_BYTES), "segment.ms": "20000",
                                                  "local.retention.bytes": "0"})
        assert produce(broker.bootstrap, "costly", 0, RECORDS, RECORD_BYTES) == []
        wait_all_tiered(broker, "costly", timeout=300)

        def agreed():
            seen = moto_counts(log_path, before)
            report = json.loads(broker.http("/v1/cost"))
            mine = reported(report["object_store"]["requests"])
            theirs = {k: v for k, v in seen.items() if k in COMPARED}
            last[:] = [mine, theirs]
            return mine == theirs and (report, seen)

        last = []

        report, seen = wait_until("the report counts what moto received", agreed, timeout=60, interval=1)
        assert last
        assert not [k for k in seen if k not in COMPARED], f"requests of no known kind: {seen}"
        req = report["object_store"]["requests"]
        # two sealed segments of nearly 24 MiB went up in three parts each; the rest in single PUTs
        assert req["create_multipart"] >= 2 and req["complete_multipart"] == req["create_multipart"]
        assert req["put_part"] >= 3 * req["create_multipart"]
        assert req["put"] > 0
        assert req["errors"] == 0
        # what the bucket holds is what the PUTs and completed uploads wrote
        objects = servers.s3_keys(moto, BUCKET, PREFIX + "/")
        assert len(objects) == req["put"] + req["complete_multipart"] - req["delete"]
        assert req["bytes_written"] >= RECORDS * RECORD_BYTES
        assert report["object_store"]["put_class"] == (req["put"] + req["create_multipart"] + req["put_part"]
                                                       + req["complete_multipart"] + req["list"] + req["copy"]
                                                       + req["rename"])
        assert report["storage"]["object_bytes"] >= RECORDS * RECORD_BYTES
        assert report["rack"] == "us-east-1a"
        assert "checked 2026-12" in report["prices"]["source"]
        e = report["monthly_estimate_usd"]
        assert e["put_requests"] > 0 and e["object_storage"] > 0
        assert abs(e["total"] - sum(v for k, v in e.items() if k != "total")) < 1e-9

        # reading it all back from object storage: ranged GETs, counted as moto saw them
        consume_and_check(broker.bootstrap, "costly", RECORDS, RECORD_BYTES)
        try:
            report, seen = wait_until("the report counts moto's GETs", agreed, timeout=60, interval=1)
        except AssertionError:
            raise AssertionError(f"the agent counted {last[0]}, moto saw {last[1]}") from None
        req = report["object_store"]["requests"]
        # the cold cache's GETs, plus reads of segments' sidecar objects, of
        # which the absent ones are 404s: billed requests, counted as failed
        tiering = json.loads(broker.http("/v1/tiering"))
        sidecar_reads = req["get"] - tiering["cache"]["gets"]
        assert 0 <= req["errors"] <= sidecar_reads, (req, tiering["cache"])
        assert req["bytes_read"] >= RECORDS * RECORD_BYTES
        assert report["object_store"]["get_class"] == req["get"] + req["head"]

        # the CLI prints the same counts, valued at the prices it is given
        cli = subprocess.run([binary(), "cost", "--http", f"127.0.0.1:{broker.http_port}", "--json",
                              "--price", "put_per_1000=0.01"],
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        printed = json.loads(cli.stdout)
        now = json.loads(broker.http("/v1/cost"))["object_store"]["requests"]
        assert reported(printed["object_store"]["requests"]) == reported(now) == reported(req)
        assert printed["prices"]["put_per_1000"] == 0.01
        # twice the PUT price, twice the PUT line (at the CLI's own moment's rate)
        hours = printed["uptime_seconds"] / 3600
        expected = printed["object_store"]["put_class"] / hours * 730 / 1000 * 0.01
        assert abs(printed["monthly_estimate_usd"]["put_requests"] - expected) < 1e-6 * expected

        table = subprocess.run([binary(), "cost", "--http", f"127.0.0.1:{broker.http_port}"],
                               capture_output=True, text=True, timeout=60)
        assert table.returncode == 0, table.stderr
        assert "MONTHLY ESTIMATE" in table.stdout and "checked 2026-12" in table.stdout

        # the same counters on /metrics
        m = broker.metrics()
        assert m['aerostream_object_store_requests_total{op="put_part"}'] == req["put_part"]
    finally:
        broker.cleanup()
