"""Starts and stops the real `aerostream` binary for client tests."""

import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request


def binary():
    explicit = os.environ.get("AEROSTREAM_BIN")
    if explicit:
        return explicit
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "target"))
    return os.path.join(target, "debug", "aerostream")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_tcp_and_udp_port():
    """A port number free for both TCP and UDP: the native protocol listens
    on TCP and QUIC (UDP) with the same number."""
    for _ in range(50):
        port = free_port()
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    raise RuntimeError("no port free for both TCP and UDP")


class Broker:
    """One aerostream process with its own data dir and ports."""

    def __init__(self, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="aerostream-test-")
        self.port = None
        self.http_port = None
        self.native_port = None
        self.registry_port = None
        self.connect_port = None
        self.proc = None
        self.extra_args = list(extra_args)
        self.log_path = os.path.join(self.dir, "broker.log")

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def registry_url(self):
        """The agent's schema registry (Confluent's REST API)."""
        return f"http://127.0.0.1:{self.registry_port}"

    @property
    def connect_url(self):
        """The agent's Connect engine (Kafka Connect's REST API)."""
        return f"http://127.0.0.1:{self.connect_port}"

    @property
    def native_url(self):
        return f"aero://127.0.0.1:{self.native_port}"

    @property
    def native_quic_url(self):
        """The native protocol over QUIC: the UDP port of the native TCP port's number."""
        return f"aero+quic://127.0.0.1:{self.native_port}"

    @property
    def native_ca(self):
        """The CA certificate the agent issues its QUIC certificate with
        (written at start; clients trust it)."""
        return os.path.join(self.dir, "data", "native-tls", "ca.pem")

    PORTS = ("port", "http_port", "native_port", "registry_port", "connect_port")

    def start(self, timeout=60):
        # Ports picked here were free a moment ago, but the kernel may hand
        # one to another process's outgoing connection before the agent
        # binds it: then the agent exits with "Address already in use", and
        # is started again on ports picked afresh (never on ports the
        # caller chose, nor on a restart, which keeps its ports).
        picked = self.unpicked_ports()
        self.launch()
        return self.wait_ready_or_relaunch(picked, timeout)

    def unpicked_ports(self):
        """The ports the next launch picks (and a retry may pick again)."""
        return [name for name in self.PORTS if getattr(self, name) is None]

    def wait_ready_or_relaunch(self, picked, timeout=60):
        """wait_ready; when a port in `picked` (see unpicked_ports, taken
        before the launch) was taken by someone else first, launches the
        agent again on ports picked afresh."""
        for attempt in range(3):
            try:
                return self.wait_ready(timeout)
            except RuntimeError as e:
                if not picked or attempt == 2 or "Address already in use" not in self.run_log():
                    raise
                print(f"aerostream could not bind a port picked for it ({e.__class__.__name__}); "
                      "starting it again on other ports")
                for name in picked:
                    setattr(self, name, None)
                self.launch()

    def launch(self):
        """Starts the process without waiting for it to serve."""
        # The first start picks free ports; restarts reuse them so clients reconnect.
        # (distinct ones: a port closed a moment ago may be handed out again)
        taken = {getattr(self, name) for name in self.PORTS} - {None}

        def pick(picker):
            while (p := picker()) in taken:
                pass
            taken.add(p)
            return p

        if self.port is None:
            self.port = pick(free_port)
        if self.http_port is None:
            self.http_port = pick(free_port)
        if self.native_port is None:
            self.native_port = pick(free_tcp_and_udp_port)
        if self.registry_port is None:
            self.registry_port = pick(free_port)
        if self.connect_port is None:
            self.connect_port = pick(free_port)
        args = [
            binary(), "serve",
            "--data-dir", os.path.join(self.dir, "data"),
            "--kafka-addr", f"127.0.0.1:{self.port}",
            "--http-addr", f"127.0.0.1:{self.http_port}",
            "--native-addr", f"127.0.0.1:{self.native_port}",
            "--schema-registry-addr", f"127.0.0.1:{self.registry_port}",
            "--connect-addr", f"127.0.0.1:{self.connect_port}",
            "--shards", "2",
            "--group-initial-rebalance-delay-ms", "500",
            *self.extra_args,
        ]
        # this run's lines start here: an earlier run's "listening" does not count
        self.log_from = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        return self

    def run_log(self):
        """What the current (or last) run wrote."""
        with open(self.log_path, "rb") as f:
            f.seek(getattr(self, "log_from", 0))
            return f.read().decode(errors="replace")

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"aerostream exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/health", timeout=1) as r:
                    if r.status == 200 and re.search(r"aerostream listening", self.run_log()):
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"aerostream did not become ready:\n{self.log()}")

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def metric(self, name):
        """A series' value on /metrics (the first one of that name), or None."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return None

    def stop(self, timeout=15):
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self.proc = None
        return code

    def kill9(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self):
        self.stop()
        return self.start()
