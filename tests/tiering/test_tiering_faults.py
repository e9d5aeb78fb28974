"""Object-store faults with the real binary: an unreachable store (a fault
injector inside the broker, enabled by its testing-only flag), a full local
disk budget, and the real S3 server stopped and started again. Producing
continues (or is refused retriably), nothing acknowledged is lost, and
uploads catch up afterwards."""

import threading
import time
import uuid

import pytest
from confluent_kafka import KafkaError

import servers
from harness import (Broker, consume_and_check, create_topic, produce, producer, wait_all_tiered,
                     wait_until)

SIZE = 16 << 10
PER_MB = (1 << 20) // SIZE


@pytest.fixture
def moto_server():
    s = servers.moto()
    servers.create_bucket(s, "aerostream")
    yield s
    s.cleanup()


def faulty_broker(moto_server, *extra):
    return Broker("s3://aerostream/faults", servers.s3_env(moto_server),
                  ["--object-store-faults", "true", *extra])


def read_back_twice(broker, topic, count):
    """Every record from the earliest offset, then again from object storage alone."""
    wait_all_tiered(broker, topic)
    assert consume_and_check(broker.bootstrap, topic, count, SIZE) == (0, count)
    assert broker.stop() == 0
    broker.forget_local_data()
    broker.start()
    assert consume_and_check(broker.bootstrap, topic, count, SIZE) == (0, count)


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

        read_back_twice(broker, topic, count)
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
        read_back_twice(broker, topic, count)
    finally:
        broker.cleanup()


def test_the_s3_server_stopped_and_started_again_mid_run(moto_server):
    broker = faulty_broker(moto_server)
    topic = f"s3-restart-{uuid.uuid4().hex[:8]}"
    try:
        broker.start()
        create_topic(broker.bootstrap, topic)
        count = 5 * PER_MB
        assert produce(broker.bootstrap, topic, 0, count, SIZE) == []
        wait_all_tiered(broker, topic)

        # moto keeps objects in memory: hold uploads for a moment and save the
        # bucket, so the server that comes back has what the first one had.
        broker.faults("unreachable=600000")
        wait_until("no upload is in flight",
                   lambda: broker.metrics()["aerostream_tier_uploads_in_flight"] == 0, timeout=60)
        saved = servers.s3_snapshot(moto_server, "aerostream")
        port = moto_server.port
        moto_server.stop()
        broker.faults("clear")
        failures = broker.metrics()["aerostream_tier_upload_failures_total"]

        stopped_at = time.time()
        p = producer(broker.bootstrap)
        while time.time() - stopped_at < 20:
            assert produce(broker.bootstrap, topic, count, PER_MB, SIZE, p) == []
            assert p.flush(60) == 0
            count += PER_MB
        wait_until("uploads fail against the stopped server",
                   lambda: broker.metrics()["aerostream_tier_upload_failures_total"] > failures, timeout=120)

        again = servers.moto(port)
        try:
            servers.create_bucket(again, "aerostream")
            servers.s3_restore(again, "aerostream", saved)
            read_back_twice(broker, topic, count)
        finally:
            again.cleanup()
    finally:
        broker.cleanup()
