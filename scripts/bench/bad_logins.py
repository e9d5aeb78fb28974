#!/usr/bin/env python3
"""Failed logins at a steady rate against an agent, for
scripts/bench/bad-logins.sh: Kafka SASL/PLAIN logins with a wrong password
(confluent-kafka clients, each with a password of its own that it retries
about once a second) and HTTP Basic logins with a new wrong password each
(guesses), each at its own rate, until stopped (SIGTERM) or for --seconds.

Usage:
  bad_logins.py --kafka HOST:PORT --http HOST:PORT [--kafka-rate 100]
                [--http-rate 100] [--user admin] [--seconds N]
                [--http-sources N]

--http-sources N sends the HTTP logins from N loopback addresses
(127.0.1.2, 127.0.1.3, ...) in turn, so that no single address uses up its
allowance of failed logins: the agent then checks every password (the
worst case for its CPU). Kafka logins come from 127.0.0.1 (librdkafka
cannot choose its source address).

Prints one line per second: failed logins attempted so far (HTTP) and
clients running (Kafka); the agent's own counters say what it refused.
"""

import argparse
import base64
import http.client
import itertools
import signal
import sys
import threading
import time


def kafka_flood(bootstrap, user, rate, stop):
    """`rate` clients, each logging in with a wrong password about once a
    second (librdkafka reconnects after a failed login)."""
    from confluent_kafka import Producer

    config = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": "not-the-password",
        "reconnect.backoff.ms": 1000,
        "reconnect.backoff.max.ms": 1000,
        # keep their errors out of the output
        "log_level": 0,
        "error_cb": lambda _e: None,
    }
    clients = []
    # started over one second, so their retries spread evenly
    for i in range(rate):
        if stop.is_set():
            break
        clients.append(Producer({**config, "sasl.password": f"not-the-password-{i}"}))
        time.sleep(1.0 / max(rate, 1))
    while not stop.is_set():
        for c in clients:
            c.poll(0)
        time.sleep(0.1)
    return clients


def http_flood(addr, user, rate, sources, stop, counts, sent):
    host, port = addr.rsplit(":", 1)
    interval = 1.0 / rate
    next_at = time.monotonic()
    while not stop.is_set():
        # one count over all senders: each address in turn, every guess new
        i = next(sent)
        n = 1 + i % sources
        source = (f"127.0.{1 + n // 250}.{1 + n % 250}", 0) if sources > 1 else None
        guess = f"{user}:guess-{i}"
        header = "Basic " + base64.b64encode(guess.encode()).decode()
        try:
            c = http.client.HTTPConnection(host, int(port), timeout=5, source_address=source)
            c.request("GET", "/v1/topics", headers={"Authorization": header})
            c.getresponse().read()
            c.close()
            counts["http"] += 1
        except OSError:
            counts["http_errors"] += 1
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            # behind: do not burst to catch up
            next_at = time.monotonic()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kafka", required=True)
    p.add_argument("--http", required=True)
    p.add_argument("--kafka-rate", type=int, default=100)
    p.add_argument("--http-rate", type=int, default=100)
    p.add_argument("--user", default="admin")
    p.add_argument("--seconds", type=float, default=0)
    p.add_argument("--http-sources", type=int, default=1)
    a = p.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    counts = {"http": 0, "http_errors": 0}
    sent = itertools.count()
    # several senders, each a share of the rate: one slow answer (the agent
    # holds a failed login 100 ms) must not hold the others up
    senders = max(1, a.http_rate // 5)
    threads = [
        threading.Thread(
            target=http_flood,
            args=(a.http, a.user, a.http_rate / senders, a.http_sources, stop, counts, sent),
            daemon=True,
        )
        for _ in range(senders)
    ]
    kafka = threading.Thread(target=kafka_flood, args=(a.kafka, a.user, a.kafka_rate, stop), daemon=True)
    for t in threads:
        t.start()
    kafka.start()
    started = time.monotonic()
    while not stop.is_set():
        time.sleep(1)
        elapsed = time.monotonic() - started
        print(
            f"[{elapsed:5.0f}s] http failed logins sent {counts['http']} "
            f"({counts['http'] / elapsed:.0f}/s, {counts['http_errors']} errors)",
            flush=True,
        )
        if a.seconds and elapsed >= a.seconds:
            stop.set()
    for t in threads:
        t.join(timeout=6)
    kafka.join(timeout=6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
