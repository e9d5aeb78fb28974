"""The Connect engine's PostgreSQL sink and source against a real
PostgreSQL (started by the `postgres` fixture) and the real agent.

The sink: a Datagen source's records upserted by `seq` land as exactly one
row each; with its offsets reset the sink reads everything again and the
replay rewrites the rows without adding any; keyed records upsert by the
key, a tombstone deletes its row, a record that is not an object goes to
the dead-letter topic, and a hostile table name stays one quoted name;
without PostgreSQL the task fails, saying so.

The source: a table read in incrementing mode reaches its topic in
order, each row once; rows added later follow; after the task restarts
(a REST restart, then an agent restart) nothing is missed or repeated."""

import json
import time
import uuid

from confluent_kafka import Consumer, Producer

from broker import Broker, free_port
from connect_rest import all_running, call, eventually, status


def rows_count(pg, table):
    return int(pg.sql(f'SELECT count(*) FROM "{table}"')[0][0])


def test_sink_upserts_exactly_once_per_key_replays_idempotently_and_deletes(postgres):
    pg = postgres
    b = Broker().start().wait_ready()
    try:
        base = b.connect_url
        topic = "orders-" + uuid.uuid4().hex[:6]
        n = 500
        code, body = call(base, "POST", "/connectors", {"name": "gen", "config": {
            "connector.class": "DatagenSource", "kafka.topic": topic, "max.records": str(n),
            "max.interval": "0"}})
        assert code == 201, body
        sink = {
            "connector.class": "PostgresSink", "topics": topic, "connection.url": pg.jdbc_url,
            "connection.user": pg.user, "insert.mode": "upsert", "pk.mode": "record_value",
            "pk.fields": "seq", "auto.create": "true", "batch.size": "200"}
        code, body = call(base, "POST", "/connectors", {"name": "pg", "config": sink})
        assert code == 201, body
        eventually(f"{n} rows", lambda: rows_count(pg, topic) >= n if pg.sql(
            f"SELECT to_regclass('\"{topic}\"')")[0][0] else False)
        seqs = [int(r[0]) for r in pg.sql(f'SELECT seq FROM "{topic}" ORDER BY seq')]
        assert seqs == list(range(n)), "each record exactly one row"
        kinds = dict(pg.sql(f"SELECT column_name, data_type FROM information_schema.columns "
                            f"WHERE table_name = '{topic}'"))
        assert kinds == {"seq": "bigint", "user": "text", "amount": "double precision", "ts": "bigint"}, kinds
        eventually("the sink's offsets committed", lambda: call(base, "GET", "/connectors/pg/offsets")[1]
                   ["offsets"] == [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                                    "offset": {"kafka_offset": n}}])

        # a replay (the offsets reset, as after a crash before the commit)
        # rewrites the rows: the tampered one is restored, none is added
        original = pg.sql(f'SELECT "user", amount FROM "{topic}" WHERE seq = 7')[0]
        pg.sql(f'UPDATE "{topic}" SET "user" = \'tampered\' WHERE seq = 7')
        assert call(base, "PUT", "/connectors/pg/stop")[0] == 202
        eventually("stopped", lambda: status(base, "pg")["connector"]["state"] == "STOPPED")
        code, body = call(base, "DELETE", "/connectors/pg/offsets")
        assert code == 200, body
        assert call(base, "PUT", "/connectors/pg/resume")[0] == 202
        eventually("the replayed sink running", lambda: all_running(base, "pg", 1))
        eventually("the tampered row rewritten", lambda: pg.sql(
            f'SELECT "user", amount FROM "{topic}" WHERE seq = 7')[0] == original)
        eventually("the replay's offsets committed", lambda: call(base, "GET", "/connectors/pg/offsets")[1]
                   ["offsets"] == [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                                    "offset": {"kafka_offset": n}}])
        assert rows_count(pg, topic) == n, "the replay added rows"

        # keyed records: upsert by the key, a tombstone deletes, a record
        # that is not an object goes to the dead-letter topic; the table
        # name is hostile and stays one name
        keyed, dlq = "users-" + uuid.uuid4().hex[:6], "users-dlq-" + uuid.uuid4().hex[:6]
        table = 'we"ird; DROP TABLE x; ' + keyed
        code, body = call(base, "POST", "/connectors", {"name": "users", "config": {
            "connector.class": "PostgresSink", "topics": keyed, "connection.url": pg.url,
            "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "user_id",
            "delete.enabled": "true", "auto.create": "true", "auto.evolve": "true",
            "table.name.format": 'we"ird; DROP TABLE x; ${topic}',
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}})
        assert code == 201, body
        p = Producer({"bootstrap.servers": b.bootstrap})
        for key, value in [("1", {"name": "ada", "tags": ["x"]}), ("2", {"name": "grace"}),
                           ("1", {"name": "ada l.", "tags": ["y"], "age": 36}), ("3", [1, 2]),
                           ("2", None), ("4", {"name": "ken"})]:
            p.produce(keyed, key=key, value=None if value is None else json.dumps(value))
        p.flush(10)
        quoted = '"' + table.replace('"', '""') + '"'
        eventually("the keyed rows", lambda: pg.sql(f"SELECT to_regclass('{quoted.replace(chr(39), chr(39) * 2)}')")[0][0]
                   and pg.sql(f"SELECT user_id, name, tags::text, age FROM {quoted} ORDER BY user_id") == [
                       ["1", "ada l.", '["y"]', "36"], ["4", "ken", None, None]])
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "dlq-" + uuid.uuid4().hex[:6],
                      "auto.offset.reset": "earliest"})
        c.subscribe([dlq])
        dead = []
        eventually("the array value on the dead-letter topic",
                   lambda: dead.extend(m for m in c.consume(10, 0.5) if not m.error()) or dead)
        c.close()
        assert [(m.key(), m.value()) for m in dead] == [(b"3", b"[1, 2]")]
        assert b"not a JSON object" in dict(dead[0].headers())["__connect.errors.exception.message"]
        assert pg.sql("SELECT count(*) FROM pg_tables WHERE tablename = 'x'") == [["0"]]
        assert status(base, "users")["tasks"][0]["state"] == "RUNNING"

        # PostgreSQL unreachable: retried, then the task fails saying so
        down = free_port()
        code, body = call(base, "POST", "/connectors", {"name": "down", "config": {
            "connector.class": "PostgresSink", "topics": topic,
            "connection.url": f"postgresql://{pg.user}@127.0.0.1:{down}/postgres",
            "max.retries": "2", "retry.backoff.ms": "100"}})
        assert code == 201, body
        failed = eventually("the sink without PostgreSQL failed", lambda: (
            t := status(base, "down")["tasks"][0]) and t["state"] == "FAILED" and t)
        assert f"PostgreSQL at 127.0.0.1:{down}/postgres stayed unreachable (2 retries)" in failed["trace"], failed
    finally:
        b.stop()


