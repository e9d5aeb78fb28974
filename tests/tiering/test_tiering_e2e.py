"""End to end with the real binary and librdkafka (confluent-kafka): produce
with small segments so most are sealed, uploaded and deleted locally; read
everything back from the earliest offset; restart with DATA_DIR/log (and the
cache) removed and read everything back from object storage alone. Once per
backend: S3 (moto), GCS (object_store's GCS client against moto's XML API),
Azure Blob (Azurite) and the embedded local folder.

Sizes: AEROSTREAM_TIERING_S3_MB (default 300) for S3, AEROSTREAM_TIERING_MB
(default 40) for the others."""

import os
import uuid

import pytest

import servers
from harness import (Broker, consume_and_check, create_topic, mb, offsets_for_times, produce,
                     wait_all_tiered)

SIZE = 16 << 10  # bytes per record value


def roundtrip(broker, megabytes, check_objects=None):
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    count = megabytes * (1 << 20) // SIZE
    broker.start()
    create_topic(broker.bootstrap, topic)
    errors = produce(broker.bootstrap, topic, 0, count, SIZE)
    assert errors == [], errors[:3]
    m = wait_all_tiered(broker, topic)
    assert m["aerostream_tier_committed_segments_total"] >= megabytes * 0.9, m
    assert m["aerostream_tier_upload_failures_total"] == 0, m
    if check_objects:
        check_objects(m)

    # Every record from the earliest offset: nearly all of them cold.
    low, high = consume_and_check(broker.bootstrap, topic, count, SIZE)
    assert (low, high) == (0, count)
    m = broker.metrics()
    assert m["aerostream_cold_read_bytes_total"] >= count * SIZE * 0.9, m
    assert m["aerostream_object_store_gets_total"] > 0
    probes = [0, count // 3, count - 1]
    assert offsets_for_times(broker.bootstrap, topic, probes) == probes

    # Local data lost: the metastore and the object store are enough.
    assert broker.stop() == 0
    broker.forget_local_data()
    broker.start()
    low, high = consume_and_check(broker.bootstrap, topic, count, SIZE)
    assert (low, high) == (0, count)
    assert offsets_for_times(broker.bootstrap, topic, probes) == probes
    m = broker.metrics()
    assert m["aerostream_object_store_get_bytes_total"] >= count * SIZE * 0.9, "fetched from object storage anew"
    # New records continue after the tiered ones.
    assert produce(broker.bootstrap, topic, count, 10, SIZE) == []
    consume_and_check(broker.bootstrap, topic, count + 10, SIZE, start=count - 5)
    assert broker.stop() == 0


@pytest.fixture
def moto_server():
    s = servers.moto()
    yield s
    s.cleanup()


def test_s3_backend_round_trips_every_record_through_object_storage(moto_server):
    """With a cloud store, sealed segments go up packed: a few large objects
    under packs/, one PUT each, and no per-segment objects."""
    servers.create_bucket(moto_server, "aerostream")
    broker = Broker("s3://aerostream/cluster-1", servers.s3_env(moto_server),
                    extra_args=["--pack-max-wait-ms", "3000"])

    def objects_listed(m):
        assert servers.s3_keys(moto_server, "aerostream", "cluster-1/topics/") == [], \
            "packed segments leave no objects of their own"
        packs = servers.s3_keys(moto_server, "aerostream", "cluster-1/packs/")
        assert packs and all(k.endswith(".pack") for k in packs), packs
        segments = m["aerostream_tier_committed_segments_total"]
        assert len(packs) * 4 <= segments, f"{len(packs)} packed objects for {segments} segments"
        puts = sum(v for k, v in m.items()
                   if k.startswith("aerostream_object_store_requests_total")
                   and any(f'op="{op}"' in k for op in ("put", "create_multipart", "put_part")))
        assert puts == len(packs), f"{puts} upload requests for {len(packs)} packed objects"

    try:
        roundtrip(broker, mb("AEROSTREAM_TIERING_S3_MB", 300), objects_listed)
    finally:
        broker.cleanup()


def test_gcs_backend_round_trips_every_record_through_object_storage(moto_server):
    """Packing off (--pack-target-bytes 0): each sealed segment goes up as
    its own objects."""
    servers.create_bucket(moto_server, "aerostream-gcs")
    broker = Broker("gs://aerostream-gcs/cluster-1", servers.gcs_env(moto_server),
                    extra_args=["--pack-target-bytes", "0"])

    def objects_listed(m):
        keys = servers.s3_keys(moto_server, "aerostream-gcs", "cluster-1/topics/")
        segs = [k for k in keys if k.endswith(".seg")]
        assert len(segs) == m["aerostream_tier_committed_segments_total"]
        # the producer is idempotent: each segment also carries the producer
        # snapshot its replicas restore (KIP-405's producer snapshot)
        expected = {s[:-len(".seg")] + ext for s in segs
                    for ext in (".seg", ".idx", ".tix", ".producers")}
        assert set(keys) == expected, (
            "each segment has its .seg, .idx, .tix and .producers, and nothing else is there: "
            f"missing {sorted(expected - set(keys))[:4]}, extra {sorted(set(keys) - expected)[:4]}")

    try:
        roundtrip(broker, mb("AEROSTREAM_TIERING_MB", 40), objects_listed)
    finally:
        broker.cleanup()


def test_azure_backend_round_trips_every_record_through_object_storage():
    server = servers.azurite()
    try:
        servers.create_container(server, "aerostream")
        broker = Broker("az://aerostream/cluster-1", servers.azure_env(server))
        try:
            roundtrip(broker, mb("AEROSTREAM_TIERING_MB", 40))
        finally:
            broker.cleanup()
    finally:
        server.cleanup()


def test_embedded_local_folder_round_trips_every_record():
    broker = Broker()
    try:
        roundtrip(broker, mb("AEROSTREAM_TIERING_MB", 40))
        objects = os.path.join(broker.data_dir, "objects", "topics")
        assert os.path.isdir(objects), "the default object store is DATA_DIR/objects"
    finally:
        broker.cleanup()
