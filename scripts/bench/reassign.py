#!/usr/bin/env python3
"""How long moving a partition takes when most of its history is in object
storage, for histories of different sizes.

Three agents on this machine share one object store (a local folder). For
each size, a one-replica partition on agent 1 gets SIZE MB of records with
small segments and `local.retention.bytes=0`, so sealed segments leave agent
1's disk once uploaded; then `aerostream drain --node 1` moves it to another
agent and the time until agent 1 holds no replica is recorded, with what the
new replica holds on its disk. The first and last records are read back
through the new leader (the first from object storage), and 32 MB more are
written to check that the new leader uploads its own sealed segments. Agent
1 is undrained before the next size.

With `--keep-local`, sealed segments stay on agent 1's disk as well
(the default `local.retention.*`): the new replica still copies only what
object storage does not hold yet, since it starts where the manifest ends.

Usage: scripts/bench/reassign.py [--sizes-mb 64,512] [--keep-local] [--out DIR]
Environment: AEROSTREAM_BIN (default: target/release/aerostream).
Needs confluent-kafka (tests/requirements.txt).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid

root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(root, "tests", "clients"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker import binary  # noqa: E402
from cluster import VOTERS, Cluster, eventually, metadata  # noqa: E402

RECORD = 16 * 1024


def topic_bytes(agent, topic, suffix=".log"):
    total, files = 0, 0
    for base, _dirs, names in os.walk(os.path.join(agent.dir, "data", "log")):
        if os.path.basename(base).startswith(topic):
            for n in names:
                if n.endswith(suffix):
                    total += os.path.getsize(os.path.join(base, n))
                    files += 1
    return total, files


def pending_uploads(agent):
    """Sealed segments the agent has not committed to object storage yet."""
    url = f"http://127.0.0.1:{agent.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("aerostream_tier_pending_segments"):
                return float(line.split()[-1])
    raise AssertionError("no aerostream_tier_pending_segments in /metrics")


def produce(bootstrap, topic, mb):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                  "enable.idempotence": True,  # key i lands at offset i
                  "batch.size": 1 << 20, "compression.type": "none"})
    payload = os.urandom(RECORD)
    n = mb * 1024 * 1024 // RECORD
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=payload, key=str(i).encode(), partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(300) == 0
    return n


def read_at(bootstrap, topic, offset):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, offset)])
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                return m.offset(), m.key()
    finally:
        c.close()
    raise AssertionError(f"nothing read at offset {offset}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-mb", default="64,512")
    ap.add_argument("--keep-local", action="store_true",
                    help="keep sealed segments on the leader's disk too (default local.retention)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes_mb.split(",")]

    c = Cluster()
    store = os.path.join(c.dir, "objects")
    os.makedirs(store)
    c.extra_args += ["--object-store", f"file://{store}"]
    for n in VOTERS:
        c.agent(n).launch()
    for n in VOTERS:
        c.agent(n).wait_ready(timeout=90)
    one = c.agent(1)
    boot = ",".join(c.agent(n).bootstrap for n in VOTERS)
    admin = AdminClient({"bootstrap.servers": boot})
    results = []
    try:
        for mb in sizes:
            topic = f"moved-{mb}mb-{uuid.uuid4().hex[:6]}"
            config = {"segment.bytes": str(8 << 20), "segment.ms": "2000",
                      "min.insync.replicas": "1"}
            if not args.keep_local:
                config["local.retention.bytes"] = "0"
            admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1]],
                                          config=config)])[topic].result(30)
            eventually("the topic has a leader",
                       lambda: metadata(one.port)["topics"].get(topic, {}).get(0, (0, -1))[1] == 1)
            t0 = time.time()
            records = produce(boot, topic, mb)
            produced_s = time.time() - t0
            if args.keep_local:
                time.sleep(3)  # segment.ms seals the tail
                eventually("every sealed segment is in object storage",
                           lambda: pending_uploads(one) == 0, timeout=600, every=1)
            else:
                eventually("sealed segments left agent 1's disk for object storage",
                           lambda: topic_bytes(one, topic)[1] <= 2, timeout=600, every=1)
            local_before, _ = topic_bytes(one, topic)
            t0 = time.time()
            out = subprocess.run([binary(), "drain", "--node", "1", "--bootstrap", one.bootstrap,
                                  "--timeout-secs", "600"], capture_output=True, text=True)
            moved_s = time.time() - t0
            assert out.returncode == 0, out.stdout + out.stderr
            md = metadata(one.port)
            leader = md["topics"][topic][0][1]
            dest = c.agent(leader)
            copied, _ = topic_bytes(dest, topic)
            first = read_at(boot, topic, 0)
            last = read_at(boot, topic, records - 1)
            assert first == (0, b"0") and last == (records - 1, str(records - 1).encode()), \
                (first, last)
            # the new leader uploads what it takes from now on
            produce(boot, topic, 32)
            try:
                time.sleep(3)
                eventually("the new leader's sealed segments go to object storage",
                           lambda: pending_uploads(dest) == 0
                           and (args.keep_local or topic_bytes(dest, topic)[1] <= 2),
                           timeout=120, every=1)
                tiering_continues = True
            except AssertionError:
                tiering_continues = False
            subprocess.run([binary(), "drain", "--node", "1", "--bootstrap", one.bootstrap,
                            "--undo"], check=True, capture_output=True)
            r = {"history_mb": mb, "keep_local": args.keep_local, "records": records, "produce_s": round(produced_s, 1),
                 "local_on_source_bytes": local_before, "move_s": round(moved_s, 2),
                 "copied_to_new_replica_bytes": copied, "new_leader": leader,
                 "tiering_continues_on_new_leader": tiering_continues}
            print(json.dumps(r), flush=True)
            results.append(r)
    finally:
        c.stop_all()
        for a in c.agents.values():
            shutil.rmtree(a.dir, ignore_errors=True)
        shutil.rmtree(c.dir, ignore_errors=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "reassign.json"), "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
