#!/usr/bin/env python3
"""Throughput of the Connect engine's object-storage sink writing Parquet
to S3 (moto), on one agent: a Datagen source fills a topic with RECORDS
records first, then the sink is created and timed until its figures on
/metrics say every record is written. Prints and writes a markdown
summary: records/s, MB/s of record bytes read, MB/s of Parquet written.

Usage: scripts/bench/connect-s3-sink.sh (builds the release binary)."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "tiering"))
sys.path.insert(0, os.path.join(ROOT, "tests", "connect_engine"))
sys.path.insert(0, os.path.join(ROOT, "tests", "clients"))
import servers  # noqa: E402
from connect_rest import call, eventually  # noqa: E402


def metric(http_port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--flush-size", type=int, default=50_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    s3 = servers.moto()
    servers.create_bucket(s3, "bench")
    env = dict(os.environ, **servers.s3_env(s3), AEROSTREAM_LOG=os.environ.get("AEROSTREAM_LOG", "warn"))
    scratch = tempfile.mkdtemp(prefix="connect-bench-")
    ports = [servers.free_port() for _ in range(5)]
    kafka, http, native, registry, connect = ports
    log = open(os.path.join(args.out, "broker.log"), "w")
    agent = subprocess.Popen([args.binary, "serve", "--data-dir", os.path.join(scratch, "data"),
                              "--kafka-addr", f"127.0.0.1:{kafka}", "--http-addr", f"127.0.0.1:{http}",
                              "--native-addr", f"127.0.0.1:{native}",
                              "--schema-registry-addr", f"127.0.0.1:{registry}",
                              "--connect-addr", f"127.0.0.1:{connect}",
                              "--num-partitions", str(args.partitions)],
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{connect}"
    try:
        eventually("the agent", lambda: call(base, "GET", "/")[0] == 200, timeout=60)
        t0 = time.time()
        code, body = call(base, "POST", "/connectors", {"name": "fill", "config": {
            "connector.class": "DatagenSource", "kafka.topic": "bench", "tasks.max": "2",
            "max.records": str(args.records), "max.interval": "0"}})
        assert code == 201, body
        eventually("the topic filled", lambda: metric(http, "aerostream_connect_source_records_total")
                   >= args.records, timeout=1200, every=1)
        fill = time.time() - t0
        call(base, "DELETE", "/connectors/fill")

        t1 = time.time()
        code, body = call(base, "POST", "/connectors", {"name": "sink", "config": {
            "connector.class": "ObjectStoreSink", "topics": "bench", "store.url": "s3://bench/run",
            "format": "parquet", "flush.size": str(args.flush_size), "rotate.schedule.interval.ms": "2000"}})
        assert code == 201, body
        eventually("every record written", lambda: metric(http, "aerostream_connect_sink_records_total")
                   >= args.records, timeout=1800, every=0.5)
        took = time.time() - t1
        files = metric(http, "aerostream_connect_sink_files_total")
        written = metric(http, "aerostream_connect_sink_bytes_total")
        # the records' bytes as read: keys and values (Datagen's JSON)
        sample = servers.s3_client(s3)
        keys = servers.s3_keys(s3, "bench", "run/")
        import io
        import pyarrow.parquet as pq
        first = pq.read_table(io.BytesIO(sample.get_object(Bucket="bench", Key=keys[0])["Body"].read()))
        per_record = sum(len(r["value"] or "") + len(r["key"] or "") for r in first.to_pylist()) / first.num_rows
        read_mb = per_record * args.records / 1e6
        result = {
            "records": args.records, "partitions": args.partitions, "flush_size": args.flush_size,
            "fill_seconds": round(fill, 1), "sink_seconds": round(took, 2),
            "records_per_second": round(args.records / took),
            "record_mb_per_second": round(read_mb / took, 2),
            "parquet_mb_per_second": round(written / 1e6 / took, 2),
            "files": files, "parquet_mb": round(written / 1e6, 2), "record_mb": round(read_mb, 2),
        }
        print(json.dumps(result, indent=2))
        with open(os.path.join(args.out, "result.json"), "w") as f:
            json.dump(result, f, indent=2)
    finally:
        agent.terminate()
        agent.wait(30)
        s3.cleanup()


if __name__ == "__main__":
    main()
