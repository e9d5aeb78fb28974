#!/usr/bin/env python3
"""A month of a steady workload, priced from measured ratios.

The cost report (`aerostream cost`, `/v1/cost`) prices what an agent has
counted so far. This script asks the question before deployment: what would
a month of W GiB/s written and R times that read cost? It multiplies the
ratios our own benchmarks measured by the volume of the month, at the same
list prices the cost report uses by default, and prints the published
AutoMQ figures for the same workload beside them.

Measured inputs (read from the results files, or given as flags):

  object-store PUT-class requests per GiB sealed, with packing
      benchmarks/results/<dir>/packing.txt      (scripts/bench/packing.sh)
  bytes that cross zones per byte produced and per byte consumed, with and
  without zone-aware clients (RF 3 over three zones)
      benchmarks/results/<dir>/cross-zone.txt   (scripts/bench/cross-zone.py)

A topic created with `durability=object-store` is priced too: no
replication across zones (the cross-zone ratio less the two copies
replication sends), and on top of the sealed segments' requests one PUT
per write-ahead object: each of --agents agents puts one every
--wal-linger-ms while it receives writes, or one per 8 MiB when that comes
sooner (storage/src/tier/wal.rs).

Assumed: consumers tail the log (reads come from the leader's page cache or
its zone's replica, not from object storage: no GETs), every byte is kept
for --retention-days in object storage, local disks are instance-store
NVMe (no price of their own). Compute is not estimated here: the machines
a given rate needs were not measured at that rate.

Usage: scripts/bench/cost-projection.py [--results DIR] [--write-gib-s 1]
       [--read-fanout 1] [--retention-days 3] [--agents 6]
       [--wal-linger-ms 5] [--price KEY=USD ...]
"""

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The cost report's defaults (docs/tiering.md, "Cost report"): AWS list
# prices, us-east-1, checked 2026-12.
PRICES = {
    "put_per_1000": 0.005,
    "get_per_1000": 0.0004,
    "storage_per_gb_month": 0.023,
    "cross_zone_per_gb": 0.01,
}
HOURS_PER_MONTH = 730

# Published by AutoMQ ("AutoMQ vs. Apache Kafka Benchmarks and Cost",
# https://www.automq.com/docs/automq/benchmarks/automq-vs-apache-kafka-benchmarks-and-cost):
# 1 GiB/s produced and consumed, 256 partitions, three zones, USD per month.
AUTOMQ = {
    "AutoMQ": {"compute": 2859, "storage": 5961, "requests": 3952, "cross_zone": 128},
    "Apache Kafka (AutoMQ's estimate)": {
        "compute": 18447,
        "storage": 69984,
        "requests": 0,
        "cross_zone": 138240,
    },
}


def measured(results):
    """The ratios the results files hold (None where a file is missing)."""
    out = {}
    packing = os.path.join(results, "packing.txt")
    if os.path.exists(packing):
        text = open(packing).read()
        packed = text.split("######## packed", 1)[-1]
        m = re.search(r"PUT-class: \d+ \(([\d.]+) per GiB sealed\)", packed)
        if m:
            out["put_per_gib"] = float(m.group(1))
    cross = os.path.join(results, "cross-zone.txt")
    if os.path.exists(cross):
        for line in open(cross):
            f = line.split()
            if f and f[0] in ("produce", "produce-az", "consume", "consume-az") and len(f) > 4:
                out[f[0]] = float(f[4])  # "less idle": per payload byte
    return out


