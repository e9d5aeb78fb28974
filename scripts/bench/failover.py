#!/usr/bin/env python3
"""Failover time of a replicated partition: kill -9 its leader again and
again while an idempotent acks=all producer writes, and measure how long
after each kill the first write *sent after the kill* is acknowledged, and
the longest pause between two acknowledgements around it, and the
longest pause while the restarted agent catches up and takes its
leadership back. With
`--signal term` the leader gets SIGTERM instead: a controlled shutdown,
which hands leadership to an in-sync follower before the agent closes.

Three agents on this machine, one partition with three replicas and
min.insync.replicas=2. After each kill the dead agent is restarted and the
next kill waits until all three replicas are in sync again.

Usage: scripts/bench/failover.py [--kills 20] [--lease-ms 800]
       [--signal kill|term] [--retry-backoff-max-ms N] [--out DIR]
Environment: AEROSTREAM_BIN (default: target/release/aerostream, built
here when missing). Needs confluent-kafka (tests/requirements.txt).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(root, "tests", "clients"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cluster import VOTERS, Cluster, eventually, longest_pause, metadata  # noqa: E402


def percentile(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--lease-ms", type=int, default=800)
    ap.add_argument("--signal", choices=["kill", "term"], default="kill",
                    help="kill: SIGKILL (the lease fails the leader over); "
                         "term: SIGTERM (a controlled shutdown hands leadership over)")
    ap.add_argument("--retry-backoff-max-ms", type=int, default=None,
                    help="the producer's retry.backoff.max.ms (librdkafka's default, 1000, when absent)")
    ap.add_argument("--out", default=os.path.join(
        root, "benchmarks", "results", time.strftime("%Y-%m-%d") + "-failover"))
    ap.add_argument("--debug-dir", default=None,
                    help="keep the agents' logs (at info) and the producer's debug log here, "
                         "to find out what a slow failover waited for")
    args = ap.parse_args()
    if "AEROSTREAM_BIN" not in os.environ:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
        subprocess.run(["cargo", "build", "--release", "-p", "agent"], cwd=root, check=True)
        os.environ["AEROSTREAM_BIN"] = os.path.join(target, "release", "aerostream")

    c = Cluster(extra_args=["--agent-lease-ms", str(args.lease_ms),
                            "--replica-lag-time-max-ms", "2000",
                            "--log", "info" if args.debug_dir else "warn"])
    for n in VOTERS:
        c.agent(n).launch()
    for n in VOTERS:
        c.agent(n).wait_ready(timeout=120)
    bootstrap = ",".join(c.agent(n).bootstrap for n in VOTERS)
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics(
        [NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(15)

    def metastore_leader():
        for b in c.running().values():
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{b.http_port}/v1/cluster", timeout=2) as r:
                    return json.load(r).get("metastore_leader")
            except (OSError, ValueError):
                continue
        return None

    def state():
        for b in c.running().values():
            try:
                md = metadata(b.port, timeout=2)
                _e, leader = md["topics"][topic][0]
                return leader, md["replicas"][(topic, 0)][1]
            except (OSError, KeyError, AssertionError):
                continue
        return -1, []

    producer_log = None
    if args.debug_dir:
        import logging
        os.makedirs(args.debug_dir, exist_ok=True)
        producer_log = logging.getLogger("producer")
        handler = logging.FileHandler(os.path.join(args.debug_dir, "producer.log"), mode="w")
        handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
        producer_log.addHandler(handler)
        producer_log.setLevel(logging.DEBUG)
    sent_at, acked_at, errors = {}, {}, []
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 1, "message.timeout.ms": 120000, "socket.timeout.ms": 5000,
                      "retry.backoff.ms": 50, "topic.metadata.refresh.fast.interval.ms": 50,
                      **({"debug": "broker,topic,metadata,msg,eos", "logger": producer_log}
                         if producer_log else {}),
                      **({"retry.backoff.max.ms": args.retry_backoff_max_ms}
                         if args.retry_backoff_max_ms is not None else {})})

        def report(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                acked_at[int(msg.value())] = time.time()
        i = 0
        while not stop.is_set():
            sent_at[i] = time.time()
            p.produce(topic, value=str(i).encode(), partition=0, on_delivery=report)
            i += 1
            p.poll(0.002)
        p.flush(120)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    samples, elected, pauses, returns, led_metastore = [], [], [], [], []
    restarted = None
    try:
        for k in range(args.kills):
            eventually("three in-sync replicas", lambda: len(state()[1]) == 3 and state()[0] > 0,
                       timeout=120)
            time.sleep(1)
            if restarted is not None:
                # the returned agent catches up and takes its leadership back
                returns.append(longest_pause(sorted(acked_at.values()), restarted, time.time()))
            leader, _ = state()
            agent = c.agent(leader)
            led_metastore.append(metastore_leader() == leader)
            killed = time.time()
            if producer_log:
                producer_log.info("=== %s %d: signal to agent %d", args.signal, k + 1, leader)
            if args.signal == "term":
                agent.proc.send_signal(signal.SIGTERM)
            else:
                agent.kill9()
            eventually("Metadata names a new leader",
                       lambda: state()[0] not in (leader, -1), timeout=120, every=0.05)
            elected.append(time.time() - killed)
            first = eventually(
                "a write sent after the kill is acknowledged",
                lambda: min((acked_at[i] for i, s in list(sent_at.items())
                             if s > killed and i in acked_at), default=None),
                timeout=120, every=0.05)
            samples.append(first - killed)
            if agent.proc is not None:
                code = agent.proc.wait(timeout=60)
                agent.proc = None
                if code != 0:
                    print(f"agent {leader} exited with {code} after SIGTERM", flush=True)
            time.sleep(0.5)
            pauses.append(longest_pause(sorted(acked_at.values()), killed, first + 0.5))
            role = " (also the metastore leader)" if led_metastore[-1] else ""
            print(f"{args.signal} {k + 1}/{args.kills}: agent {leader}{role}; new leader in Metadata after "
                  f"{elected[-1]:.2f}s; first write sent after the signal acknowledged "
                  f"{first - killed:.2f}s after it; longest pause between acknowledgements "
                  f"{pauses[-1]:.3f}s", flush=True)
            agent.start(timeout=120)
            restarted = time.time()
    finally:
        stop.set()
        t.join(150)
        c.stop_all()
        if args.debug_dir:
            import shutil
            for n in VOTERS:
                shutil.copy(c.agent(n).log_path, os.path.join(args.debug_dir, f"agent-{n}.log"))
    summary = {
        "kills": len(samples), "lease_ms": args.lease_ms, "signal": args.signal,
        "p50_s": percentile(samples, 50), "p90_s": percentile(samples, 90),
        "p99_s": percentile(samples, 99), "max_s": max(samples), "min_s": min(samples),
        "samples_s": [round(s, 3) for s in samples],
        "new_leader_in_metadata_p50_s": percentile(elected, 50),
        "new_leader_in_metadata_p99_s": percentile(elected, 99),
        "new_leader_in_metadata_s": [round(s, 3) for s in elected],
        "longest_ack_pause_p50_s": percentile(pauses, 50),
        "longest_ack_pause_p99_s": percentile(pauses, 99),
        "longest_ack_pause_s": [round(s, 3) for s in pauses],
        "victim_led_the_metastore": led_metastore[:len(samples)],
        "longest_ack_pause_while_returning_p50_s": percentile(returns, 50) if returns else None,
        "longest_ack_pause_while_returning_p99_s": percentile(returns, 99) if returns else None,
        "longest_ack_pause_while_returning_s": [round(s, 3) for s in returns],
        "producer_errors": errors[:10],
        "acknowledged": len(acked_at),
    }
    os.makedirs(args.out, exist_ok=True)
    name = f"failover-lease-{args.lease_ms}ms"
    if args.signal == "term":
        name = f"failover-sigterm-lease-{args.lease_ms}ms"
    if args.retry_backoff_max_ms is not None:
        name += f"-retry-backoff-max-{args.retry_backoff_max_ms}ms"
        summary["retry_backoff_max_ms"] = args.retry_backoff_max_ms
    with open(os.path.join(args.out, name + ".json"), "w") as f:
        json.dump(summary, f, indent=2)
    line = (f"| {args.signal} | {args.lease_ms} ms | {len(samples)} | {summary['min_s']:.2f} | "
            f"{summary['p50_s']:.2f} | {summary['p90_s']:.2f} | {summary['p99_s']:.2f} | "
            f"{summary['max_s']:.2f} | "
            f"{summary['new_leader_in_metadata_p50_s']:.2f} / {summary['new_leader_in_metadata_p99_s']:.2f} | "
            f"{summary['longest_ack_pause_p50_s']:.2f} / {summary['longest_ack_pause_p99_s']:.2f} | "
            f"{percentile(returns, 50) if returns else 0:.2f} / {percentile(returns, 99) if returns else 0:.2f} |")
    with open(os.path.join(args.out, name + ".md"), "w") as f:
        f.write("| signal | agent lease | kills | min s | p50 s | p90 s | p99 s | max s "
                "| new leader in Metadata p50 / p99 s | longest pause between acks p50 / p99 s "
                "| longest pause while the agent returns p50 / p99 s |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|\n")
        f.write(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
