#!/usr/bin/env python3
"""A history checker for transactions, Jepsen-style: transactional
producers and a consume-transform-produce copier run against three agents
(RF 3, min.insync.replicas=2) while a nemesis kills agents with SIGKILL
(a partition leader, a transaction coordinator) and restarts them, or,
with the agents in network namespaces (`cutter`, run by
tests/clients/test_txn_network_cuts.py), cuts an agent's network link
for a few seconds and heals it. Every
operation and its outcome is recorded; afterwards the whole log is read
with read_committed and the history is checked:

1. no record of an aborted transaction is ever read;
2. every record of a committed transaction is read, exactly once;
3. every transaction is seen atomically: all of its records or none
   (also those whose outcome the client never learnt);
4. offsets committed in a transaction move only with it: the copier's
   output holds each input record below its committed offset exactly
   once, and none above it.

Run briefly by tests/clients/test_txn_history.py; for a long run:

    python3 tests/clients/txn_history.py --seconds 300 --seed 7 --out history.json

(the agent binary as for the client tests: AEROSTREAM_BIN, or
$CARGO_TARGET_DIR/debug/aerostream).

Exit status 1 and the anomalies printed when the history is not clean.
"""

import argparse
import json
import os
import random
import shutil
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(__file__))

from confluent_kafka import (Consumer, KafkaError, KafkaException, OFFSET_BEGINNING, Producer,  # noqa: E402
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cluster import VOTERS, Cluster, metadata  # noqa: E402


def new_producer(bootstrap, tid):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 30000, "linger.ms": 2,
                  "message.timeout.ms": 30000, "socket.timeout.ms": 10000})
    p.init_transactions(90)
    return p


class History:
    def __init__(self):
        self.lock = threading.Lock()
        self.txns = {}  # txn id -> {"records": [...], "outcome": "committed"|"aborted"|"unknown"}
        self.events = []

    def note(self, what):
        with self.lock:
            self.events.append((round(time.time(), 3), what))

    def begin(self, txn):
        with self.lock:
            self.txns[txn] = {"records": [], "outcome": "unknown"}

    def wrote(self, txn, value):
        with self.lock:
            self.txns[txn]["records"].append(value)

    def ended(self, txn, outcome):
        with self.lock:
            self.txns[txn]["outcome"] = outcome


def writer(name, bootstrap, topic, partitions, history, stop, rng):
    """Transactions of 1-20 records over random partitions; 70 % commit."""
    tid = f"hist-{name}"
    p = None
    n = 0
    while not stop.is_set():
        txn = None
        try:
            if p is None:
                p = new_producer(bootstrap, tid)
            txn = f"{name}-{n}"
            n += 1
            history.begin(txn)
            p.begin_transaction()
            for i in range(rng.randint(1, 20)):
                value = f"{txn}-{i}"
                p.produce(topic, value=value.encode(), partition=rng.randrange(partitions))
                history.wrote(txn, value)
            if rng.random() < 0.7:
                p.commit_transaction(60)
                history.ended(txn, "committed")
            else:
                p.abort_transaction(60)
                history.ended(txn, "aborted")
        except KafkaException as e:
            err = e.args[0]
            history.note(f"{name}: {err}")
            # outcome unknown; an abortable error is aborted, anything else
            # starts a new producer (which aborts what is open)
            try:
                if p is not None and txn is not None and err.txn_requires_abort():
                    p.abort_transaction(60)
                    history.ended(txn, "aborted")
                    continue
            except KafkaException:
                pass
            p = None
            time.sleep(0.2)
    if p is not None:
        try:
            p.flush(30)
        except KafkaException:
            pass


