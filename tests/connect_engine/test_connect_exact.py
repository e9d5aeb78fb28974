"""The built-in Connect engine through Kafka Connect's REST API on one
agent, against a real S3 server (moto): a Datagen source writes 10,000
records, the object-storage sink writes them to the bucket as Parquet,
and pyarrow reads back each exactly once; the connectors' offsets; pause
and resume; delete; the sink's figures on /metrics."""

import json
import subprocess
import time
import urllib.request
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

import servers
from broker import Broker, binary
from connect_rest import all_running, bucket_rows, call, end_offsets, eventually, seqs, status


def test_datagen_to_parquet_on_s3_exactly_with_pause_and_resume(s3):
    b = Broker().start().wait_ready()
    try:
        base = b.connect_url
        topic = "orders-" + uuid.uuid4().hex[:6]
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics(
            [NewTopic(topic, 1, 1)])[topic].result(30)
        code, body = call(base, "GET", "/connector-plugins")
        assert code == 200 and {"DatagenSource", "ObjectStoreSink"} <= {
            p["class"].rsplit(".", 1)[-1] for p in body}, body

        code, body = call(base, "POST", "/connectors", {"name": "s3", "config": {
            "connector.class": "ObjectStoreSink", "topics": topic, "store.url": "s3://sink/exact",
            "format": "parquet", "flush.size": "1000"}})
        assert code == 201, body
        assert body["type"] == "sink" and body["tasks"] == [{"connector": "s3", "task": 0}], body
        code, body = call(base, "POST", "/connectors", {"name": "gen", "config": {
            "connector.class": "DatagenSource", "kafka.topic": topic, "max.records": "10000",
            "max.interval": "0"}})
        assert code == 201, body
        eventually("both connectors running", lambda: all_running(base, "gen", 1) and all_running(base, "s3", 1))

        rows = eventually("10,000 rows in the bucket",
                          lambda: (r := bucket_rows(s3, "sink", "exact/")) and len(r) >= 10000 and r)
        assert sorted(seqs(rows)) == list(range(10000)), "each record exactly once"
        assert {r["topic"] for r in rows} == {topic}
        assert sorted(r["offset"] for r in rows) == list(range(10000))
        keys = servers.s3_keys(s3, "sink", "exact/")
        assert len(keys) == 10 and all(f"/{topic}/partition=0/{topic}+0+" in k for k in keys), keys

        # the source's offsets are where it stopped
        code, body = call(base, "GET", "/connectors/gen/offsets")
        assert code == 200 and body["offsets"] == [
            {"partition": {"task": 0}, "offset": {"seq": 10000}}], body
        # the sink's are its consumer group's
        code, body = call(base, "GET", "/connectors/s3/offsets")
        assert code == 200 and body["offsets"] == [{
            "partition": {"kafka_topic": topic, "kafka_partition": 0},
            "offset": {"kafka_offset": 10000}}], body

        # pause: a paused source makes nothing; resumed, it goes on
        code, body = call(base, "PUT", "/connectors/gen/config", {
            "connector.class": "DatagenSource", "kafka.topic": topic, "max.records": "-1",
            "max.interval": "5"})
        assert code == 200, body
        eventually("the new config running", lambda: all_running(base, "gen", 1))
        assert call(base, "PUT", "/connectors/gen/pause")[0] == 202
        eventually("paused", lambda: status(base, "gen")["tasks"][0]["state"] == "PAUSED")
        time.sleep(1)
        before = end_offsets(b.bootstrap, topic, 1)
        time.sleep(2)
        assert end_offsets(b.bootstrap, topic, 1) == before, "a paused source produced"
        assert call(base, "PUT", "/connectors/gen/resume")[0] == 202
        eventually("running again", lambda: all_running(base, "gen", 1))
        eventually("records after the resume", lambda: end_offsets(b.bootstrap, topic, 1)[0] > before[0])

        # the command line against the same API
        cli = [binary(), "connect", "--connect", base]
        out = subprocess.run(cli + ["create", "tiny", "--set", "connector.class=DatagenSource",
                                    "--set", f"kafka.topic={topic}", "--set", "max.records=5",
                                    "--set", "max.interval=0"], capture_output=True, text=True)
        assert out.returncode == 0 and "created source connector tiny with 1 task(s)" in out.stdout, out
        listed = eventually("tiny running in `connect list`", lambda: [
            r for r in json.loads(subprocess.run(cli + ["list", "--output", "json"], capture_output=True,
                                                 text=True, check=True).stdout)
            if r["name"] == "tiny" and r["state"] == "RUNNING" and r["tasks_running"] == 1])
        assert listed[0]["kind"] == "source", listed
        assert subprocess.run(cli + ["pause", "tiny"], capture_output=True).returncode == 0
        eventually("tiny paused", lambda: status(base, "tiny")["connector"]["state"] == "PAUSED")
        again = subprocess.run(cli + ["create", "tiny", "--set", "connector.class=DatagenSource",
                                      "--set", f"kafka.topic={topic}"], capture_output=True, text=True)
        assert again.returncode == 1 and "(409)" in again.stderr and "already exists" in again.stderr, again
        assert subprocess.run(cli + ["delete", "tiny"], capture_output=True).returncode == 0

        assert call(base, "DELETE", "/connectors/gen")[0] == 204
        assert call(base, "GET", "/connectors/gen")[0] == 404
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/metrics", timeout=5).read().decode()
        files = [line for line in metrics.splitlines() if line.startswith("aerostream_connect_sink_files_total ")]
        assert files and int(files[0].split()[1]) >= 10, files
    finally:
        b.stop()
