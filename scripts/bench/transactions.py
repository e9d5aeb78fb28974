#!/usr/bin/env python3
"""Produce throughput with transactions against plain idempotent produce,
in one run on one agent: confluent-kafka (librdkafka) writes the same
records (100-byte values, acks=all) to a topic of 4 partitions, first as
an idempotent producer, then as a transactional one committing every
`--per-txn` records (100 by default), and reports records/s of each and
their ratio, with the p50/p99 of the commit calls.

Usage: scripts/bench/transactions.py [--records 200000] [--per-txn 100] [--out DIR]
Environment: AEROSTREAM_BIN (default: target/release/aerostream, built
here when missing). Needs confluent-kafka (tests/requirements.txt).
"""

import argparse
import json
import os
import subprocess
import sys
import time
import uuid

root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(root, "tests", "clients"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker import Broker  # noqa: E402


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))] if xs else 0.0


def idempotent(bootstrap, topic, records, value):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5})
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % 4)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    return records / (time.perf_counter() - t0), []


def transactional(bootstrap, topic, records, value, per_txn):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "acks": "all", "linger.ms": 5})
    p.init_transactions(60)
    commits = []
    t0 = time.perf_counter()
    written = 0
    while written < records:
        p.begin_transaction()
        for _ in range(min(per_txn, records - written)):
            p.produce(topic, value=value, partition=written % 4)
            written += 1
        c0 = time.perf_counter()
        p.commit_transaction(60)
        commits.append(time.perf_counter() - c0)
    return records / (time.perf_counter() - t0), commits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--per-txn", type=int, default=100)
    ap.add_argument("--out", default=os.path.join(
        root, "benchmarks", "results", time.strftime("%Y-%m-%d") + "-transactions"))
    args = ap.parse_args()
    if "AEROSTREAM_BIN" not in os.environ:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
        subprocess.run(["cargo", "build", "--release", "-p", "agent"], cwd=root, check=True)
        os.environ["AEROSTREAM_BIN"] = os.path.join(target, "release", "aerostream")
    b = Broker().start()
    try:
        value = b"x" * 100
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topics = [f"bench-idem-{uuid.uuid4().hex[:6]}", f"bench-txn-{uuid.uuid4().hex[:6]}"]
        for t in topics:
            admin.create_topics([NewTopic(t, 4, 1)])[t].result(30)
        idem_rate, _ = idempotent(b.bootstrap, topics[0], args.records, value)
        print(f"idempotent: {idem_rate:,.0f} records/s", flush=True)
        txn_rate, commits = transactional(b.bootstrap, topics[1], args.records, value, args.per_txn)
        print(f"transactions of {args.per_txn}: {txn_rate:,.0f} records/s", flush=True)
    finally:
        b.stop()
    summary = {
        "records": args.records, "records_per_transaction": args.per_txn, "value_bytes": 100,
        "idempotent_records_per_s": round(idem_rate),
        "transactional_records_per_s": round(txn_rate),
        "ratio": round(txn_rate / idem_rate, 3),
        "transactions": len(commits),
        "commit_p50_ms": round(percentile(commits, 50) * 1000, 2),
        "commit_p99_ms": round(percentile(commits, 99) * 1000, 2),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "transactions.json"), "w") as f:
        json.dump(summary, f, indent=2)
    line = (f"| {args.records} | {args.per_txn} | {summary['idempotent_records_per_s']:,} | "
            f"{summary['transactional_records_per_s']:,} | {summary['ratio']:.2f} | "
            f"{summary['commit_p50_ms']:.1f} / {summary['commit_p99_ms']:.1f} |")
    with open(os.path.join(args.out, "transactions.md"), "w") as f:
        f.write("| records | records per transaction | idempotent records/s | transactional records/s "
                "| ratio | commit p50 / p99 ms |\n|---|---|---|---|---|---|\n" + line + "\n")
    print(line)


if __name__ == "__main__":
    main()
