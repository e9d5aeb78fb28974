#!/usr/bin/env python3
"""acks=all latency and cost of `durability=object-store` against three
replicas, in one run on one cluster: three agents on this machine sharing
one S3 bucket (moto), two topics of the same shape (one replicated three
times with min.insync.replicas=2, one durable in object storage), and the
same `loadtest` workload against each, one after the other, with the
Java producer's defaults (linger.ms=5, five requests in flight).

For each topic it reports the publish and end-to-end latency percentiles,
the object-store requests the agents sent during the run (by kind, and PUTs
per GiB the producers wrote, warm-up and drain included), and the bytes followers copied from leaders (what crosses
zones when the replicas sit in three zones).

moto answers on this machine in about a millisecond; S3 Standard's own
PUT latency (tens of ms) is not in these figures. `--put-delay-ms` adds a
fixed delay to every object-store request through the agents' fault
injector (a test build, `cargo build -p agent --features fault-injection`)
to see what a slower store does to the object-store topic.

Usage: scripts/bench/durability.py [--rate 2000] [--duration 30]
       [--put-delay-ms N] [--out DIR]
Environment: AEROSTREAM_BIN, LOADTEST_BIN (default: the release builds,
built here when missing). Needs confluent-kafka and moto
(tests/requirements.txt).
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid

root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(root, "tests", "clients"))
sys.path.insert(0, os.path.join(root, "tests", "tiering"))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import servers  # noqa: E402
from cluster import Cluster, agent_metrics, eventually, metadata  # noqa: E402

PARTITIONS = 4
WORKLOAD = """name: durability
partitions: 4
message_size: 1024
producers: 2
consumers: 2
rate: {rate}
acks: all
linger_ms: 5
batch_size: 131072
compression: none
warmup: 5s
duration: {duration}s
drain_timeout: 60s
"""


def totals(c):
    """Object-store requests by kind, written bytes, and follower copies, summed over agents."""
    out = {}
    for a in c.running().values():
        for k, v in agent_metrics(a).items():
            if (k.startswith("aerostream_object_store_requests_total")
                    or k in ("aerostream_replica_fetch_bytes_received_total",
                             "aerostream_produced_bytes_total",
                             "aerostream_object_store_written_bytes_total",
                             "aerostream_wal_objects_total")):
                out[k] = out.get(k, 0) + v
    return out


def delta(after, before):
    return {k: v - before.get(k, 0) for k, v in after.items()}


def build(args):
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    if "AEROSTREAM_BIN" not in os.environ:
        features = ["--features", "fault-injection"] if args.put_delay_ms else []
        subprocess.run(["cargo", "build", "--release", "-p", "agent", *features], cwd=root, check=True)
        os.environ["AEROSTREAM_BIN"] = os.path.join(target, "release", "aerostream")
    if "LOADTEST_BIN" not in os.environ:
        subprocess.run(["cargo", "build", "--release", "-p", "loadtest"], cwd=root, check=True)
        os.environ["LOADTEST_BIN"] = os.path.join(target, "release", "loadtest")


def run_load(c, topic, workload, out, label):
    agents = c.running()
    bootstrap = ",".join(f"127.0.0.1:{a.port}" for a in agents.values())
    pids = ",".join(str(a.proc.pid) for a in agents.values())
    result = os.path.join(out, f"{label}.json")
    subprocess.run([os.environ["LOADTEST_BIN"], "run", "--workload", workload,
                    "--bootstrap", bootstrap, "--topic", topic, "--no-create",
                    "--broker-label", label, "--broker-pid", pids, "--json", result,
                    # the Java producer's defaults (Kafka 4.0: linger.ms=5,
                    # five requests in flight): a broker answers one request
                    # per connection at a time, so a producer with unbounded
                    # requests in flight sends tiny ones and queues behind
                    # them once acknowledging takes longer than the linger
                    "--client-config", "max.in.flight.requests.per.connection=5"],
                   check=True)
    with open(result) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--duration", type=int, default=30)
    ap.add_argument("--put-delay-ms", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(
        root, "benchmarks", "results", time.strftime("%Y-%m-%d") + "-durability"))
    args = ap.parse_args()
    build(args)
    os.makedirs(args.out, exist_ok=True)
    workload = os.path.join(args.out, "workload.yaml")
    with open(workload, "w") as f:
        f.write(WORKLOAD.format(rate=args.rate, duration=args.duration))

    moto = servers.moto()
    servers.create_bucket(moto, "aerostream")
    os.environ.update(servers.s3_env(moto))
    extra = ["--object-store", "s3://aerostream/bench"]
    if args.put_delay_ms:
        extra += ["--object-store-faults", "true"]
    c = Cluster(extra_args=extra).start_voters()
    try:
        if args.put_delay_ms:
            for a in c.running().values():
                urllib.request.urlopen(
                    f"http://127.0.0.1:{a.http_port}/admin/object-store/faults"
                    f"?latency={args.put_delay_ms}", timeout=5).read()
        any_port = next(iter(c.running().values())).port
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{any_port}"})
        suffix = uuid.uuid4().hex[:6]
        topics = {
            "rf3": (f"rf3-{suffix}", {"min.insync.replicas": "2"}),
            "object-store": (f"osd-{suffix}", {"durability": "object-store"}),
        }
        for name, configs in topics.values():
            admin.create_topics([NewTopic(name, PARTITIONS, 3, config=configs)])[name].result(30)
        eventually("every partition has a leader", lambda: all(
            metadata(any_port)["topics"][name][p][1] > 0
            for name, _ in topics.values() for p in range(PARTITIONS)))
        rows = []
        for label, (name, _) in topics.items():
            before = totals(c)
            r = run_load(c, name, workload, args.out, label)
            used = delta(totals(c), before)
            written_gib = used.get("aerostream_produced_bytes_total", 0) / 2**30
            puts = sum(v for k, v in used.items() if 'op="put' in k or 'op="upload_part' in k
                       or 'op="complete' in k or 'op="create_multipart' in k)
            rows.append((label, r, used, puts, written_gib))
        print()
        print(f"acks=all, {args.rate} msg/s of 1 KiB over {PARTITIONS} partitions, "
              f"{args.duration} s, three agents on one machine, moto S3"
              + (f" with {args.put_delay_ms} ms added to every request" if args.put_delay_ms else ""))
        print("| topic | publish p50 | p99 | p99.9 | end-to-end p99 | PUT-type requests | per GiB | follower copies |")
        print("|---|---|---|---|---|---|---|---|")
        for label, r, used, puts, gib in rows:
            pl, e2e = r["publish_latency"], r["end_to_end_latency"]
            per_gib = f"{puts / gib:,.0f}" if gib else "n/a"
            copied = used.get("aerostream_replica_fetch_bytes_received_total", 0)
            print(f"| {label} | {pl['p50_ms']:.2f} ms | {pl['p99_ms']:.2f} ms | {pl['p999_ms']:.2f} ms | "
                  f"{e2e['p99_ms']:.2f} ms | {puts:,.0f} | {per_gib} | {copied / 2**20:,.1f} MiB |")
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump([{"topic": label, "publish_latency": r["publish_latency"],
                        "end_to_end_latency": r["end_to_end_latency"], "requests": used}
                       for label, r, used, _, _ in rows], f, indent=2)
    finally:
        c.stop_all()
        moto.cleanup()


if __name__ == "__main__":
    main()
