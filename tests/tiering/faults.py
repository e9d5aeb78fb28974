"""What the object-store fault tests share (their S3 server is conftest.py's
`moto_server`): a broker with the testing-only fault injector, and reading
a topic back from local disk and then from the bucket alone."""

import servers
from harness import Broker, consume_and_check, wait_all_tiered

SIZE = 16 << 10
PER_MB = (1 << 20) // SIZE


def faulty_broker(moto_server, *extra):
    """Packing on, as on every cloud store by default, with sealed segments
    waiting at most a second for others to share a packed object with."""
    return Broker("s3://aerostream/faults", servers.s3_env(moto_server),
                  ["--object-store-faults", "true", "--pack-max-wait-ms", "1000", *extra])


def read_back_twice(broker, topic, count, moto_server):
    """Every record from the earliest offset, then again from object storage
    alone, where the segments went up packed."""
    wait_all_tiered(broker, topic)
    assert servers.s3_keys(moto_server, "aerostream", "faults/packs/"), "no packed object"
    assert consume_and_check(broker.bootstrap, topic, count, SIZE) == (0, count)
    assert broker.stop() == 0
    broker.forget_local_data()
    broker.start()
    assert consume_and_check(broker.bootstrap, topic, count, SIZE) == (0, count)
