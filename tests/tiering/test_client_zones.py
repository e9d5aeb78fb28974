"""The cost report's client side: an agent with `--rack zone-a` classes
each Kafka client's bytes by the zone the client names (`client.rack` on a
consumer's fetches, `aerostream_az=ZONE` in any client's id), so producers
and consumers in another zone count as cross-zone traffic in `/v1/cost`,
`/metrics` and `aerostream cost`, and clients in its own zone do not."""

import json
import subprocess

from confluent_kafka import Consumer, TopicPartition

from harness import Broker, binary, create_topic, produce, producer

RECORDS = 200
SIZE = 10_000
PAYLOAD = RECORDS * SIZE


def clients(broker):
    return json.loads(broker.http("/v1/cost"))["cross_zone"]["clients"]


def consume_all(bootstrap, topic, **conf):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + conf.get("client.rack", "none"),
                  "enable.auto.commit": False, **conf})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    while got < RECORDS:
        m = c.poll(10)
        assert m is not None, f"consumed {got} of {RECORDS}"
        assert m.error() is None, m.error()
        got += 1
    c.close()


def test_client_bytes_are_classed_by_the_zone_the_client_names():
    b = Broker(extra_args=["--rack", "zone-a"]).start()
    try:
        create_topic(b.bootstrap, "zones", configs={"cleanup.policy": "delete"})
        start = clients(b)
        # the admin client named no zone
        assert start["unknown_zone_bytes"] > 0, start
        assert start["cross_zone_received_bytes"] == 0 and start["same_zone_bytes"] == 0, start

        p = producer(b.bootstrap, **{"client.id": "orders,aerostream_az=zone-b"})
        assert produce(b.bootstrap, "zones", 0, RECORDS, SIZE, p=p) == []
        assert p.flush(60) == 0
        after_produce = clients(b)
        # every produced byte came from another zone, and the acks went back there
        assert after_produce["cross_zone_received_bytes"] >= PAYLOAD, after_produce
        assert after_produce["cross_zone_sent_bytes"] > 0, after_produce
        assert after_produce["same_zone_bytes"] == 0, after_produce

        # a consumer in the agent's own zone: its fetches are not cross-zone
        consume_all(b.bootstrap, "zones", **{"client.rack": "zone-a"})
        same = clients(b)
        assert same["same_zone_bytes"] >= PAYLOAD, same
        assert same["cross_zone_sent_bytes"] - after_produce["cross_zone_sent_bytes"] < PAYLOAD // 10, same

        # one in another zone: every fetched byte crosses
        consume_all(b.bootstrap, "zones", **{"client.rack": "zone-c"})
        other = clients(b)
        assert other["cross_zone_sent_bytes"] - same["cross_zone_sent_bytes"] >= PAYLOAD, other

        report = json.loads(b.http("/v1/cost"))
        z = report["cross_zone"]
        # the totals the estimate prices include the clients' cross-zone bytes
        assert z["sent_bytes"] >= other["cross_zone_sent_bytes"], z
        assert z["received_bytes"] >= other["cross_zone_received_bytes"], z
        assert report["monthly_estimate_usd"]["cross_zone_transfer"] > 0, report

        series = b.metrics()
        assert series['aerostream_client_bytes_total{direction="sent",cross_zone="true"}'] >= \
            other["cross_zone_sent_bytes"], series
        assert series['aerostream_client_bytes_total{direction="both",cross_zone="false"}'] >= \
            other["same_zone_bytes"], series

        table = subprocess.run([binary(), "cost", "--http", f"127.0.0.1:{b.http_port}"],
                               capture_output=True, text=True, timeout=60)
        assert table.returncode == 0, table.stderr
        assert "clients in another zone" in table.stdout, table.stdout
    finally:
        b.cleanup()
