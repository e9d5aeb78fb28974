"""Real object-storage servers for the tiering tests: moto (S3, and GCS's XML
API) and Azurite (Azure Blob), each on a free loopback port, stopped when the
test ends. A missing server is a failure naming the install command."""

import base64
import hashlib
import hmac
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from email.utils import formatdate

AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(proc, port, name, log_path, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{open(log_path).read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{name} did not listen on {port}:\n{open(log_path).read()}")


class Server:
    def __init__(self, name, argv, port, env=None):
        self.name, self.argv, self.port = name, argv, port
        self.env = dict(os.environ, **(env or {}))
        self.dir = tempfile.mkdtemp(prefix=f"aerostream-{name}-")
        self.log_path = os.path.join(self.dir, "server.log")
        self.proc = None

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.argv, cwd=self.dir, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, env=self.env)
        _wait_listening(self.proc, self.port, self.name, self.log_path)
        return self

    def stop(self):
        """Kills the whole process group (as a crash would) and waits."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def moto(port=None, env=None):
    """`env`: extra variables for moto, e.g. INITIAL_NO_AUTH_ACTION_COUNT to enforce IAM."""
    exe = shutil.which("moto_server")
    if exe is None:
        raise RuntimeError('moto_server is not installed: pip install "moto[server]" boto3 (tests/requirements.txt)')
    port = port or free_port()
    return Server("moto", [exe, "-H", "127.0.0.1", "-p", str(port)], port, env).start()


def http(port, method, path, headers=None, body=b""):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body if body else None,
                                 method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def create_bucket(server, bucket):
    status, body = http(server.port, "PUT", f"/{bucket}")
    if status >= 300:
        raise RuntimeError(f"creating bucket {bucket}: HTTP {status} {body[:200]!r}")


def s3_env(server):
    return {
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def gcs_env(server):
    # object_store's GCS client against moto's implementation of GCS's XML API.
    return {"STORAGE_EMULATOR_HOST": f"127.0.0.1:{server.port}"}


def azurite():
    candidates = [os.environ.get("AZURITE_BLOB_BIN"),
                  os.path.join(ROOT, "tests", "js", "node_modules", ".bin", "azurite-blob"),
                  shutil.which("azurite-blob")]
    exe = next((c for c in candidates if c and os.path.exists(c)), None)
    if exe is None:
        raise RuntimeError("azurite-blob is not installed: npm install in tests/js (or set AZURITE_BLOB_BIN)")
    port = free_port()
    return Server("azurite", [exe, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", "azurite-data",
                              "--skipApiVersionCheck", "--loose", "--disableTelemetry"], port).start()


def create_container(server, container):
    date, version = formatdate(usegmt=True), "2021-08-06"
    to_sign = ("PUT" + "\n" * 12 + f"x-ms-date:{date}\nx-ms-version:{version}\n"
               f"/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{container}\nrestype:container")
    sig = base64.b64encode(hmac.new(base64.b64decode(AZURITE_KEY), to_sign.encode(), hashlib.sha256).digest()).decode()
    status, body = http(server.port, "PUT", f"/{AZURITE_ACCOUNT}/{container}?restype=container",
                        {"x-ms-date": date, "x-ms-version": version,
                         "Authorization": f"SharedKey {AZURITE_ACCOUNT}:{sig}"})
    if status >= 300 and status != 409:
        raise RuntimeError(f"creating container {container}: HTTP {status} {body[:200]!r}")


def azure_env(server):
    return {
        "AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT,
        "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
        "AZURE_STORAGE_ENDPOINT": f"{server.endpoint}/{AZURITE_ACCOUNT}",
        "AZURE_ALLOW_HTTP": "true",
    }


def s3_client(server):
    import boto3
    return boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id="test",
                        aws_secret_access_key="test", region_name="us-east-1")


def s3_keys(server, bucket, prefix=""):
    client = s3_client(server)
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(o["Key"] for o in page.get("Contents", []))
    return keys


def s3_snapshot(server, bucket):
    """Every object of the bucket, in memory (moto keeps nothing across restarts)."""
    client = s3_client(server)
    return {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in s3_keys(server, bucket)}


def s3_restore(server, bucket, objects):
    client = s3_client(server)
    for k, data in objects.items():
        client.put_object(Bucket=bucket, Key=k, Body=data)
