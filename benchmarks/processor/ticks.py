#!/usr/bin/env python3
"""Synthetic financial ticks into a Kafka topic, for the stream processor's
benchmark (scripts/bench/processor.sh).

Each record's value is one JSON object, its key the symbol:

    {"symbol": "S017", "price": 101.25, "size": 300, "ts": 1700000000000}

Symbols S000..S<N-1> are drawn at random (seeded); each symbol's price is a
random walk in cents from a seeded start, never below 1.00; sizes are 100 to
1000 in steps of 100.

Two modes:

  --count N               pre-load N ticks as fast as the broker takes them;
                          event times start at --epoch-ms and the i-th tick
                          has ts = epoch + floor(i * step_us / 1000), so the
                          topic's content (values and, per key, their order)
                          depends only on the seed and the options.
  --rate R --duration S   paced open loop: R ticks/s for S seconds, the i-th
                          tick due at start + i/R whatever the broker does;
                          ts = the wall clock when it is produced (for
                          latency). Prints how far behind schedule it fell.
                          The producer is warmed up first (its connection,
                          producer id, the topic's metadata) by writing a
                          few records to --warmup-topic, so that its start
                          does not count as latency.

Prints progress every --progress seconds, and one JSON summary line at the
end (`{"ticks": ..., "seconds": ..., "rate": ...}`).
"""

