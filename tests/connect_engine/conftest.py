import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "clients"))
sys.path.insert(0, os.path.join(HERE, "..", "tiering"))

import servers  # noqa: E402


@pytest.fixture
def s3(monkeypatch):
    server = servers.moto()
    servers.create_bucket(server, "sink")
    # the agents read the standard AWS variables, as the sink's docs say
    for k, v in servers.s3_env(server).items():
        monkeypatch.setenv(k, v)
    yield server
    server.cleanup()
