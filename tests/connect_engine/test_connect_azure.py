"""The object-storage sink against Azure Blob (Azurite): a Datagen source
writes 2,000 records that `ObjectStoreSink` writes to an `az://` container
as JSON lines, with the credentials from the standard Azure variables the
agent reads; the blobs, listed and read back with Azure's REST API, hold
each record exactly once."""

import base64
import hashlib
import hmac
import json
import urllib.parse
import xml.etree.ElementTree as ET
from email.utils import formatdate

import pytest

import servers
from broker import Broker
from connect_rest import all_running, call, eventually

RECORDS = 2000
CONTAINER = "sink"


def signed_get(server, path, query):
    """A SharedKey-signed GET of the emulator's account: (status, body)."""
    date, version = formatdate(usegmt=True), "2021-08-06"
    account = servers.AZURITE_ACCOUNT
    canonical_query = "".join(f"\n{k}:{v}" for k, v in sorted(query.items()))
    to_sign = ("GET" + "\n" * 12 + f"x-ms-date:{date}\nx-ms-version:{version}\n"
               f"/{account}/{account}/{urllib.parse.quote(path)}{canonical_query}")
    sig = base64.b64encode(hmac.new(base64.b64decode(servers.AZURITE_KEY), to_sign.encode(),
                                    hashlib.sha256).digest()).decode()
    qs = ("?" + urllib.parse.urlencode(query)) if query else ""
    return servers.http(server.port, "GET", f"/{account}/{urllib.parse.quote(path)}{qs}",
                        {"x-ms-date": date, "x-ms-version": version,
                         "Authorization": f"SharedKey {account}:{sig}"})


def blob_lines(server, prefix):
    status, body = signed_get(server, CONTAINER, {"restype": "container", "comp": "list", "prefix": prefix})
    assert status == 200, body[:300]
    names = [b.findtext("Name") for b in ET.fromstring(body).iter("Blob")]
    lines = []
    for name in names:
        assert name.endswith(".json"), name
        status, blob = signed_get(server, f"{CONTAINER}/{name}", {})
        assert status == 200, blob[:300]
        lines.extend(json.loads(line) for line in blob.decode().splitlines() if line)
    return lines


@pytest.fixture
def azure(monkeypatch):
    server = servers.azurite()
    servers.create_container(server, CONTAINER)
    # the agent reads the standard Azure variables, as for tiering
    for k, v in servers.azure_env(server).items():
        monkeypatch.setenv(k, v)
    yield server
    server.cleanup()


def test_the_sink_writes_json_lines_to_azure_blob_storage(azure):
    b = Broker().start().wait_ready()
    try:
        topic = "azure-clicks"
        code, body = call(b.connect_url, "POST", "/connectors", {"name": "gen", "config": {
            "connector.class": "DatagenSource", "kafka.topic": topic, "max.records": str(RECORDS),
            "max.interval": "0"}})
        assert code == 201, body
        code, body = call(b.connect_url, "POST", "/connectors", {"name": "blob", "config": {
            "connector.class": "ObjectStoreSink", "topics": topic,
            "store.url": f"az://{CONTAINER}/landing", "format": "json", "flush.size": "250"}})
        assert code == 201, body
        eventually("the sink running", lambda: all_running(b.connect_url, "blob", 1))
        lines = eventually("every record in the container", lambda: (
            got := blob_lines(azure, "landing/")) and len(got) >= RECORDS and got, timeout=120)
        seqs = [json.loads(line["value"])["seq"] if isinstance(line["value"], str) else line["value"]["seq"]
                for line in lines]
        assert sorted(seqs) == list(range(RECORDS)), "each record exactly once (files of flush.size records)"
    finally:
        b.stop()
