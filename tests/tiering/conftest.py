import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from harness import binary  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def aerostream_binary():
    if not os.path.exists(binary()):
        pytest.fail(f"aerostream binary not found at {binary()}: run `cargo build -p agent --bin aerostream` first")