def money(x):
    return f"${x:,.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "benchmarks/results/2026-12-07-vm"))
    ap.add_argument("--write-gib-s", type=float, default=1.0)
    ap.add_argument("--read-fanout", type=float, default=1.0, help="bytes read per byte written")
    ap.add_argument("--retention-days", type=float, default=3.0)
    ap.add_argument("--put-per-gib", type=float, help="PUT-class requests per GiB sealed")
    ap.add_argument("--price", action="append", default=[], metavar="KEY=USD")
    ap.add_argument("--agents", type=int, default=6,
                    help="agents taking writes (for write-ahead PUTs of durability=object-store)")
    ap.add_argument("--wal-linger-ms", type=float, default=5.0)
    args = ap.parse_args()

    prices = dict(PRICES)
    for p in args.price:
        key, _, value = p.partition("=")
        if key not in prices:
            sys.exit(f"unknown price {key!r}; known: {', '.join(prices)}")
        prices[key] = float(value)

    m = measured(args.results)
    put_per_gib = args.put_per_gib or m.get("put_per_gib")
    missing = [k for k in ("produce", "produce-az", "consume", "consume-az") if k not in m]
    if put_per_gib is None or missing:
        sys.exit(
            f"{args.results} lacks packing.txt or cross-zone.txt figures "
            f"({', '.join(missing) or 'PUT per GiB'}); run scripts/bench/packing.sh and "
            "scripts/bench/cross-zone.py, or pass --results"
        )

    seconds = HOURS_PER_MONTH * 3600
    written_gib = args.write_gib_s * seconds
    read_gib = written_gib * args.read_fanout
    stored_gib = args.write_gib_s * args.retention_days * 86400
    gb = 2**30 / 1e9  # cross-zone transfer is billed per GB (10^9)

    def projection(produce_ratio, consume_ratio, extra_puts=0.0):
        crossed_gib = written_gib * produce_ratio + read_gib * consume_ratio
        return {
            "compute": None,
            "storage": stored_gib * prices["storage_per_gb_month"],
            "requests": (written_gib * put_per_gib + extra_puts) / 1000 * prices["put_per_1000"],
            # each direction is billed: the sender's and the receiver's side
            "cross_zone": crossed_gib * gb * prices["cross_zone_per_gb"] * 2,
            "crossed_gib": crossed_gib,
        }

    per_agent_mib_s = args.write_gib_s * 1024 / max(args.agents, 1)
    wal_objects_s = args.agents * max(1000 / args.wal_linger_ms, per_agent_mib_s / 8)
    wal_puts = wal_objects_s * seconds
    rows = {
        "AeroStream RF 3, zone-aware clients": projection(m["produce-az"], m["consume-az"]),
        "AeroStream RF 3, zone-unaware clients": projection(m["produce"], m["consume"]),
        "AeroStream durability=object-store, zone-aware clients": projection(
            max(m["produce-az"] - 2.0, 0.0), m["consume-az"], wal_puts),
    }
    print(
        f"# {args.write_gib_s:g} GiB/s written, {args.read_fanout:g}x read, "
        f"{args.retention_days:g} days kept in object storage, {HOURS_PER_MONTH} h per month"
    )
    print(f"# measured: {put_per_gib:g} PUT-class requests per GiB sealed (packing.txt); cross-zone "
          f"bytes per byte produced {m['produce-az']:.2f} zone-aware / {m['produce']:.2f} not, "
          f"per byte consumed {m['consume-az']:.2f} / {m['consume']:.2f} (cross-zone.txt)")
    print(f"# prices (USD): {', '.join(f'{k}={v:g}' for k, v in prices.items())}; "
          "cross-zone billed in both directions")
    print()
    print("| USD per month | compute | object storage | object-store requests | cross-zone transfer | total without compute |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, r in rows.items():
        total = r["storage"] + r["requests"] + r["cross_zone"]
        print(f"| {name} | not estimated | {money(r['storage'])} | {money(r['requests'])} "
              f"| {money(r['cross_zone'])} | {money(total)} |")
    for name, r in AUTOMQ.items():
        total = r["storage"] + r["requests"] + r["cross_zone"]
        print(f"| {name}, published | {money(r['compute'])} | {money(r['storage'])} "
              f"| {money(r['requests'])} | {money(r['cross_zone'])} | {money(total)} |")
    print()
    aware = rows["AeroStream RF 3, zone-aware clients"]
    replication = written_gib * 2 * gb * prices["cross_zone_per_gb"] * 2
    print(f"replication alone (two copies of every byte across zones): {money(replication)} of the "
          f"zone-aware {money(aware['cross_zone'])} cross-zone line")
    print(f"durability=object-store: {wal_objects_s:,.0f} write-ahead PUTs a second "
          f"({args.agents} agents, {args.wal_linger_ms:g} ms linger), "
          f"{money(wal_puts / 1000 * prices['put_per_1000'])} of its requests line")


if __name__ == "__main__":
    main()
