"""A broker whose data directory fills up: its filesystem is a small tmpfs
mounted in a mount namespace of the broker's own (`unshare`, so neither root
nor a loop device is needed). Producers are refused with a retriable storage
error, the broker stays up, every acknowledged record is read back intact,
deleting records frees the space and producing goes on, and a stop on the
full disk is clean."""

import uuid

from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness import T0, Broker, consume_and_check, create_topic, key, value, wait_until

SIZE = 16 << 10
BATCH = 32  # 512 KiB: one batch under the client's 1 MB request limit
FILESYSTEM = "40m"


def full_disk_broker():
    broker = Broker()
    broker.wrap = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                   f'mkdir -p "$0" && mount -t tmpfs -o size={FILESYSTEM} tmpfs "$0" && exec "$@"',
                   broker.data_dir]
    return broker


def produce_until_refused(bootstrap, topic, start, limit):
    """Produces batches of BATCH records (one produce request each) from
    `start`, without retries, until one is refused; returns (records
    acknowledged, the refusal)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                  "enable.idempotence": False, "linger.ms": 5, "batch.size": 1_000_000})
    acked = start
    while acked < limit:
        results = []
        for i in range(acked, acked + BATCH):
            p.produce(topic, key=key(i), value=value(i, SIZE), partition=0, timestamp=T0 + i,
                      on_delivery=lambda err, msg: results.append((err, msg.offset())))
        assert p.flush(30) == 0, "every batch is answered"
        errors = [err for err, _ in results if err is not None]
        if errors:
            assert len(errors) == BATCH, "a batch is written whole or not at all"
            return acked, errors[0]
        assert sorted(o for _, o in results) == list(range(acked, acked + BATCH))
        acked += BATCH
    return acked, None


def test_a_full_filesystem_refuses_producers_retriably_and_loses_nothing():
    broker = full_disk_broker()
    topic = f"full-{uuid.uuid4().hex[:8]}"
    try:
        broker.start()
        create_topic(broker.bootstrap, topic, {"segment.bytes": "1048576"})

        acked, refusal = produce_until_refused(broker.bootstrap, topic, 0, 80 * BATCH)
        assert refusal is not None, f"{acked} records fit a {FILESYSTEM} filesystem"
        assert acked > 0
        # KAFKA_STORAGE_ERROR is retriable in the protocol: a producer that
        # retries keeps its batch until space comes back.
        assert refusal.code() == KafkaError.KAFKA_STORAGE_ERROR, refusal
        assert broker.proc.poll() is None, f"the broker exited:\n{broker.log()[-3000:]}"

        # A second try on the still-full disk is refused the same way, and
        # leaves nothing half-written behind the acknowledged records.
        again, refusal = produce_until_refused(broker.bootstrap, topic, acked, acked + BATCH)
        assert (again, refusal.code()) == (acked, KafkaError.KAFKA_STORAGE_ERROR), refusal
        assert consume_and_check(broker.bootstrap, topic, acked, SIZE) == (0, acked)

        # Deleting the records frees their sealed segments; producing resumes.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.delete_records([TopicPartition(topic, 0, acked)]).values():
            f.result(30)

        def produces_again():
            n, err = produce_until_refused(broker.bootstrap, topic, acked, acked + BATCH)
            return err is None and n == acked + BATCH
        wait_until("producing works again once records are deleted", produces_again, timeout=60, interval=1)
        assert consume_and_check(broker.bootstrap, topic, acked + BATCH, SIZE, start=acked) == (acked, acked + BATCH)

        assert broker.stop() == 0, broker.log()[-3000:]
        assert "panicked" not in broker.log()
    finally:
        broker.cleanup()
