"""The REST admin API of the real binary, seen by real Kafka clients
(confluent-kafka): a topic created over REST is the topic Kafka clients
produce to and consume from in a group, and REST then reports the offsets,
the group's committed offsets and its lag as the clients left them."""

from confluent_kafka import Producer

from helpers import admin, consume, messages, produce_all, rest


def test_topic_created_over_rest_is_used_by_kafka_clients_and_reported_back(broker, topic_name):
    status, created = rest(broker, "POST", "/v1/topics",
                           {"name": topic_name, "partitions": 3, "configs": {"retention.ms": "3600000"}})
    assert status == 201, created
    md = admin(broker).list_topics(topic=topic_name, timeout=10)
    assert sorted(md.topics[topic_name].partitions) == [0, 1, 2]

    sent = messages(30)
    produce_all(broker, topic_name, sent)
    group = f"rest-{topic_name}"
    c, got = consume(broker, topic_name, len(sent), group=group)
    assert len(got) == len(sent)
    c.commit(asynchronous=False)

    status, topic = rest(broker, "GET", f"/v1/topics/{topic_name}")
    assert status == 200, topic
    assert sum(p["high_watermark"] for p in topic["partitions"]) == len(sent)
    retention = next(x for x in topic["configs"] if x["name"] == "retention.ms")
    assert (retention["value"], retention["source"]) == ("3600000", "topic")

    status, g = rest(broker, "GET", f"/v1/groups/{group}")
    assert status == 200, g
    assert g["state"] == "Stable"
    assert len(g["members"]) == 1
    assigned = {p for a in g["members"][0]["assignment"] for p in a["partitions"]}
    assert assigned == {0, 1, 2}
    assert sum(o["committed_offset"] for o in g["offsets"]) == len(sent)
    assert g["total_lag"] == 0
    c.close()

    # Every record the producer sent, browsed partition by partition.
    browsed = []
    for p in range(3):
        status, page = rest(broker, "GET", f"/v1/topics/{topic_name}/records?partition={p}&limit=100")
        assert status == 200, page
        browsed += [(r["key"]["data"], r["value"]["data"]) for r in page["records"]]
    assert sorted(browsed) == sorted((k.decode(), v.decode()) for k, v, _ in sent)

    status, t = rest(broker, "GET", "/v1/tiering")
    assert status == 200 and "upload_lag_seconds" in t, t

    status, _ = rest(broker, "DELETE", f"/v1/topics/{topic_name}")
    assert status == 204
    status, err = rest(broker, "GET", f"/v1/topics/{topic_name}")
    assert (status, err["code"]) == (404, "topic_not_found")


def test_records_seek_by_time_inside_a_compressed_batch_and_metrics_count_the_traffic(broker, topic_name):
    status, created = rest(broker, "POST", "/v1/topics", {"name": topic_name, "partitions": 1})
    assert status == 201, created
    status, before = rest(broker, "GET", "/v1/metrics")
    assert status == 200, before

    # 50 records, one second apart, in lz4 batches the log keeps compressed
    t0 = 1_767_225_600_000
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 50})
    for i in range(50):
        p.produce(topic_name, value=f"r{i}".encode(), timestamp=t0 + i * 1000)
    assert p.flush(30) == 0

    status, page = rest(broker, "GET", f"/v1/topics/{topic_name}/records?timestamp={t0 + 20_500}&limit=3")
    assert status == 200, page
    assert [(r["offset"], r["value"]["data"], r["timestamp"]) for r in page["records"]] == [
        (21, "r21", t0 + 21_000), (22, "r22", t0 + 22_000), (23, "r23", t0 + 23_000)]
    status, page = rest(broker, "GET", f"/v1/topics/{topic_name}/records?timestamp={t0 + 60_000}")
    assert (status, page["records"], page["next_offset"]) == (200, [], 50), page

    c, got = consume(broker, topic_name, 50, group=f"metrics-{topic_name}")
    c.close()
    assert len(got) == 50
    status, after = rest(broker, "GET", "/v1/metrics")
    assert status == 200, after
    assert after["produced_bytes"] > before["produced_bytes"]
    assert after["fetched_bytes"] - before["fetched_bytes"] >= after["produced_bytes"] - before["produced_bytes"], \
        "the consumer read back at least every byte written"
    assert sum(after["produce_latency"]["counts"]) > sum(before["produce_latency"]["counts"])
    mine = next(t for t in after["storage"]["topics"] if t["topic"] == topic_name)
    assert mine["local_bytes"] == after["produced_bytes"] - before["produced_bytes"], \
        "the log holds the compressed batches as they were sent"
    status, topic = rest(broker, "GET", f"/v1/topics/{topic_name}")
    assert topic["partitions"][0]["local_bytes"] == mine["local_bytes"], topic
