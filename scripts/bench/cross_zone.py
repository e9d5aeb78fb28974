"""Cross-zone bytes per produced byte with replication factor 3 across
three zones, from the agents' own peer counters.

Three agents on this machine, each in its own zone (`--rack zone-N`); a
topic of 6 partitions with replication factor 3 (one replica per zone,
leaders spread); BENCH_MB (200) MiB produced with acks=all. Reports the
bytes the agents sent to agents of other zones
(`aerostream_cross_zone_sent_bytes_total`, replication and forwarding) per
byte of record values produced, and what a producer in one zone sends
across zones when it writes to leaders spread over the three (two thirds
of its bytes: the agents do not see client traffic, so this share is
computed from where the leaders are). Asserts nothing.

Run: cargo build --release -p agent --bin aerostream &&
AEROSTREAM_BIN=$CARGO_TARGET_DIR/release/aerostream python3 scripts/bench/cross_zone.py"""

import os
import shutil
import sys
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "clients"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cluster import Cluster, bootstrap, eventually, state  # noqa: E402

MB = 1 << 20
MEGABYTES = int(os.environ.get("BENCH_MB", "200"))
SIZE = 1024
PARTITIONS = 6


def counter(agent, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{agent.http_port}/metrics", timeout=5) as r:
        total = 0.0
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total


def main():
    c = Cluster()
    for n, a in ((1, "zone-1"), (2, "zone-2"), (3, "zone-3")):
        c.agent(n).extra_args[c.agent(n).extra_args.index(f"rack-{n}")] = a
    c.start_voters()
    try:
        topic = f"cross-zone-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(15)
        eventually("every partition has three in-sync replicas",
                   lambda: all(len(state(c, topic, p)[2]) == 3 for p in range(PARTITIONS)))
        leaders = [state(c, topic, p)[0] for p in range(PARTITIONS)]
        agents = list(c.running().values())
        before = sum(counter(a, "aerostream_cross_zone_sent_bytes_total") for a in agents)
        p = Producer({"bootstrap.servers": bootstrap(c), "acks": "all", "linger.ms": 5,
                      "batch.size": 1 << 20, "compression.type": "none"})
        count = MEGABYTES * MB // SIZE
        payload = os.urandom(SIZE)
        for i in range(count):
            while True:
                try:
                    p.produce(topic, value=payload, partition=i % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        assert p.flush(120) == 0
        eventually("followers caught up", lambda: all(len(state(c, topic, q)[2]) == 3
                                                      for q in range(PARTITIONS)))
        after = sum(counter(a, "aerostream_cross_zone_sent_bytes_total") for a in agents)
        produced = count * SIZE
        in_zone_1 = sum(1 for leader in leaders if leader == 1) / PARTITIONS
        print(f"leaders by partition: {leaders}")
        print(f"produced {produced / MB:.0f} MiB of record values")
        print(f"agents sent across zones: {(after - before) / MB:.0f} MiB = "
              f"{(after - before) / produced:.2f} bytes per produced byte (replication)")
        print(f"a producer in zone-1 sends {1 - in_zone_1:.2f} of its bytes to leaders in other zones")
        print(f"total for RF 3 across three zones: {(after - before) / produced + 1 - in_zone_1:.2f} "
              "cross-zone bytes per produced byte (consumers reading in their zone, KIP-392, add none)")
    finally:
        c.stop_all()
        shutil.rmtree(c.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