class TopicReader:
    """Everything written to some topics, read from the start."""

    def __init__(self, bootstrap, topics):
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-" + uuid.uuid4().hex[:6],
                           "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
        self.c.subscribe(topics)
        self.got = {t: [] for t in topics}

    def poll(self):
        for m in self.c.consume(500, 0.5):
            if not m.error():
                assert m.key() is None
                self.got[m.topic()].append(json.loads(m.value()))
        return self.got

    def ids(self, topic):
        return [r["id"] for r in self.got[topic]]

    def until(self, what, topic, n):
        eventually(what, lambda: len(self.poll()[topic]) >= n)
        time.sleep(1)  # nothing more than expected arrives
        self.poll()
        return self.ids(topic)


def first_seen(ids):
    """The ids in the order they first arrived: a restarted task may write
    again the rows acknowledged after its last offset commit (at-least-once),
    but never skips one."""
    seen = set()
    return [i for i in ids if not (i in seen or seen.add(i))]


def test_source_reads_tables_in_order_and_resumes_after_restarts(postgres):
    pg = postgres
    items, events = "items_" + uuid.uuid4().hex[:6], "events_" + uuid.uuid4().hex[:6]
    pg.sql(f"CREATE TABLE {items} (id serial PRIMARY KEY, name text, price numeric(10,2), blob bytea, "
           f"at timestamptz, meta jsonb, ok boolean)")
    pg.sql(f"CREATE TABLE {events} (id bigint PRIMARY KEY, what text)")
    pg.sql(f"INSERT INTO {items} (name, price, blob, at, meta, ok) SELECT 'n' || i, i + 0.5, '\\x6869', "
           f"'2026-01-02 03:04:05.123+00', '{{\"k\": 1}}', i % 2 = 0 FROM generate_series(1, 250) i")
    pg.sql(f"INSERT INTO {events} SELECT i * 10, 'e' || i FROM generate_series(1, 30) i")
    b = Broker().start().wait_ready()
    try:
        base = b.connect_url
        prefix = "pg-" + uuid.uuid4().hex[:6] + "-"
        t_items, t_events = prefix + items, prefix + events
        code, body = call(base, "POST", "/connectors", {"name": "src", "config": {
            "connector.class": "PostgresSource", "connection.url": pg.url, "tasks.max": "2",
            "table.whitelist": f"{items}, {events}", "mode": "incrementing",
            "incrementing.column.name": "id", "topic.prefix": prefix, "poll.interval.ms": "300",
            "batch.max.rows": "100"}})
        assert code == 201, body
        assert len(body["tasks"]) == 2, body
        eventually("both tasks running", lambda: all_running(base, "src", 2))
        r = TopicReader(b.bootstrap, [t_items, t_events])
        assert r.until("the items", t_items, 250) == list(range(1, 251)), "every row once, in order"
        assert r.until("the events", t_events, 30) == [i * 10 for i in range(1, 31)]
        first = r.got[t_items][0]
        assert first == {"id": 1, "name": "n1", "price": 1.5, "blob": "aGk=",
                         "at": "2026-01-02T03:04:05.123+00:00", "meta": {"k": 1}, "ok": False}, first

        # rows added later follow
        pg.sql(f"INSERT INTO {items} (name) SELECT 'm' || i FROM generate_series(1, 50) i")
        assert r.until("the later items", t_items, 300) == list(range(1, 301))

        # a REST restart of the tasks, rows added meanwhile: none missed,
        # in order
        code, body = call(base, "POST", "/connectors/src/restart?includeTasks=true")
        assert code == 202, body
        pg.sql(f"INSERT INTO {items} (name) SELECT 'r' || i FROM generate_series(1, 30) i")
        eventually("running after the restart", lambda: all_running(base, "src", 2))
        eventually("the items after the restart", lambda: first_seen(r.poll() and r.ids(t_items)) ==
                   list(range(1, 331)))
        # each table's offset, committed within a second or so
        eventually("each table's offset", lambda: sorted(
            call(base, "GET", "/connectors/src/offsets")[1]["offsets"],
            key=lambda o: o["partition"]["table"]) == [
                {"partition": {"table": events}, "offset": {"incrementing": 300}},
                {"partition": {"table": items}, "offset": {"incrementing": 330}}])

        # the agent restarted, with rows added while it was down
        b.stop()
        pg.sql(f"INSERT INTO {items} (name) SELECT 'a' || i FROM generate_series(1, 20) i")
        pg.sql(f"INSERT INTO {events} VALUES (310, 'late')")
        b.start().wait_ready()
        eventually("running after the agent restart", lambda: all_running(base, "src", 2))
        eventually("the items after the agent restart", lambda: first_seen(r.poll() and r.ids(t_items)) ==
                   list(range(1, 351)))
        eventually("the late event", lambda: first_seen(r.poll() and r.ids(t_events)) ==
                   [i * 10 for i in range(1, 32)])
        r.c.close()

        # timestamp+incrementing: an updated row is read again; rows of one
        # transaction share a timestamp and are told apart by the id
        prices = "prices_" + uuid.uuid4().hex[:6]
        pg.sql(f"CREATE TABLE {prices} (id int PRIMARY KEY, price int, updated timestamp NOT NULL DEFAULT now());"
               f"INSERT INTO {prices} (id, price) SELECT i, i FROM generate_series(1, 5) i")
        code, body = call(base, "POST", "/connectors", {"name": "ts", "config": {
            "connector.class": "PostgresSource", "connection.url": pg.jdbc_url, "connection.user": pg.user,
            "table.whitelist": prices, "mode": "timestamp+incrementing", "incrementing.column.name": "id",
            "timestamp.column.name": "updated", "topic.prefix": prefix, "poll.interval.ms": "200",
            "batch.max.rows": "2"}})
        assert code == 201, body
        r = TopicReader(b.bootstrap, [prefix + prices])
        assert r.until("the prices", prefix + prices, 5) == [1, 2, 3, 4, 5]
        pg.sql(f"UPDATE {prices} SET price = 99, updated = now() WHERE id = 3")
        r.until("the updated price", prefix + prices, 6)
        assert [(p["id"], p["price"]) for p in r.got[prefix + prices]][5:] == [(3, 99)]
        r.c.close()
    finally:
        b.stop()
