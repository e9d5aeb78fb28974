"""The Connect engine's PostgreSQL sink and source against a real
PostgreSQL (started by the `postgres` fixture) and the real agent.

The sink: a Datagen source's records upserted by `seq` land as exactly one
row each; with its offsets reset the sink reads everything again and the
replay rewrites the rows without adding any; keyed records upsert by the
key, a tombstone deletes its row, a record that is not an object goes to
the dead-letter topic, and a hostile table name stays one quoted name.

The source: a table read in incrementing mode reaches its topic in
order, each row once; rows added later follow; after the task restarts
(a REST restart, then an agent restart) nothing is missed or repeated."""

import json
import time
import uuid

from confluent_kafka import Consumer, Producer

from broker import Broker
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
    finally:
        b.stop()
