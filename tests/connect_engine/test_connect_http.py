"""The Connect engine's HTTP sink against a real HTTP server on one agent:
a Datagen source's 1,000 records reach the webhook in JSON batches, the
first requests answered 503 and retried; an endpoint that refuses (400)
fails the task with the answer as its trace, or, with
errors.tolerance=all and a dead-letter topic, sends the records there."""

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from confluent_kafka import Consumer

from broker import Broker
from connect_rest import call, eventually, status


class Hook:
    """A webhook that records what it is sent; `fail_first` requests are
    answered 503, and every request to /refuse 400."""

    def __init__(self, fail_first=0):
        self.bodies, self.answers = [], []
        self.fail_first = fail_first
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/refuse":
                    code = 400
                elif hook.fail_first > 0:
                    hook.fail_first -= 1
                    code = 503
                else:
                    code = 200
                    hook.bodies.append(({k.lower(): v for k, v in self.headers.items()}, json.loads(body)))
                hook.answers.append(code)
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b"no thanks" if code == 400 else b"")

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def records(self):
        return [r for _h, batch in self.bodies for r in batch]


def test_records_reach_the_webhook_through_retries_and_refusals_fail_or_go_to_the_dead_letter_topic():
    hook = Hook(fail_first=2)
    b = Broker().start().wait_ready()
    try:
        base = b.connect_url
        topic = "hooks-" + uuid.uuid4().hex[:6]
        code, body = call(base, "POST", "/connectors", {"name": "gen", "config": {
            "connector.class": "DatagenSource", "kafka.topic": topic, "max.records": "1000",
            "max.interval": "0"}})
        assert code == 201, body
        code, body = call(base, "POST", "/connectors", {"name": "hook", "config": {
            "connector.class": "HttpSink", "topics": topic, "http.api.url": hook.url + "/in",
            "http.headers": "X-Team: data", "batch.max.size": "100", "batch.linger.ms": "200",
            "retry.backoff.ms": "50"}})
        assert code == 201, body
        eventually("1,000 records at the webhook", lambda: len({r["value"]["seq"] for r in hook.records()}) == 1000)
        seqs = [r["value"]["seq"] for r in hook.records()]
        assert set(seqs) == set(range(1000)), "every record delivered"
        assert max(len(batch) for _h, batch in hook.bodies) <= 100
        assert hook.answers[:2] == [503, 503], hook.answers[:5]
        assert all(h.get("x-team") == "data" for h, _b in hook.bodies)
        assert status(base, "hook")["tasks"][0]["state"] == "RUNNING"

        # refused without tolerance: the task fails with the answer
        code, body = call(base, "POST", "/connectors", {"name": "strict", "config": {
            "connector.class": "HttpSink", "topics": topic, "http.api.url": hook.url + "/refuse"}})
        assert code == 201, body
        failed = eventually("the strict sink failed", lambda: (
            t := status(base, "strict")["tasks"][0]) and t["state"] == "FAILED" and t)
        assert "400" in failed["trace"] and "no thanks" in failed["trace"], failed

        # refused with tolerance: the records go to the dead-letter topic
        dlq = topic + "-dlq"
        code, body = call(base, "POST", "/connectors", {"name": "lenient", "config": {
            "connector.class": "HttpSink", "topics": topic, "http.api.url": hook.url + "/refuse",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
            "batch.max.size": "500"}})
        assert code == 201, body
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "dlq-" + uuid.uuid4().hex[:6],
                      "auto.offset.reset": "earliest"})
        c.subscribe([dlq])
        got = []

        def dead_letters():
            for m in c.consume(500, 0.5):
                if not m.error():
                    got.append(m)
            return len(got) >= 1000

        eventually("1,000 records on the dead-letter topic", dead_letters)
        headers = dict(got[0].headers())
        assert headers["__connect.errors.topic"] == topic.encode(), headers
        assert b"400" in headers["__connect.errors.exception.message"], headers
        c.close()
        assert status(base, "lenient")["tasks"][0]["state"] == "RUNNING"
    finally:
        b.stop()
        hook.server.shutdown()


class Feed:
    """A resource that answers a JSON array with an ETag, and 304 to a
    request that already has it."""

    def __init__(self):
        self.version, self.items, self.gets = 1, [{"id": "a", "n": 1}, {"id": "b", "n": 2}], 0
        feed = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                feed.gets += 1
                etag = f'"v{feed.version}"'
                if self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.end_headers()
                    return
                body = json.dumps(feed.items).encode()
                self.send_response(200)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/feed"


def test_a_polled_resource_is_written_once_per_change():
    feed = Feed()
    b = Broker().start().wait_ready()
    try:
        base = b.connect_url
        topic = "feed-" + uuid.uuid4().hex[:6]
        code, body = call(base, "POST", "/connectors", {"name": "poll", "config": {
            "connector.class": "HttpSource", "http.url": feed.url, "kafka.topic": topic,
            "http.poll.interval.ms": "200", "http.record.key.field": "id"}})
        assert code == 201, body
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "feed-" + uuid.uuid4().hex[:6],
                      "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got = []

        def records(n):
            def enough():
                for m in c.consume(100, 0.3):
                    if not m.error():
                        got.append((m.key().decode(), json.loads(m.value())))
                return len(got) >= n
            return enough

        eventually("the first answer's two records", records(2))
        polls = feed.gets
        eventually("more polls of the unchanged resource", lambda: feed.gets >= polls + 3)
        feed.items, feed.version = [{"id": "c", "n": 3}], 2
        eventually("the changed answer's record", records(3))
        # unchanged answers (304) wrote nothing more
        eventually("polls after the change", lambda: feed.gets >= polls + 8)
        records(99)()
        assert got == [("a", {"id": "a", "n": 1}), ("b", {"id": "b", "n": 2}), ("c", {"id": "c", "n": 3})], got
        # the source's offset is committed once the changed record is
        # acknowledged, a moment after a consumer can read it

        def committed_v2():
            code, body = call(base, "GET", "/connectors/poll/offsets")
            assert code == 200, body
            return body["offsets"][0]["offset"]["etag"] == '"v2"'
        eventually("the changed answer's ETag committed as the source offset", committed_v2)
        c.close()
    finally:
        b.stop()
        feed.server.shutdown()
