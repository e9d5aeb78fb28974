"""An acks=all producer run as its own process (so it can run inside a
network namespace): writes to partition 0 of TOPIC for SECONDS, then waits
for outstanding records, and writes every acknowledged record as a JSON
line {"offset": .., "value": .., "t": ack time} to OUT, then one line
{"epoch_bumps": N}: how often librdkafka bumped its producer epoch (it then
re-sends records whose outcome it did not know under new sequence numbers,
which may write them twice: librdkafka issue #4953).

    python3 ns_producer.py BOOTSTRAP TOPIC PREFIX SECONDS OUT

With AEROSTREAM_NS_KEEP_LOGS=DIR, librdkafka's log lines go to
DIR/PREFIX-rdkafka.log as well (its `debug` contexts: "eos", or
AEROSTREAM_NS_RDKAFKA_DEBUG), to tell after a failed run what the client
was told and when.
"""

import json
import logging
import os
import sys
import time

from confluent_kafka import Producer


def main():
    bootstrap, topic, prefix, seconds, out = sys.argv[1:6]
    acked = []
    bumps = []

    keep = os.environ.get("AEROSTREAM_NS_KEEP_LOGS")
    if keep:
        os.makedirs(keep, exist_ok=True)
    client_log = open(os.path.join(keep, f"{prefix}-rdkafka.log"), "a") if keep else None

    class Bumps(logging.Handler):
        def emit(self, record):
            if client_log:
                client_log.write(f"{time.time():.3f} {record.getMessage()}\n")
                client_log.flush()
            if "bumped epoch" in record.getMessage():
                bumps.append(record.getMessage())
            elif "fatal" in record.getMessage().lower():
                print(f"{prefix}: {record.getMessage()}", file=sys.stderr, flush=True)

    log = logging.getLogger("rdkafka")
    log.setLevel(logging.DEBUG)
    log.addHandler(Bumps())

    def error(err):
        # a fatal error ends the producer: say which (on stderr, which the
        # test shows when the producer fails)
        print(f"{prefix}: producer error: {err}", file=sys.stderr, flush=True)

    def report(err, msg):
        if err is None:
            acked.append({"offset": msg.offset(), "value": msg.value().decode(), "t": time.time()})

    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 2,
        "message.timeout.ms": 30000,
        "request.timeout.ms": 5000,
        "socket.timeout.ms": 5000,
        "topic.metadata.refresh.interval.ms": 1000,
        "debug": os.environ.get("AEROSTREAM_NS_RDKAFKA_DEBUG", "eos"),
        "logger": log,
        "error_cb": error,
    })
    deadline = time.time() + float(seconds)
    i = 0
    while time.time() < deadline:
        try:
            p.produce(topic, value=f"{prefix}-{i}".encode(), partition=0, on_delivery=report)
            i += 1
        except BufferError:
            pass
        p.poll(0.005)
    p.flush(60)
    with open(out, "w") as f:
        for a in acked:
            f.write(json.dumps(a) + "\n")
        f.write(json.dumps({"epoch_bumps": len(bumps)}) + "\n")
    print(f"{prefix}: {len(acked)} of {i} acknowledged, {len(bumps)} epoch bumps")


if __name__ == "__main__":
    main()
