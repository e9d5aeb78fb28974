"""The Dockerfile builds the binary with the steps scripts/run.sh runs (which
the suite and the README exercise; no container runtime runs here), and
the image serves on the binary's default ports with data in a volume. Its
start script runs here with the real binary: it refuses to listen on every
address without logins, and with an admin secret serves TLS and SCRAM.
scripts/run.sh stays plaintext on the loopback address, and says so."""
import base64
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT, config_source, rust_default_ports


def instructions():
    """(instruction, argument) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def run_sh_build_steps():
    """The commands of scripts/run.sh that build the binary (before it execs the server)."""
    steps = []
    for line in (ROOT / "scripts" / "run.sh").read_text().splitlines():
        line = line.strip()
        if line.startswith("scripts/setup.sh") or line.startswith("cargo build"):
            steps.append(" ".join(line.split()))
    assert len(steps) == 2, f"scripts/run.sh changed shape: {steps}"
    return steps


def test_the_build_stage_runs_the_build_steps_of_run_sh():
    ins = instructions()
    stages = [i for i, (word, _) in enumerate(ins) if word == "FROM"]
    assert len(stages) >= 2, "the image must be multi-stage (build, then a runtime without the toolchain)"
    build = ins[stages[0]:stages[1]]
    commands = [c.strip() for word, arg in build if word == "RUN" for c in arg.split("&&")]
    steps = run_sh_build_steps()
    assert commands[:len(steps)] == steps, f"build stage runs {commands}, scripts/run.sh runs {steps}"


def test_the_image_serves_on_the_default_ports_with_data_in_a_volume():
    ins = instructions()
    runtime = ins[[i for i, (w, _) in enumerate(ins) if w == "FROM"][-1]:]
    ports = rust_default_ports()
    exposed = set(" ".join(a for w, a in runtime if w == "EXPOSE").split())
    assert {f"{ports['kafka']}/tcp", f"{ports['native']}/tcp", f"{ports['native']}/udp",
            f"{ports['http']}/tcp"} <= exposed
    env = dict(re.findall(r"(AEROSTREAM_[A-Z_]+)=(\S+)", " ".join(a for w, a in runtime if w == "ENV")))
    assert env["AEROSTREAM_KAFKA_ADDR"] == f"0.0.0.0:{ports['kafka']}"
    assert env["AEROSTREAM_NATIVE_ADDR"] == f"0.0.0.0:{ports['native']}"
    assert env["AEROSTREAM_HTTP_ADDR"] == f"0.0.0.0:{ports['http']}"
    volumes = " ".join(a for w, a in runtime if w == "VOLUME")
    assert env["AEROSTREAM_DATA_DIR"] in volumes
    assert any(w == "USER" and a != "root" for w, a in runtime), "the agent must not run as root"
    entry = " ".join(a for w, a in runtime if w in ("ENTRYPOINT", "CMD"))
    assert "aerostream-entrypoint" in entry and "serve" in entry
    copied = {a.split()[-1]: a.split()[-2] for w, a in runtime if w == "COPY"}
    assert copied["/usr/local/bin/aerostream-entrypoint"] == "deploy/docker/entrypoint.sh"
    # where the start script looks for the certificate issuer by default
    assert copied["/usr/local/lib/aerostream/kafka-tls.sh"] == "scripts/kafka-tls.sh"
    assert "/usr/local/lib/aerostream/kafka-tls.sh" in ENTRYPOINT.read_text()


# --- the start script, run with the real binary -----------------------------

ENTRYPOINT = ROOT / "deploy" / "docker" / "entrypoint.sh"
KAFKA_TLS = ROOT / "scripts" / "kafka-tls.sh"


def runtime_env():
    """The runtime stage's ENV, with every port 0 (a free one) so that tests do not collide."""
    ins = instructions()
    runtime = ins[[i for i, (w, _) in enumerate(ins) if w == "FROM"][-1]:]
    env = dict(re.findall(r"(AEROSTREAM_[A-Z_]+)=(\S+)", " ".join(a for w, a in runtime if w == "ENV")))
    for key in ("AEROSTREAM_KAFKA_ADDR", "AEROSTREAM_NATIVE_ADDR", "AEROSTREAM_HTTP_ADDR"):
        env[key] = env[key].rsplit(":", 1)[0] + ":0"
    return env


