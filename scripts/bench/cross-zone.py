#!/usr/bin/env python3
"""Cross-zone bytes per produced and per consumed byte, in a simulated
three-zone cluster.

Each zone is a network namespace holding one agent (`--rack zone-N`) and
that zone's clients, which reach their own agent over the namespace's
loopback; the zones reach one another only through their veth links to a
bridge, so every byte counted on those links crossed a zone boundary:
replication, forwarded requests, metastore traffic and clients talking to
an agent in another zone alike.

Phases, each measured on the links alone (the agents' own
`aerostream_cross_zone_*_bytes_total` counters are printed beside them):

  idle        nothing but the cluster's own chatter (metastore, leases)
  produce     one Java producer per zone, keyless records, acks=all, RF 3,
              the default partitioner (any partition, any leader)
  produce-az  the same with `partitioner.rack.aware=true` and `client.rack`
              (KIP-1123, kafka-clients 4.4): records go to partitions led
              in the producer's own zone
  consume     one consumer per zone reads the whole topic from the leaders
  consume-az  the same with `client.rack` (KIP-392): each reads from the
              replica in its zone

Needs root (network namespaces), java 17+ and mvn (the producer's
kafka-clients, cached under $AEROSTREAM_M2), python3 with
confluent-kafka. Uses $AEROSTREAM_BIN, else the debug binary under
$CARGO_TARGET_DIR (bytes do not depend on the build).

Usage: scripts/bench/cross-zone.py [--records-per-zone N] [--size BYTES]
"""

import argparse
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "clients"))

import netns  # noqa: E402
from cluster import eventually  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

ZONES = (1, 2, 3)
PARTITIONS = 6
CONSUMER = r"""
import sys
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, parts, want, rack = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
conf = {"bootstrap.servers": bootstrap, "group.id": "cz-" + rack + str(len(rack)), "enable.auto.commit": False,
        "fetch.max.bytes": 8 << 20}
if rack != "-":
    conf["client.rack"] = rack
c = Consumer(conf)
c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
got = size = 0
while got < want:
    for m in c.consume(1000, 5):
        if not m.error():
            got += 1
            size += len(m.value())
c.close()
print("consumed", got, "bytes", size)
"""


def link_bytes(net):
    """Bytes that left each zone's namespace so far (the bridge side of its link received them)."""
    out = {}
    for n in ZONES:
        with open(f"/sys/class/net/{net.veth(n)}/statistics/rx_bytes") as f:
            out[n] = int(f.read())
    return out


def agent_counters(net):
    total = 0.0
    for n in ZONES:
        url = f"http://{net.addr(n)}:{netns.HTTP_PORT}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("aerostream_cross_zone_sent_bytes_total "):
                    total += float(line.split()[1])
    return total


def classpath():
    m2 = os.environ.get("AEROSTREAM_M2", os.path.expanduser("~/.cache/aerostream/m2"))
    out = os.path.join(m2, "cross-zone-classpath.txt")
    subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", f"-Dmaven.repo.local={m2}", "-f", os.path.join(HERE, "cross-zone", "pom.xml"),
                    "dependency:build-classpath", f"-Dmdep.outputFile={out}"], check=True)
    with open(out) as f:
        return f.read().strip()


def phase(net, name, procs_for_zone, payload_of):
    before_links, before_agents = link_bytes(net), agent_counters(net)
    t0 = time.time()
    procs = {n: net.run_in(n, procs_for_zone(n), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in ZONES}
    payload = 0
    for n, p in procs.items():
        out, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"{name} in zone {n} failed:\n{out}\n{err[-3000:]}")
        payload += payload_of(out)
    seconds = time.time() - t0
    after_links = link_bytes(net)
    crossed = sum(after_links[n] - before_links[n] for n in ZONES)
    counted = agent_counters(net) - before_agents
    return name, payload, crossed, counted, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records-per-zone", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    why = netns.available()
    if why:
        sys.exit(f"cross-zone.py: {why}")
    cp = classpath()
    producer = os.path.join(HERE, "cross-zone", "ZoneProducer.java")
    topic = "cross-zone"
    rows = []
    with netns.cluster(ZONES, node_args=lambda n: ["--rack", f"zone-{n}"]) as (net, agents):
        admin = AdminClient({"bootstrap.servers": agents[1].bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)

        def leaders():
            md = admin.list_topics(topic, timeout=10).topics[topic].partitions
            return len(md) == PARTITIONS and all(p.leader > 0 and len(p.isrs) == 3 for p in md.values()) and md
        md = eventually("every partition has a leader and three in-sync replicas", leaders, timeout=60)
        by_zone = {n: sum(1 for p in md.values() if p.leader == n) for n in ZONES}
        print(f"leaders per zone: {by_zone}", flush=True)

        before = link_bytes(net)
        time.sleep(10)
        idle = sum(link_bytes(net)[n] - before[n] for n in ZONES) / 10
        print(f"idle chatter: {idle:,.0f} bytes/s across zones", flush=True)

        acked = lambda out: int(out.split("bytes")[1].split()[0])  # noqa: E731
        for name, aware in (("produce", "false"), ("produce-az", "true")):
            rows.append(phase(net, name, lambda n: [
                "java", "-cp", cp, producer, agents[n].bootstrap, topic, f"zone-{n}", aware,
                str(args.records_per_zone), str(args.size)], acked))
            print("{}: {:,} payload bytes, {:,} bytes crossed zones, {:.1f} s".format(*rows[-1][:3], rows[-1][4]),
                  flush=True)
        total = 2 * len(ZONES) * args.records_per_zone
        for name, rack in (("consume", lambda n: "-"), ("consume-az", lambda n: f"zone-{n}")):
            rows.append(phase(net, name, lambda n: [
                sys.executable, "-c", CONSUMER, agents[n].bootstrap, topic, str(PARTITIONS), str(total), rack(n)],
                acked))
            print("{}: {:,} payload bytes, {:,} bytes crossed zones, {:.1f} s".format(*rows[-1][:3], rows[-1][4]),
                  flush=True)

    print()
    print(f"three zones, one agent each, RF 3, {PARTITIONS} partitions, {args.size}-byte records, "
          f"{args.records_per_zone:,} per zone per produce phase; idle chatter {idle:,.0f} B/s")
    print(f"{'phase':<12} {'payload MB':>11} {'crossed MB':>11} {'per payload byte':>17} "
          f"{'less idle':>10} {'agents counted MB':>18} {'seconds':>8}")
    for name, payload, crossed, counted, seconds in rows:
        net_of_idle = crossed - idle * seconds
        print(f"{name:<12} {payload / 1e6:>11.1f} {crossed / 1e6:>11.1f} {crossed / payload:>17.2f} "
              f"{net_of_idle / payload:>10.2f} {counted / 1e6:>18.1f} {seconds:>8.1f}")


if __name__ == "__main__":
    main()
