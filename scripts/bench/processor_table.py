#!/usr/bin/env python3
"""The stream processor benchmark's results (scripts/bench/processor.sh) as
one JSON file and a Markdown table.

Usage: processor_table.py RESULTS_DIR

Reads RESULTS_DIR/throughput-*.json, latency-*.json, compare-*.json and
machine.txt; writes RESULTS_DIR/results.json and RESULTS_DIR/table.md, and
prints the table.
"""

import glob
import json
import os
import sys

# The seed's published figures: a 3-node cluster against Apache Flink. Shown
# beside the measurements as claims; nothing here measured them.
SEED_CLAIMS = [
    ("sustained throughput", "1.48 M events/s", "420 k events/s"),
    ("latency p50", "0.32 ms", "4.2 ms"),
    ("latency p99", "0.85 ms", "48.6 ms"),
    ("latency p99.9", "1.95 ms", "185 ms"),
    ("RSS per node", "420 MB", "3.8 GB"),
]


def load(pattern):
    out = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            try:
                out.append(json.load(f))
            except ValueError:
                pass
    return out


def num(x, unit=""):
    if x is None:
        return "–"
    if isinstance(x, float) and x < 100:
        return f"{x:.2f}{unit}" if x < 10 else f"{x:.1f}{unit}"
    return f"{x:,.0f}{unit}"


def pcts(lat, which):
    d = (lat or {}).get(which) or {}
    if not d.get("count"):
        return "–"
    return " / ".join(num(d.get(k)) for k in ("p50", "p99", "p999"))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    thr = load(os.path.join(d, "throughput-*.json"))
    lat = load(os.path.join(d, "latency-*.json"))
    cmp_ = {}
    for path in sorted(glob.glob(os.path.join(d, "compare-*.json"))):
        with open(path) as f:
            cmp_[os.path.basename(path)[len("compare-"):-len(".json")]] = json.load(f)
    machine = ""
    if os.path.exists(os.path.join(d, "machine.txt")):
        with open(os.path.join(d, "machine.txt")) as f:
            machine = f.read()

    keys = []
    for r in thr + lat:
        k = (r["pipeline"], r["engine"])
        if k not in keys:
            keys.append(k)
    keys.sort(key=lambda k: (k[0], k[1] != "aerostream", k[1]))
    by_t = {(r["pipeline"], r["engine"]): r for r in thr}
    by_l = {(r["pipeline"], r["engine"]): r for r in lat}

    lines = ["# Stream processor: aerostream process and a Polars baseline", ""]
    if machine:
        lines += ["```", machine.rstrip(), "```", ""]
    count = next((r.get("count") for r in thr if r.get("count")), None)
    rate = next((r.get("rate") for r in lat if r.get("rate")), None)
    dur = next((r.get("duration_s") for r in lat if r.get("duration_s")), None)
    lines += [
        "Measured here, each engine pinned to one core, the agent on another."
        + (f" Throughput: {count:,} pre-loaded ticks." if count else "")
        + (f" Latency: {rate:,.0f} ticks/s for {dur:.0f} s, ts = wall clock." if rate else ""),
        "Latencies in ms as p50 / p99 / p99.9; ingest→state: record added to its window minus its Kafka"
        " timestamp; window result: window handed to the sink minus its window_end.",
        "",
        "| pipeline | engine | events/s per core | events/s wall | CPU s | ingest→state (ms) | window result (ms)"
        " | CPU share at the rate | peak RSS, throughput / latency (MB) | output equal |",
        "|---|---|---:|---:|---:|---|---|---:|---|---|",
    ]
    for k in keys:
        t, l = by_t.get(k, {}), by_l.get(k, {})
        c = cmp_.get(k[0])
        equal = "–" if c is None else ("yes" if c.get("equal") else "**NO**")
        if t.get("unsupported") or l.get("unsupported"):
            why = t.get("error") or l.get("error")
            lines.append(f"| {k[0]} | {k[1]} | not supported by this binary: {why} | | | | | | | |")
            continue
        note = ""
        if t and not t.get("ok"):
            note = f" (throughput run failed: {t.get('error')})"
        if l and not l.get("ok"):
            note += f" (latency run: {l.get('error') or 'failed'})"
        lat_ms = l.get("latency_ms")
        nostats = l and not l.get("stats_supported")
        lines.append(
            f"| {k[0]} | {k[1]}{note} | {num(t.get('events_per_s_core'))} | {num(t.get('events_per_s_wall'))}"
            f" | {num(t.get('cpu_s'))}"
            f" | {'no --stats' if nostats else pcts(lat_ms, 'ingest_to_state')}"
            f" | {'no --stats' if nostats else pcts(lat_ms, 'window_result')}"
            f" | {num(l.get('cpu_share'))} | {num(t.get('peak_rss_mb'))} / {num(l.get('peak_rss_mb'))} | {equal} |")
    for p, c in cmp_.items():
        if not c.get("equal"):
            lines += ["", f"Mismatch in {p}:", ""] + [f"- {x}" for x in c.get("problems", [])]
    lines += [
        "",
        "## The seed's published claims (not measured here)",
        "",
        "As published by the seed, from a 3-node cluster against Apache Flink; no run of this benchmark"
        " produced them, and they are not comparable with the one-core figures above.",
        "",
        "| figure | AeroStream (seed's claim) | Flink (seed's claim) |",
        "|---|---|---|",
    ] + [f"| {a} | {b} | {c} |" for a, b, c in SEED_CLAIMS]
    table = "\n".join(lines) + "\n"
    with open(os.path.join(d, "table.md"), "w") as f:
        f.write(table)
    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump({
            "machine": machine,
            "throughput": [{k: v for k, v in r.items() if k not in ("cpu_samples", "log_tail")} for r in thr],
            "latency": [{k: v for k, v in r.items() if k != "log_tail"} for r in lat],
            "correctness": cmp_,
            "seed_claims_not_measured_here": {
                "setup": "3-node cluster against Apache Flink, as published by the seed",
                "aerostream": {"events_per_s": 1.48e6, "latency_ms": {"p50": 0.32, "p99": 0.85, "p999": 1.95},
                               "rss_mb_per_node": 420},
                "flink": {"events_per_s": 420e3, "latency_ms": {"p50": 4.2, "p99": 48.6, "p999": 185},
                          "rss_mb_per_node": 3800},
            },
        }, f, indent=2)
        f.write("\n")
    print(table, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