import argparse
import json
import random
import signal
import sys
import time

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", required=True, help="host:port of a broker")
    p.add_argument("--topic", default="ticks")
    p.add_argument("--create", type=int, metavar="PARTITIONS", default=0,
                   help="create the topic with this many partitions first (an existing one is kept)")
    p.add_argument("--symbols", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--count", type=int, help="pre-load this many ticks with deterministic event times")
    mode.add_argument("--rate", type=float, help="paced ticks per second, ts = wall clock")
    p.add_argument("--duration", type=float, help="seconds of paced ticks (with --rate)")
    p.add_argument("--epoch-ms", type=int, default=1_700_000_000_000,
                   help="event time of the first pre-loaded tick")
    p.add_argument("--step-us", type=int, default=20,
                   help="event-time step between pre-loaded ticks, microseconds (20: 50,000 ticks per second)")
    p.add_argument("--warmup-topic", help="paced mode: the topic the producer warms up on "
                   "(default TOPIC-warmup, created with one partition if missing)")
    p.add_argument("--compression", default="lz4", choices=["lz4", "none", "zstd", "snappy", "gzip"])
    p.add_argument("--linger-ms", type=float, default=5)
    p.add_argument("--batch-bytes", type=int, default=1 << 20)
    p.add_argument("--progress", type=float, default=2.0, help="seconds between progress lines")
    a = p.parse_args(argv)
    if a.rate is not None and not a.duration:
        p.error("--rate needs --duration")
    if a.symbols < 1 or a.symbols > 100_000:
        p.error("--symbols must be 1..100000")
    return a


class Ticks:
    """The tick sequence: deterministic for a seed."""

    def __init__(self, symbols, seed):
        self.rng = random.Random(seed)
        width = max(3, len(str(symbols - 1)))
        self.names = [f"S{i:0{width}d}" for i in range(symbols)]
        self.keys = [n.encode() for n in self.names]
        # prices in cents: a start between 10.00 and 500.00 per symbol
        self.cents = [self.rng.randrange(1_000, 50_000) for _ in range(symbols)]
        self.symbols = symbols

    def next(self, ts):
        """(key bytes, value str) of the next tick at event time ts."""
        rng = self.rng
        s = rng.randrange(self.symbols)
        c = self.cents[s] + rng.randrange(-5, 6)
        if c < 100:
            c = 100
        self.cents[s] = c
        size = rng.randrange(1, 11) * 100
        return self.keys[s], (f'{{"symbol": "{self.names[s]}", "price": {c // 100}.{c % 100:02d}, '
                              f'"size": {size}, "ts": {ts}}}')


def make_producer(a):
    return Producer({
        "bootstrap.servers": a.bootstrap,
        "linger.ms": a.linger_ms,
        "batch.size": a.batch_bytes,
        "batch.num.messages": 100_000,
        "compression.type": a.compression,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 1 << 20,
        "acks": "all",
        "enable.idempotence": True,
        # the default sticky partitioner of librdkafka hashes keys (murmur2
        # as the Java client does): a symbol's ticks stay in one partition,
        # in order
        "partitioner": "murmur2_random",
    })


def create_topic(a, topic, partitions, quiet=False):
    # log_level 4: not librdkafka's notice about its unserved background events at exit
    admin = AdminClient({"bootstrap.servers": a.bootstrap, "log_level": 4})
    fut = admin.create_topics([NewTopic(topic, partitions, 1)])[topic]
    try:
        fut.result(30)
        if not quiet:
            print(f"ticks: created topic {topic} with {partitions} partitions", flush=True)
    except KafkaException as e:
        if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
            raise
        if not quiet:
            print(f"ticks: topic {topic} exists", flush=True)


def warm_up(a, producer):
    """Connects the producer, has it get its producer id and the topic's
    metadata, by writing to another topic: the first records of a fresh
    producer wait for all that (half a second), which is no engine's
    latency."""
    topic = a.warmup_topic or f"{a.topic}-warmup"
    create_topic(a, topic, 1, quiet=True)
    producer.list_topics(a.topic, timeout=30)
    for _ in range(10):
        producer.produce(topic, b"{}")
    if producer.flush(30):
        raise SystemExit("ticks: the warm-up records were not delivered within 30 s")


def main(argv=None):
    a = parse_args(argv)
    stop = []
    # stopped (the benchmark interrupted): no more ticks, no report
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    if a.create:
        create_topic(a, a.topic, a.create)
    producer = make_producer(a)
    if a.rate is not None:
        warm_up(a, producer)
    ticks = Ticks(a.symbols, a.seed)
    failed = [0]

    def on_delivery(err, _msg):
        if err is not None:
            failed[0] += 1
            if failed[0] <= 5:
                print(f"ticks: delivery failed: {err}", file=sys.stderr, flush=True)

    topic = a.topic
    produce = producer.produce
    start = time.monotonic()
    next_line = start + a.progress
    sent = 0
    behind_max = 0.0

    def send(key, value):
        while True:
            try:
                produce(topic, value, key, on_delivery=on_delivery)
                return
            except BufferError:
                # the local queue is full: wait for deliveries
                producer.poll(0.01)

    def progress(now, final=False):
        secs = now - start
        print(f"ticks: {'done' if final else 'progress'}: {sent:,} ticks in {secs:.1f} s "
              f"({sent / max(secs, 1e-9):,.0f}/s)"
              + (f", at most {behind_max * 1000:.1f} ms behind schedule" if a.rate else ""), flush=True)

    if a.count is not None:
        epoch, step = a.epoch_ms, a.step_us
        for i in range(a.count):
            if stop:
                break
            key, value = ticks.next(epoch + i * step // 1000)
            send(key, value)
            sent += 1
            if sent & 4095 == 0:
                producer.poll(0)
                now = time.monotonic()
                if now >= next_line:
                    progress(now)
                    next_line = now + a.progress
    else:
        total = int(a.rate * a.duration)
        interval = 1.0 / a.rate
        # ticks due within this many seconds go out together: paced in
        # bursts of at most 1 ms
        while sent < total and not stop:
            now = time.monotonic()
            due = min(total, int((now - start) / interval) + 1)
            if due <= sent:
                time.sleep(min(0.0005, (sent * interval) - (now - start)))
                continue
            behind_max = max(behind_max, now - start - sent * interval)
            ts = time.time_ns() // 1_000_000
            while sent < due:
                key, value = ticks.next(ts)
                send(key, value)
                sent += 1
            producer.poll(0)
            if now >= next_line:
                progress(now)
                next_line = now + a.progress
    if stop:
        producer.purge()
        producer.flush(1)
        return 143
    left = producer.flush(120)
    now = time.monotonic()
    progress(now, final=True)
    if left or failed[0]:
        print(f"ticks: {left} not delivered after 120 s, {failed[0]} failed", file=sys.stderr, flush=True)
        return 1
    print(json.dumps({"ticks": sent, "seconds": round(now - start, 3), "rate": round(sent / (now - start), 1),
                      "behind_max_ms": round(behind_max * 1000, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
