"""Object-store faults with the real binary: an unreachable store (a fault
injector inside the broker, enabled by its testing-only flag) and a full
local disk budget. Producing continues (or is refused retriably), nothing
acknowledged is lost, and uploads catch up afterwards. The real S3 server
stopped and started again: test_tiering_s3_restart.py (a file of its own,
so the two minute-long runs go side by side)."""

import threading
import time
import uuid

from confluent_kafka import KafkaError

from faults import PER_MB, SIZE, faulty_broker, read_back_twice
from harness import create_topic, produce, producer, wait_all_tiered, wait_until


def test_an_object_store_unreachable_for_a_minute_delays_sealing_only(moto_server):
    broker = faulty_broker(moto_server)
    topic = f"outage-{uuid.uuid4().hex[:8]}"
    try:
        broker.start()
        create_topic(broker.bootstrap, topic)
        count = 5 * PER_MB
        assert produce(broker.bootstrap, topic, 0, count, SIZE) == []
        wait_all_tiered(broker, topic)
        before = broker.metrics()

        broker.faults("unreachable=60000")
        outage_started = time.time()
        p = producer(broker.bootstrap)
        while time.time() - outage_started < 50:
            assert produce(broker.bootstrap, topic, count, PER_MB, SIZE, p) == []
            assert p.flush(60) == 0, "records produced during the outage are acknowledged"
            count += PER_MB
            time.sleep(0.5)
        during = broker.metrics()
        assert during["aerostream_tier_upload_failures_total"] > before["aerostream_tier_upload_failures_total"]
        assert during["aerostream_tier_pending_segments"] > 0, "sealed segments wait for the store"
        assert during["aerostream_tier_upload_lag_seconds"] > 10
        assert len(broker.segment_files(topic)) > 5, "nothing uploaded, so nothing left local disk"
        assert during["aerostream_produce_backpressure_total"] == 0

        read_back_twice(broker, topic, count, moto_server)
    finally:
        broker.cleanup()


def test_a_full_local_disk_budget_refuses_producers_retriably_and_loses_nothing(moto_server):
    broker = faulty_broker(moto_server, "--local-disk-limit", "8MiB")
    topic = f"budget-{uuid.uuid4().hex[:8]}"
    probe_topic = f"probe-{uuid.uuid4().hex[:8]}"
    try:
        broker.start()
        create_topic(broker.bootstrap, topic)
        create_topic(broker.bootstrap, probe_topic)
        broker.faults("unreachable=600000")
        count = 24 * PER_MB
        result = {}
        worker = threading.Thread(
            target=lambda: result.setdefault("errors", produce(broker.bootstrap, topic, 0, count, SIZE)),
            daemon=True)
        worker.start()
        wait_until("producers are pushed back",
                   lambda: broker.metrics()["aerostream_produce_backpressure_total"] > 0, timeout=120)
        m = broker.metrics()
        assert m["aerostream_local_unuploaded_bytes"] <= 8 << 20, m
        assert m["aerostream_tier_committed_segments_total"] == 0

        # A producer that does not retry sees what the broker answers: a
        # retriable storage error. Its record is larger than any batch of the
        # other producer, so it cannot fit where those were refused.
        seen = []
        probe = producer(broker.bootstrap, **{"enable.idempotence": False, "retries": 0,
                                              "message.max.bytes": 2_000_000, "batch.size": 2_000_000})
        probe.produce(probe_topic, value=b"x" * 1_040_000, on_delivery=lambda err, msg: seen.append(err))
        probe.flush(30)
        assert len(seen) == 1 and seen[0] is not None, seen
        # KAFKA_STORAGE_ERROR is retriable in the protocol: the producer above
        # keeps retrying the same batches, and all of them land once uploads resume.
        assert seen[0].code() == KafkaError.KAFKA_STORAGE_ERROR, seen[0]

        broker.faults("clear")
        worker.join(600)
        assert not worker.is_alive()
        assert result["errors"] == [], result["errors"][:3]
        read_back_twice(broker, topic, count, moto_server)
    finally:
        broker.cleanup()
