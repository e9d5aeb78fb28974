import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "clients"))
sys.path.insert(0, os.path.join(HERE, "..", "tiering"))

import servers  # noqa: E402


@pytest.fixture
def s3():
    """A moto S3 server with the bucket `out`."""
    server = servers.moto()
    servers.create_bucket(server, "out")
    yield server
    server.cleanup()
