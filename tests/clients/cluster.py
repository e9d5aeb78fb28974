"""A cluster of real agents on this machine, and Metadata read from one
agent at a time over a raw Kafka connection (clients send it to whichever
broker they like)."""

import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid

from broker import Broker, binary, free_port, free_udp_port

VOTERS = (1, 2, 3)


def eventually(what, check, timeout=60, every=0.2):
    """Polls `check` until it returns something truthy; returns that."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, AssertionError, KeyError) as e:
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def agent_metrics(agent):
    """An agent's `/metrics`, unlabelled and labelled series alike, by their full name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{agent.http_port}/metrics", timeout=5) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, val = line.rsplit(" ", 1)
                out[name] = float(val)
        return out


# ---- Metadata v1 over a raw connection --------------------------------------

def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0]

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def array(self, item):
        return [item() for _ in range(self.take(">i"))]


def metadata(port, timeout=5, host="127.0.0.1"):
    """Metadata v1 for all topics, asked of the agent on `host:port`."""
    client = b"cluster-test"
    body = struct.pack(">hhih", 3, 1, 7, len(client)) + client + struct.pack(">i", -1)
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        r = _Reader(_recv_exact(s, size))
    assert r.take(">i") == 7
    brokers = {}
    for _ in range(r.take(">i")):
        node, host, bport, rack = r.take(">i"), r.string(), r.take(">i"), r.string()
        brokers[node] = (host, bport, rack)
    controller = r.take(">i")
    topics = {}
    replica_sets = {}
    for _ in range(r.take(">i")):
        _err, name, _internal = r.take(">h"), r.string(), r.take(">b")
        parts = {}
        for _ in range(r.take(">i")):
            perr, index, leader = r.take(">h"), r.take(">i"), r.take(">i")
            replicas = r.array(lambda: r.take(">i"))
            isr = r.array(lambda: r.take(">i"))
            parts[index] = (perr, leader)
            replica_sets[(name, index)] = (replicas, isr)
        topics[name] = parts
    return {"brokers": brokers, "controller": controller, "topics": topics,
            "replicas": replica_sets}


# ---- the cluster -------------------------------------------------------------

class Cluster:
    def __init__(self, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="aerostream-cluster-")
        self.certs = os.path.join(self.dir, "certs")
        out = subprocess.run(
            [binary(), "cluster-ca", "--out", self.certs, "--nodes", "1,2,3,4"],
            capture_output=True, text=True, check=True)
        assert "wrote" in out.stdout, out.stdout
        # distinct ports: a port freed by one probe can be handed out again
        ports = []
        while len(ports) < 4:
            p = free_udp_port()
            if p not in ports:
                ports.append(p)
        self.cluster_ports = dict(zip((1, 2, 3, 4), ports))
        self.voters = ",".join(f"{i}@127.0.0.1:{self.cluster_ports[i]}" for i in VOTERS)
        self.agents = {}
        self.extra_args = list(extra_args)

    def agent(self, node):
        if node not in self.agents:
            b = Broker(extra_args=[
                "--node-id", str(node),
                "--rack", f"rack-{node}",
                "--cluster-addr", f"127.0.0.1:{self.cluster_ports[node]}",
                "--voters", self.voters,
                "--cluster-certs", self.certs,
                *self.extra_args,
            ])
            self.agents[node] = b
        return self.agents[node]

    def start_voters(self, timeout=120):
        """Launches the three voters together (they elect a metastore
        leader between them) and waits until each serves."""
        picked = {n: self.agent(n).unpicked_ports() for n in VOTERS}
        for n in VOTERS:
            self.agent(n).launch()
        for n in VOTERS:
            self.agent(n).wait_ready_or_relaunch(picked[n], timeout=timeout)
        return self

    def running(self):
        return {i: b for i, b in self.agents.items() if b.proc is not None}

    def stop_all(self):
        for b in self.agents.values():
            if b.proc is not None:
                b.stop()


# ---- a real TCP load balancer in front of the agents -------------------------

