import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from broker import Broker, binary  # noqa: E402


@pytest.fixture(scope="session")
def broker():
    if not os.path.exists(binary()):
        pytest.fail(f"aerostream binary not found at {binary()}: run `cargo build -p agent --bin aerostream` first")
    b = Broker().start()
    yield b
    if b.proc is not None:
        assert b.stop() == 0, "aerostream must exit 0 on SIGTERM"


@pytest.fixture
def own_broker():
    """A broker this test may restart or kill."""
    b = Broker().start()
    yield b
    if b.proc is not None:
        b.stop()


@pytest.fixture
def topic_name():
    return f"t-{uuid.uuid4().hex[:10]}"


from tls_certs import certs  # noqa: E402,F401 (a fixture for test_tls and test_sasl)
