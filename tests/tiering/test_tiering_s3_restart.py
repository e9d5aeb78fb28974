"""The real S3 server (moto) stopped and started again under a producing
broker: uploads fail while it is away, nothing acknowledged is lost, and
everything reads back from the bucket alone once it is back."""

import time
import uuid

import servers
from faults import PER_MB, SIZE, faulty_broker, read_back_twice
from harness import create_topic, produce, producer, wait_all_tiered, wait_until


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
            # Paced, as in the outage test: about 75 MB, more than one full
            # pack, rather than whatever the machine can write in 20 s (near
            # 1 GB here), which the read-back twice below then paid for.
            time.sleep(0.25)
        wait_until("uploads fail against the stopped server",
                   lambda: broker.metrics()["aerostream_tier_upload_failures_total"] > failures, timeout=120)

        again = servers.moto(port)
        try:
            servers.create_bucket(again, "aerostream")
            servers.s3_restore(again, "aerostream", saved)
            read_back_twice(broker, topic, count, again)
        finally:
            again.cleanup()
    finally:
        broker.cleanup()