class Balancer:
    """haproxy in TCP mode in front of agents, as an NLB stands in front of
    a deployment: round-robin over agents whose /health answers."""

    def __init__(self, port=None, zones=()):
        self.port = port or free_port()
        # a zone's own address of the balancer (an NLB's zonal DNS name),
        # which reaches only the agents in that zone
        self.zone_ports = {z: free_port() for z in zones}
        self.proc = None
        self.dir = tempfile.mkdtemp(prefix="aerostream-haproxy-")

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self, agents, zone_agents=None):
        """`agents`: Broker objects whose ports are already chosen;
        `zone_agents`: for each zone of the balancer, the agents in it."""
        def servers_of(members):
            return "\n".join(
                f"    server agent{i} 127.0.0.1:{b.port} check port {b.http_port} inter 300 fall 2 rise 2"
                for i, b in enumerate(members))
        servers = servers_of(agents)
        zonal = "".join(f"""frontend kafka-{zone}
    bind 127.0.0.1:{port}
    default_backend agents-{zone}
backend agents-{zone}
    balance roundrobin
    option httpchk GET /health
{servers_of((zone_agents or {})[zone])}
""" for zone, port in self.zone_ports.items())
        cfg = os.path.join(self.dir, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(f"""global
    maxconn 2000
defaults
    mode tcp
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    retries 2
    option redispatch
frontend kafka
    bind 127.0.0.1:{self.port}
    default_backend agents
backend agents
    balance roundrobin
    option httpchk GET /health
{servers}
{zonal}""")
        log = open(os.path.join(self.dir, "haproxy.log"), "a")
        self.proc = subprocess.Popen([haproxy(), "-db", "-f", cfg], stdout=log, stderr=subprocess.STDOUT)
        eventually("haproxy listening", lambda: _connects(self.port), timeout=20)
        return self

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


def balanced_cluster(extra_args=()):
    """Three voters in load-balancer mode behind a Balancer, for a pytest
    fixture to `yield from`: yields (cluster, balancer), then stops both and
    removes their folders. The balancer has a zonal address for `rack-2`
    (agent 2's rack), which the agents give clients that name that zone."""
    balancer = Balancer(zones=["rack-2"])
    c = Cluster(extra_args=["--load-balanced", "--advertised-kafka-addr", balancer.bootstrap,
                            "--advertised-kafka-addr-zone",
                            f"rack-2=127.0.0.1:{balancer.zone_ports['rack-2']}",
                            *extra_args])
    for node in VOTERS:
        a = c.agent(node)
        a.port, a.http_port = free_port(), free_port()
    for node in VOTERS:
        c.agent(node).launch()
    for node in VOTERS:
        c.agent(node).wait_ready(timeout=90)
    balancer.start([c.agent(n) for n in VOTERS], zone_agents={"rack-2": [c.agent(2)]})
    try:
        yield c, balancer
    finally:
        balancer.stop()
        c.stop_all()
        shutil.rmtree(c.dir, ignore_errors=True)
        shutil.rmtree(balancer.dir, ignore_errors=True)


def haproxy():
    for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy"):
        if os.path.exists(p):
            return p
    return "haproxy"


def _connects(port):
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


# ---- replicated topics and producers that remember what was acknowledged ----
# (confluent-kafka is imported here only, so the Metadata helpers above work
# without it)

def bootstrap(cluster):
    return ",".join(b.bootstrap for b in cluster.running().values())


def live_port(cluster, avoid=None):
    return next(b.port for n, b in cluster.running().items() if n != avoid)


def create_replicated(cluster, topic, partitions=1):
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    fs = a.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})],
                         operation_timeout=10)
    fs[topic].result(timeout=15)
    return eventually(
        "every partition has a leader and three in-sync replicas",
        lambda: all(len(state(cluster, topic, p)[2]) == 3 and state(cluster, topic, p)[0] > 0
                    for p in range(partitions)))


