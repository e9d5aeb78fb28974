"""Debian's kcat (librdkafka 2.0.2, ApiVersions v3 with strict tagged fields)."""

import shutil
import subprocess

import pytest

from helpers import create_topic

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt-get install kcat)")


def kcat(broker, *args, input=None, timeout=30):
    r = subprocess.run(["kcat", "-b", broker.bootstrap, *args], input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode()


def test_kcat_lists_metadata(broker, topic_name):
    create_topic(broker, topic_name, partitions=3)
    out = kcat(broker, "-L", "-t", topic_name)
    assert f'topic "{topic_name}" with 3 partitions' in out
    assert "broker 1 at 127.0.0.1" in out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produces_and_consumes_every_codec(broker, topic_name, codec):
    lines = [f"key{i}:value-{codec}-{i}" for i in range(50)]
    kcat(broker, "-P", "-t", topic_name, "-K", ":", "-z", codec, input="\n".join(lines).encode() + b"\n")
    out = kcat(broker, "-C", "-t", topic_name, "-o", "beginning", "-e", "-f", "%k:%s\n")
    assert out.splitlines() == lines