class Started:
    def __init__(self, proc, lines, addrs):
        self.proc, self.lines, self.addrs = proc, lines, addrs

    def local(self, name):
        """HOST:PORT of a listener bound on every address, reached through the loopback."""
        return ("127.0.0.1", int(self.addrs[name].rsplit(":", 1)[1]))

    def http(self, path, auth=None):
        host, port = self.local("http")
        req = urllib.request.Request(f"http://{host}:{port}{path}")
        if auth:
            req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code


@pytest.fixture
def entrypoint(tmp_path, aerostream_bin):
    """Runs the image's start script as the image would, with the real binary
    as `aerostream` on PATH and the volume in a temporary folder."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "aerostream").symlink_to(aerostream_bin)
    running = []

    def run(extra_env=None, args=("serve",), wait=True):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AEROSTREAM_")}
        env.update(runtime_env())
        env.update(PATH=f"{bindir}:{env['PATH']}", AEROSTREAM_DATA_DIR=str(tmp_path / "data"),
                   AEROSTREAM_KAFKA_TLS_ISSUER=str(KAFKA_TLS), AEROSTREAM_SHARDS="1",
                   AEROSTREAM_CACHE_DISK_BYTES="0")
        env.update(extra_env or {})
        proc = subprocess.Popen(["bash", str(ENTRYPOINT), *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        running.append(proc)
        if not wait:
            out, _ = proc.communicate(timeout=60)
            return proc.returncode, out
        lines, deadline = [], time.time() + 60
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"aerostream listening kafka=(\S+) http=(\S+) native=(\S+)", line)
            if m:
                threading.Thread(target=lambda: [lines.append(x) for x in proc.stdout], daemon=True).start()
                return Started(proc, lines, dict(zip(("kafka", "http", "native"), m.groups())))
        pytest.fail("the agent did not serve:\n" + "".join(lines[-40:]))

    yield run
    for proc in running:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def kafka_metadata_closes(sock):
    """Sends Kafka Metadata v1 (all topics) before any login: a listener that
    requires SASL closes the connection instead of answering."""
    body = struct.pack(">hhi", 3, 1, 7) + struct.pack(">h", 5) + b"probe" + struct.pack(">i", -1)
    sock.sendall(struct.pack(">i", len(body)) + body)
    sock.settimeout(10)
    try:
        return sock.recv(4) == b""
    except ConnectionResetError:
        return True


def test_the_image_refuses_every_address_without_logins(entrypoint, tmp_path):
    code, out = entrypoint(wait=False)
    assert code == 64, out
    assert "refusing to listen on 0.0.0.0:0" in out and "AEROSTREAM_INSECURE=true" in out, out
    assert "/run/secrets/aerostream-admin" in out, "the refusal must say how to give an admin user"
    assert "aerostream listening" not in out and not (tmp_path / "data").exists(), "the agent started"


def test_with_an_admin_secret_the_image_serves_tls_and_logins(entrypoint, tmp_path):
    secret = tmp_path / "admin"
    secret.write_text("admin:s3cret-Pw\n")
    agent = entrypoint({"AEROSTREAM_ADMIN_USER_FILE": str(secret)})
    # Kafka: TLS with a certificate from the CA in the volume, naming localhost
    ca = tmp_path / "data" / "kafka-tls" / "ca.pem"
    assert ca.exists(), "".join(agent.lines)
    assert oct(os.stat(tmp_path / "data" / "kafka-tls" / "ca.key").st_mode & 0o777) == "0o600"
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(agent.local("kafka"), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
            # and SASL: nothing is served before a login
            assert kafka_metadata_closes(tls)
    # the REST API and the console: the admin's login, nothing without one
    assert agent.http("/v1/topics") == 401
    assert agent.http("/aerostream/console/") == 401
    assert agent.http("/v1/topics", auth="admin:wrong") == 401
    assert agent.http("/v1/topics", auth="admin:s3cret-Pw") == 200
    assert agent.http("/health") == 200
    # the password is in no command line
    cmdline = open(f"/proc/{agent.proc.pid}/cmdline", "rb").read()
    assert b"s3cret" not in cmdline


def test_an_explicit_insecure_flag_serves_without_logins(entrypoint):
    agent = entrypoint({"AEROSTREAM_INSECURE": "true"})
    assert agent.http("/v1/topics") == 200
    assert any("no logins and no TLS" in line for line in agent.lines), "".join(agent.lines)


def test_oauthbearer_without_an_audience_is_refused(entrypoint, tmp_path):
    jwks = tmp_path / "jwks.json"
    jwks.write_text('{"keys": []}')
    code, out = entrypoint({"AEROSTREAM_ADMIN_USER": "admin:pw",
                            "AEROSTREAM_SASL_MECHANISMS": "OAUTHBEARER,SCRAM-SHA-512",
                            "AEROSTREAM_SASL_OAUTHBEARER_JWKS": str(jwks),
                            "AEROSTREAM_SASL_OAUTHBEARER_ISSUER": "https://idp.example.com/"}, wait=False)
    assert code == 64 and "AEROSTREAM_SASL_OAUTHBEARER_AUDIENCE" in out, out


def test_other_subcommands_run_as_they_are(entrypoint):
    code, out = entrypoint(args=("cluster-ca", "--help"), wait=False)
    assert code == 0 and "--nodes" in out, out


# --- scripts/run.sh: plaintext on the loopback address, and it says so --------

def run_sh(tmp_path, *args, env=None):
    """scripts/run.sh in a copy of the scripts folder, with setup.sh and cargo
    doing nothing and the release binary replaced by one that prints its
    arguments: what run.sh itself prints and what it starts."""
    scripts = tmp_path / "repo" / "scripts"
    scripts.mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "run.sh", scripts / "run.sh")
    (scripts / "setup.sh").write_text("#!/bin/sh\nexit 0\n")
    (scripts / "setup.sh").chmod(0o755)
    bindir = tmp_path / "bin"
    (bindir).mkdir()
    (bindir / "cargo").write_text("#!/bin/sh\nexit 0\n")
    (bindir / "cargo").chmod(0o755)
    release = tmp_path / "target" / "release"
    release.mkdir(parents=True)
    (release / "aerostream").write_text('#!/bin/sh\necho "started: $*"\n')
    (release / "aerostream").chmod(0o755)
    full = {k: v for k, v in os.environ.items() if not k.startswith("AEROSTREAM_")}
    full.update(PATH=f"{bindir}:{full['PATH']}", CARGO_TARGET_DIR=str(tmp_path / "target"), **(env or {}))
    return subprocess.run(["bash", str(scripts / "run.sh"), *args], env=full, capture_output=True, text=True,
                          timeout=60)


def test_run_sh_serves_the_loopback_address_in_plaintext_and_says_how_to_secure_it(tmp_path):
    out = run_sh(tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "started: serve", out.stdout + out.stderr
    # the binary's own defaults: every listener on the loopback address
    src = config_source()
    assert len(re.findall(r"SocketAddr::from\(\(\[127, 0, 0, 1\],\s*\d+\)\)", src)) >= 4, \
        "the binary no longer binds the loopback address by default: run.sh's notice would be wrong"
    assert "plaintext and no logins, on 127.0.0.1" in out.stderr
    assert "--sasl-mechanisms" in out.stderr and "docs/security.md" in out.stderr


def test_run_sh_says_nothing_when_given_security_settings(tmp_path):
    out = run_sh(tmp_path, "--sasl-mechanisms", "SCRAM-SHA-512")
    assert out.returncode == 0 and "plaintext" not in out.stderr, out.stderr
    out = run_sh(tmp_path / "env", env={"AEROSTREAM_SASL_MECHANISMS": "SCRAM-SHA-512"})
    assert out.returncode == 0 and "plaintext" not in out.stderr, out.stderr