def state(cluster, topic, partition=0, avoid=None):
    """(leader, replicas, isr) as a running agent's Metadata says."""
    md = metadata(live_port(cluster, avoid))
    _err, leader = md["topics"][topic][partition]
    replicas, isr = md["replicas"][(topic, partition)]
    return leader, replicas, isr


class Production:
    """An idempotent acks=all producer in its own thread; remembers what
    was acknowledged and when."""

    def __init__(self, cluster, topic, partitions=1, bootstrap_servers=None):
        from confluent_kafka import Producer

        self.p = Producer({
            "bootstrap.servers": bootstrap_servers or bootstrap(cluster),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 120000,
            "request.timeout.ms": 5000,
            # a frozen broker keeps its connections open: give up on it in 5 s
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
        })
        self.topic, self.partitions = topic, partitions
        # values are unique across producers of one test
        self.prefix = uuid.uuid4().hex[:6]
        self.acked, self.ack_times, self.errors = [], [], []
        self.offsets = {}
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def report(self, err, msg):
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((msg.partition(), msg.value()))
            self.ack_times.append(time.time())
            # two leaders acknowledging one offset would show here; an
            # idempotent producer acknowledges a retried batch implicitly
            # once a later one succeeded, without its offset (None), and
            # read_back still finds those records
            if msg.offset() is not None:
                self.offsets.setdefault((msg.partition(), msg.offset()), set()).add(msg.value())

    def run(self):
        i = 0
        while not self.stop_flag.is_set():
            try:
                self.p.produce(self.topic, value=f"{self.prefix}-{i}".encode(),
                               partition=i % self.partitions,
                               on_delivery=self.report)
                i += 1
            except BufferError:
                pass
            self.p.poll(0.002)
        self.p.flush(120)

    def wait_acked(self, n, timeout=60):
        eventually(f"{n} acknowledged writes", lambda: len(self.acked) >= n, timeout=timeout)

    def finish(self):
        self.stop_flag.set()
        self.thread.join(150)
        return self.acked


def read_back(cluster, topic, partitions, expected, timeout=90, bootstrap_servers=None):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap_servers or bootstrap(cluster), "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = c.poll(0.5 if len(got) < expected else 1.0)
        if m is None:
            if len(got) >= expected:
                break  # read to the end: nothing more for a second
            continue
        if m.error() is not None:
            continue
        got.append((m.partition(), m.value()))
    c.close()
    return got


def assert_one_record_per_offset(prod):
    split = {k: v for k, v in prod.offsets.items() if len(v) > 1}
    assert not split, f"offsets acknowledged for two different records: {list(split.items())[:3]}"


def assert_nothing_lost(acked, got):
    missing = set(acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert len(got) == len(set(got)), "an idempotent producer's records appear once"




def holdings(port, node):
    """(replicas, leaderships) agent `node` holds, as the agent on `port` says."""
    md = metadata(port)
    replicas = sum(1 for reps, _isr in md["replicas"].values() if node in reps)
    leaders = sum(1 for parts in md["topics"].values()
                  for _err, leader in parts.values() if leader == node)
    return replicas, leaders


def drain(via, node, undo=False, timeout=60):
    """`aerostream drain --node N` against the agent `via`; returns its output."""
    args = [binary(), "drain", "--node", str(node), "--bootstrap", via.bootstrap,
            "--timeout-secs", str(timeout)]
    if undo:
        args.append("--undo")
    out = subprocess.run(args, capture_output=True, text=True, timeout=timeout + 30)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def remove_agent(via, node, timeout=60):
    """`aerostream cluster remove-agent --node N` against the agent `via`;
    the finished process (its return code and output)."""
    args = [binary(), "cluster", "remove-agent", "--node", str(node),
            "--bootstrap", via.bootstrap, "--timeout-secs", str(timeout)]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout + 30)


def longest_pause(times, start, end):
    """The longest time between two acknowledgements in [start, end]
    (seconds), counting from `start` to the first one."""
    inside = [t for t in times if start <= t <= end]
    if not inside:
        return end - start
    gaps = [b - a for a, b in zip([start] + inside, inside)]
    return max(gaps)
