"""Agents in network namespaces of their own, joined by a bridge, so a test
can cut one agent off the network the way a failed switch port or a
partitioned zone does: its link goes down, while processes inside its
namespace (a client next to it) still reach it.

Layout: bridge `<prefix>br` in the test's namespace with 10.X.0.254/24;
agent N lives in namespace `<prefix>nN` with 10.X.0.N on a veth pair
whose outer end `<prefix>vN` is a port of the bridge. X is the first of
231 to 250 no other bridge on the machine uses, so two test runs side by
side (the two halves of the client tests) each get a network of their own.

With AEROSTREAM_NS_KEEP_LOGS=DIR, each agent's log (DIR/brokerN.log) and
partition data (DIR/dataN/log, without the cache or the metastore) are
kept when the agents are cleaned up, to reason after a failed run about
which batches each replica held.
"""

import contextlib
import os
import shutil
import subprocess
import tempfile

from broker import binary
from cluster import eventually

KAFKA_PORT, HTTP_PORT, CLUSTER_PORT = 9092, 9001, 9093


def ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def available():
    """Why namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"aesprobe{os.getpid()}"
    r = ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


def free_subnet():
    """The first 10.X.0 (X from 231 to 250) no address on this machine uses."""
    used = ip("-4", "-o", "addr", "show").stdout
    for x in range(231, 251):
        if f" 10.{x}.0." not in used:
            return f"10.{x}.0"
    raise RuntimeError("no free 10.231-250.0.0/24 subnet for the test network")


class Network:
    def __init__(self, nodes):
        self.prefix = f"aes{os.getpid() % 10000}"
        self.nodes = list(nodes)
        self.bridge = f"{self.prefix}br"
        self.subnet = free_subnet()
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.subnet}.254/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for n in self.nodes:
            ns, outer = self.ns(n), self.veth(n)
            ip("netns", "add", ns)
            ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", outer, "master", self.bridge)
            ip("link", "set", outer, "up")
            ip("-n", ns, "addr", "add", f"{self.addr(n)}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def ns(self, n):
        return f"{self.prefix}n{n}"

    def veth(self, n):
        return f"{self.prefix}v{n}"

    def addr(self, n):
        return f"{self.subnet}.{n}"

    def cut(self, n):
        """Agent n loses its link: nothing crosses between it and the rest."""
        ip("link", "set", self.veth(n), "down")

    def heal(self, n):
        ip("link", "set", self.veth(n), "up")

    def separate(self, n, others):
        """Agent n and each of `others` stop reaching one another (packets
        between them are dropped silently, both ways), while both sides
        still reach everyone else, clients included."""
        for o in others:
            ip("-n", self.ns(n), "route", "add", "blackhole", f"{self.addr(o)}/32")
            ip("-n", self.ns(o), "route", "add", "blackhole", f"{self.addr(n)}/32")

    def join(self, n, others):
        """Undoes `separate`."""
        for o in others:
            ip("-n", self.ns(n), "route", "del", "blackhole", f"{self.addr(o)}/32", check=False)
            ip("-n", self.ns(o), "route", "del", "blackhole", f"{self.addr(n)}/32", check=False)

    def run_in(self, n, args, **kw):
        """Starts `args` inside agent n's namespace."""
        return subprocess.Popen(["ip", "netns", "exec", self.ns(n), *args], **kw)

    def remove(self):
        for n in self.nodes:
            ip("link", "del", self.veth(n), check=False)
            ip("netns", "del", self.ns(n), check=False)
        ip("link", "del", self.bridge, check=False)


class NsAgent:
    """One aerostream process in its namespace, on that namespace's address."""

    def __init__(self, net, node, voters, certs, extra_args=()):
        self.net, self.node = net, node
        self.dir = tempfile.mkdtemp(prefix=f"aerostream-ns{node}-")
        self.log_path = os.path.join(self.dir, "broker.log")
        self.args = [
            binary(), "serve",
            "--node-id", str(node),
            "--data-dir", os.path.join(self.dir, "data"),
            "--kafka-addr", f"{net.addr(node)}:{KAFKA_PORT}",
            "--http-addr", f"{net.addr(node)}:{HTTP_PORT}",
            "--cluster-addr", f"{net.addr(node)}:{CLUSTER_PORT}",
            "--voters", voters,
            "--cluster-certs", certs,
            "--shards", "2",
            *extra_args,
        ]
        self.proc = None

    @property
    def bootstrap(self):
        return f"{self.net.addr(self.node)}:{KAFKA_PORT}"

    def start(self):
        log = open(self.log_path, "a")
        self.proc = self.net.run_in(self.node, self.args, stdout=log, stderr=subprocess.STDOUT)
        return self

    def wait_ready(self, timeout=90):
        import urllib.request

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"agent {self.node} exited:\n{open(self.log_path).read()}")
            url = f"http://{self.net.addr(self.node)}:{HTTP_PORT}/health"
            with urllib.request.urlopen(url, timeout=1) as r:
                return r.status == 200 and "aerostream listening" in open(self.log_path).read()
        eventually(f"agent {self.node} ready", ready, timeout=timeout)
        return self

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def cleanup(self):
        keep = os.environ.get("AEROSTREAM_NS_KEEP_LOGS")
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copy(self.log_path, os.path.join(keep, f"broker{self.node}.log"))
            shutil.copytree(os.path.join(self.dir, "data"), os.path.join(keep, f"data{self.node}"),
                            dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("cache", "meta", "*-tls"))
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def cluster(nodes, extra_args=(), node_args=lambda node: ()):
    """A network of `nodes`, an agent started and ready in each (all of
    them metastore voters, with certificates of their own), as
    (network, {node: NsAgent}); everything is removed on the way out.
    `node_args(node)` adds arguments of one agent's own (its --rack, say)."""
    net = Network(nodes)
    certs = tempfile.mkdtemp(prefix="aerostream-ns-certs-")
    agents = {}
    try:
        subprocess.run([binary(), "cluster-ca", "--out", certs, "--nodes", ",".join(map(str, nodes))],
                       capture_output=True, check=True)
        voters = ",".join(f"{n}@{net.addr(n)}:{CLUSTER_PORT}" for n in nodes)
        for n in nodes:
            agents[n] = NsAgent(net, n, voters, certs, [*extra_args, *node_args(n)]).start()
        for a in agents.values():
            a.wait_ready()
        yield net, agents
    finally:
        for a in agents.values():
            a.stop()
        net.remove()
        for a in agents.values():
            a.cleanup()
        shutil.rmtree(certs, ignore_errors=True)