def copier(bootstrap, source, sink, group, history, stop):
    """Reads `source` (read_committed, as a group member) and copies each
    record to `sink` in a transaction that also commits the offsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "session.timeout.ms": 10000})
    c.subscribe([source])
    p = None
    n = 0
    while not stop.is_set():
        txn = None
        try:
            if p is None:
                p = new_producer(bootstrap, f"hist-copier-{group}")
            msgs = c.consume(50, 0.5)
            msgs = [m for m in msgs if not m.error()]
            if not msgs:
                continue
            txn = f"copy-{n}"
            n += 1
            history.begin(txn)
            p.begin_transaction()
            for m in msgs:
                p.produce(sink, value=m.value(), partition=0)
                history.wrote(txn, "copy:" + m.value().decode())
            ends = {}
            for m in msgs:
                ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
            p.send_offsets_to_transaction([TopicPartition(source, k, v) for k, v in ends.items()],
                                          c.consumer_group_metadata(), 60)
            p.commit_transaction(60)
            history.ended(txn, "committed")
        except KafkaException as e:
            history.note(f"copier: {e.args[0]}")
            try:
                if p is not None and txn is not None and e.args[0].txn_requires_abort():
                    p.abort_transaction(60)
                    history.ended(txn, "aborted")
            except KafkaException:
                p = None
            # rewind to what is committed: aborted copies are redone
            try:
                committed = c.committed([TopicPartition(source, k) for k in range(64)
                                         if k < source_partitions(bootstrap, source)], 30)
                for tp in committed:
                    c.seek(TopicPartition(source, tp.partition, tp.offset if tp.offset >= 0 else 0))
            except KafkaException:
                pass
            time.sleep(0.2)
    c.close()


_partitions = {}


def source_partitions(bootstrap, topic):
    if topic not in _partitions:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
        _partitions[topic] = len(md.topics[topic].partitions)
    return _partitions[topic]


def nemesis(c, topic, history, stop, rng, every):
    """Kills an agent with SIGKILL every `every` seconds (the leader of a
    random partition, or the coordinator of a writer), restarts it after a
    few seconds, and waits for the cluster to settle."""
    # kills are `every` seconds apart counted from the previous kill, not
    # from the restart after it: on a loaded machine a restart takes several
    # seconds, and a short run would otherwise see a single kill
    next_kill = time.monotonic() + every
    while not stop.wait(max(2.0, next_kill - time.monotonic())):
        running = c.running()
        if len(running) < 3:
            continue
        next_kill = time.monotonic() + every
        victim = None
        try:
            port = next(iter(running.values())).port
            md = metadata(port, timeout=5)
            parts = md["topics"].get(topic, {})
            leaders = [leader for (_e, leader) in parts.values() if leader in running]
            victim = rng.choice(leaders) if leaders and rng.random() < 0.6 else rng.choice(list(running))
        except Exception as e:  # noqa: BLE001 (a metadata failure just picks at random)
            history.note(f"nemesis: metadata failed: {e}")
            victim = rng.choice(list(running))
        history.note(f"nemesis: kill -9 agent {victim}")
        c.agent(victim).kill9()
        last = stop.wait(rng.uniform(2, 5))
        try:
            c.agent(victim).start(timeout=120)
        except RuntimeError as e:
            # an agent that cannot restart after a crash is the finding:
            # recorded (the run's check reports it), and the cluster is
            # left with two agents
            lines = c.agent(victim).run_log().splitlines()
            panic = [" | ".join(lines[i:i + 3]) for i, line in enumerate(lines) if "panicked" in line]
            history.note(f"nemesis: agent {victim} failed to restart: {panic or str(e)[-2000:]}")
            return
        if last:
            break
        history.note(f"nemesis: agent {victim} restarted")


def cutter(net, agents):
    """A nemesis for agents in network namespaces (netns.py): every
    `every` seconds it cuts one agent's link (the leader of a random
    partition, or any agent) for 2 to 5 seconds, then heals it. The cut
    agent loses the metastore majority and its clients at once; its
    transactions are completed or aborted by the coordinators that take
    over."""
    def cut(_c, topic, history, stop, rng, every):
        while not stop.wait(every):
            victim = rng.choice(list(agents))
            try:
                some = agents[rng.choice(list(agents))]
                host, port = some.bootstrap.rsplit(":", 1)
                parts = metadata(int(port), timeout=5, host=host)["topics"].get(topic, {})
                leaders = [leader for (_e, leader) in parts.values() if leader in agents]
                if leaders and rng.random() < 0.6:
                    victim = rng.choice(leaders)
            except Exception as e:  # noqa: BLE001 (a metadata failure just picks at random)
                history.note(f"nemesis: metadata failed: {e}")
            history.note(f"nemesis: cut agent {victim} off")
            net.cut(victim)
            stop.wait(rng.uniform(2, 5))
            net.heal(victim)
            history.note(f"nemesis: agent {victim} reconnected")
    return cut


def read_committed(bootstrap, topics, settle=5, timeout=120):
    """Every record of `topics` that read_committed readers see: each
    partition assigned (no group join to wait for, which a cluster just
    through network cuts may take a while to grant) and read from the
    beginning until every partition has reported its end and nothing new
    came for `settle` seconds, or `timeout` passed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed"})
    md = c.list_topics(timeout=30)
    tps = []
    for t in topics:
        if t not in md.topics or md.topics[t].error is not None:
            raise AssertionError(f"topic {t} is not in the metadata: {md.topics.get(t)}")
        tps += [TopicPartition(t, p, OFFSET_BEGINNING) for p in md.topics[t].partitions]
    c.assign(tps)
    seen = defaultdict(list)
    at_end = set()
    deadline = time.time() + timeout
    quiet = time.time()
    while time.time() < deadline and not (len(at_end) == len(tps) and time.time() - quiet >= settle):
        for m in c.consume(500, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add((m.topic(), m.partition()))
                else:
                    quiet = time.time()
                continue
            quiet = time.time()
            at_end.discard((m.topic(), m.partition()))
            seen[m.topic()].append((m.partition(), m.offset(), m.value().decode()))
    c.close()
    return seen


def partition_ends(bootstrap, topic, partitions, seen):
    """Per partition, when a history came out wrong: the high watermark,
    the last stable offset (where read_committed readers stop: an open
    transaction holds it back) and the last offset read, so a report tells
    a transaction left open from records that are gone."""
    ends = {}
    for isolation in ("read_uncommitted", "read_committed"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:8]}",
                      "isolation.level": isolation})
        try:
            for p in range(partitions):
                _low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                ends.setdefault(p, {})["hw" if isolation == "read_uncommitted" else "lso"] = high
        except KafkaException as e:
            ends["error"] = str(e)
        finally:
            c.close()
    for p in range(partitions):
        read = [o for q, o, _v in seen[topic] if q == p]
        ends.setdefault(p, {})["last_read"] = max(read, default=-1)
    return ends


