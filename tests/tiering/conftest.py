import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from harness import binary  # noqa: E402
import servers  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def aerostream_binary():
    if not os.path.exists(binary()):
        pytest.fail(f"aerostream binary not found at {binary()}: run `cargo build -p agent --bin aerostream` first")


@pytest.fixture
def moto_server():
    """A real S3 server (moto) with the bucket `aerostream`; a test file
    that needs another bucket layout defines a `moto_server` of its own."""
    s = servers.moto()
    servers.create_bucket(s, "aerostream")
    yield s
    s.cleanup()
