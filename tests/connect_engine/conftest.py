import getpass
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "clients"))
sys.path.insert(0, os.path.join(HERE, "..", "tiering"))

import servers  # noqa: E402
from broker import free_port  # noqa: E402


@pytest.fixture
def s3(monkeypatch):
    server = servers.moto()
    servers.create_bucket(server, "sink")
    # the agents read the standard AWS variables, as the sink's docs say
    for k, v in servers.s3_env(server).items():
        monkeypatch.setenv(k, v)
    yield server
    server.cleanup()


class Postgres:
    """A throwaway PostgreSQL server: its own data dir (owned by the
    `postgres` user when the tests run as root, since PostgreSQL refuses
    to run as root), a free port on 127.0.0.1, trust authentication."""

    def __init__(self, bindir):
        self.bindir = bindir
        self.dir = tempfile.mkdtemp(prefix="aerostream-pg-")
        self.port = free_port()
        self.user = "postgres"
        # as the postgres user when root (what `runuser -u postgres` does,
        # with the server itself as the child process, so it gets the
        # signals)
        as_root = os.geteuid() == 0
        self.as_user = {"user": "postgres", "group": "postgres", "extra_groups": []} if as_root else {}
        if as_root:
            shutil.chown(self.dir, "postgres", "postgres")
        else:
            self.user = getpass.getuser()
        data = os.path.join(self.dir, "data")
        subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "--auth=trust", "-U", self.user,
                        "--no-sync"], check=True, capture_output=True, cwd=self.dir, **self.as_user)
        self.log = open(os.path.join(self.dir, "postgres.log"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(bindir, "postgres"), "-D", data, "-p", str(self.port), "-k", self.dir,
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir, **self.as_user)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("postgres exited: " + open(self.log.name).read())
            if subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
                               "-d", "postgres", "-c", "select 1"], capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("postgres did not start: " + open(self.log.name).read())

    @property
    def url(self):
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    @property
    def jdbc_url(self):
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres"

    def sql(self, statement):
        """Runs statements with psql; the rows of the last, as lists of
        text (NULL as None)."""
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
                              "-d", "postgres", "-X", "-q", "-A", "-t", "-F", "\x1f", "-P", "null=\x01NULL",
                              "-v", "ON_ERROR_STOP=1", "-c", statement],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return [[None if c == "\x01NULL" else c for c in line.split("\x1f")]
                for line in out.stdout.splitlines() if line]

    def stop(self):
        self.proc.send_signal(signal.SIGINT)  # fast shutdown
        try:
            self.proc.wait(timeout=20)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def postgres_bindir():
    """Where PostgreSQL's newest server binaries are (Debian's layout), or
    None."""
    def version(initdb):
        v = initdb.split("/")[-3]
        return [int(p) for p in v.split(".") if p.isdigit()]
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version)
    return os.path.dirname(found[-1]) if found else None


@pytest.fixture(scope="module")
def postgres():
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL IS NOT INSTALLED (no /usr/lib/postgresql/*/bin/initdb): "
                    "run scripts/setup.sh; the PostgreSQL connector tests did not run")
    server = Postgres(bindir)
    yield server
    server.stop()