def locate(bootstrap, topic, values, timeout=60):
    """Where read_uncommitted readers find `values` (records a
    read_committed reader missed), as {value: [(partition, offset), ...]}:
    present in the log means hidden from read_committed readers (an
    aborted-transaction entry or the last stable offset), absent means
    gone from the log."""
    wanted = set(values)
    found = defaultdict(list)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"locate-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_uncommitted"})
    try:
        md = c.list_topics(topic, timeout=30)
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in md.topics[topic].partitions]
        c.assign(tps)
        at_end = set()
        deadline = time.time() + timeout
        while time.time() < deadline and len(at_end) < len(tps):
            for m in c.consume(500, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                    continue
                at_end.discard(m.partition())
                v = m.value().decode()
                if v in wanted:
                    found[v].append((m.partition(), m.offset()))
    except KafkaException as e:
        found["error"] = str(e)
    finally:
        c.close()
    return {v: found.get(v, []) for v in values}


def lost_records(history, seen, topic):
    """Every record of a committed transaction that read_committed
    readers did not see."""
    values = Counter(v for _p, _o, v in seen[topic])
    return [v for txn, t in history.txns.items() if not txn.startswith("copy-")
            and t["outcome"] == "committed" for v in t["records"] if values[v] == 0]


def check(history, seen, topic, sink, group_committed):
    anomalies = [e for _t, e in history.events if "failed to restart" in e]
    values = Counter(v for _p, _o, v in seen[topic])
    for txn, t in history.txns.items():
        if txn.startswith("copy-"):
            continue
        present = [v for v in t["records"] if values[v] > 0]
        if t["outcome"] == "aborted" and present:
            anomalies.append(f"aborted transaction {txn} read: {present[:3]}")
        if t["outcome"] == "committed" and len(present) != len(t["records"]):
            missing = [v for v in t["records"] if values[v] == 0]
            anomalies.append(f"committed transaction {txn} lost {len(missing)} records: {missing[:3]}")
        if t["outcome"] == "unknown" and present and len(present) != len(t["records"]):
            anomalies.append(f"transaction {txn} (outcome unknown) seen in part: "
                             f"{len(present)} of {len(t['records'])}")
    for v, n in values.items():
        if n > 1:
            anomalies.append(f"record {v} read {n} times")
    # the copier: input below the committed offsets copied exactly once
    copies = Counter(v for _p, _o, v in seen[sink])
    below = [v for p, o, v in seen[topic] if o < group_committed.get(p, 0)]
    above = [v for p, o, v in seen[topic] if o >= group_committed.get(p, 0)]
    for v in below:
        if copies[v] != 1:
            anomalies.append(f"input {v} below the committed offset copied {copies[v]} times")
    for v in above:
        if copies[v] != 0:
            anomalies.append(f"input {v} above the committed offset copied {copies[v]} times")
    return anomalies


def faults(history):
    """How many times the nemesis has struck so far (kills and link cuts)."""
    return sum(1 for _t, e in list(history.events) if e.startswith(("nemesis: kill", "nemesis: cut")))


def run(seconds=60, seed=1, writers=3, partitions=4, kill_every=12.0, out=None, cluster=None,
        chaos=None, min_faults=0):
    """`cluster`: anything whose `agent(n).bootstrap` reaches agent n (three
    agents are started when absent); `chaos`: the nemesis (`nemesis`, which
    kills, when absent; `cutter(...)` cuts links). The run lasts `seconds`,
    and longer (up to three times as long) until the nemesis has struck
    `min_faults` times: on a loaded machine an agent's restart can take
    long enough that a fixed window sees a single fault."""
    rng = random.Random(seed)
    own = cluster is None
    c = cluster or Cluster().start_voters()
    bootstrap = ",".join(c.agent(n).bootstrap for n in VOTERS)
    topic, sink = f"hist-{uuid.uuid4().hex[:8]}", None
    sink = topic + "-copy"
    group = f"copier-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for t, n in ((topic, partitions), (sink, 1)):
        admin.create_topics([NewTopic(t, n, 3, config={"min.insync.replicas": "2"})])[t].result(60)
    history = History()
    stop = threading.Event()
    threads = [threading.Thread(target=writer, daemon=True,
                                args=(f"w{i}", bootstrap, topic, partitions, history, stop,
                                      random.Random(rng.random())))
               for i in range(writers)]
    threads.append(threading.Thread(target=copier, daemon=True,
                                    args=(bootstrap, topic, sink, group, history, stop)))
    chaos = threading.Thread(target=chaos or nemesis, daemon=True,
                             args=(c, topic, history, stop, random.Random(rng.random()), kill_every))
    for t in threads:
        t.start()
    chaos.start()
    try:
        started = time.monotonic()
        time.sleep(seconds)
        while (faults(history) < min_faults and chaos.is_alive()
               and time.monotonic() - started < 3 * seconds):
            time.sleep(1)
    finally:
        stop.set()
        chaos.join(180)
        for t in threads:
            t.join(180)
    # the copier's committed offsets, then everything as read_committed sees it
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = {tp.partition: tp.offset for tp in
                 probe.committed([TopicPartition(topic, p) for p in range(partitions)], 30)}
    probe.close()
    seen = read_committed(bootstrap, [topic, sink])
    anomalies = check(history, seen, topic, sink, committed)
    stuck = partition_ends(bootstrap, topic, partitions, seen) if anomalies else None
    outcomes = Counter(t["outcome"] for t in history.txns.values())
    summary = {
        "seed": seed, "seconds": seconds, "writers": writers, "partitions": partitions,
        "transactions": dict(outcomes),
        "records_read": {k: len(v) for k, v in seen.items()},
        "kills": sum(1 for _t, e in history.events if e.startswith("nemesis: kill")),
        "cuts": sum(1 for _t, e in history.events if e.startswith("nemesis: cut")),
        "anomalies": anomalies[:50], "anomaly_count": len(anomalies),
    }
    if stuck is not None:
        summary["partition_ends"] = stuck
        lost = lost_records(history, seen, topic)
        if lost:
            summary["lost_located"] = locate(bootstrap, topic, lost[:200])
    if out:
        with open(out, "w") as f:
            json.dump({**summary, "events": history.events[-200:]}, f, indent=2)
    if own:
        c.stop_all()
        shutil.rmtree(c.dir, ignore_errors=True)
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--kill-every", type=float, default=15.0)
    ap.add_argument("--out", default=None, help="write the summary and the last events as JSON")
    args = ap.parse_args()
    s = run(args.seconds, args.seed, args.writers, args.partitions, args.kill_every, args.out)
    print(json.dumps(s, indent=2))
    sys.exit(1 if s["anomaly_count"] else 0)


if __name__ == "__main__":
    main()
