#!/usr/bin/env python3
"""The table of scripts/bench/sdks.sh: one row per way in and rate, from the
load generator's reports (*.loadtest.json) and the SDK benches' reports
(*.sdk.json) of one results folder."""
import json
import pathlib
import sys

NAMES = {
    "librdkafka": "librdkafka, Kafka wire (loadtest)",
    "rust-tcp": "Rust SDK, native TCP (loadtest)",
    "rust-quic": "Rust SDK, native QUIC (loadtest)",
    "go-tcp": "Go SDK, native TCP",
    "go-quic": "Go SDK, native QUIC",
    "java-tcp": "Java SDK, native TCP",
    "java-quic": "Java SDK, native QUIC",
    "node-tcp": "Node.js SDK, native TCP",
}
ORDER = list(NAMES)


def row_of(path):
    name = path.name
    d = json.loads(path.read_text())
    if name.endswith(".loadtest.json"):
        way, rate = name[: -len(".loadtest.json")].rsplit("-", 1)
        lost = d["delivery"]["lost"] + d["errors"]["failed_sends"]
        return way, rate, {
            "published": d["publish"]["msgs_per_sec"],
            "consumed": d["consume"]["msgs_per_sec"],
            "pub": d["publish_latency"],
            "e2e": d["end_to_end_latency"],
            "cpu": d["loadgen_resources"]["cpu_percent"],
            "rss": d["loadgen_resources"].get("rss_max_mib"),
            "failed": lost,
            "method": "adaptive search" if rate == "max" else "paced",
        }
    way, rate = name[: -len(".sdk.json")].rsplit("-", 1)
    return way, rate, {
        "published": d["publish"]["msgs_per_sec"],
        "consumed": d["consume"]["msgs_per_sec"],
        "pub": d["publish_latency"],
        "e2e": d["end_to_end_latency"],
        "cpu": d["cpu_percent"],
        "rss": d.get("rss_max_mib"),
        "failed": d["publish"].get("failed", 0),
        "method": "flat out" if rate == "max" else "paced",
    }


def ms(v):
    return f"{v:.2f}"


def main():
    folder = pathlib.Path(sys.argv[1])
    rows = [row_of(p) for p in sorted(folder.glob("*.json"))]
    rates = sorted({r for _, r, _ in rows}, key=lambda r: (r == "max", r))
    for rate in rates:
        these = sorted((r for r in rows if r[1] == rate), key=lambda r: ORDER.index(r[0]) if r[0] in ORDER else 99)
        base = next((v for w, _, v in these if w == "librdkafka"), None)
        print(f"\n### {'maximum rate' if rate == 'max' else f'{int(rate):,} msg/s'}\n")
        print("| way in | method | published msg/s | vs librdkafka | consumed msg/s | publish p50 ms | p99 | p99.9 | end-to-end p50 ms | p99 | client CPU % | client RSS MiB | failed |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for way, _, v in these:
            ratio = f"{v['published'] / base['published']:.2f}x" if base and base["published"] else "-"
            rss = f"{v['rss']:.0f}" if v["rss"] is not None else "-"
            print(
                f"| {NAMES.get(way, way)} | {v['method']} | {v['published']:,.0f} | {ratio} | {v['consumed']:,.0f} "
                f"| {ms(v['pub']['p50_ms'])} | {ms(v['pub']['p99_ms'])} | {ms(v['pub']['p999_ms'])} "
                f"| {ms(v['e2e']['p50_ms'])} | {ms(v['e2e']['p99_ms'])} | {v['cpu']:.0f} | {rss} | {v['failed']} |"
            )


if __name__ == "__main__":
    main()
