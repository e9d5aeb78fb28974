"""The client compatibility matrix: every scenario of scenarios.py with
every client (confluent-kafka, kafka-python, aiokafka, kcat, kafkajs),
against AeroStream on one agent, AeroStream on three agents (topics
replicated three times) and Apache Kafka 4.1.1 (scripts/kafka.sh) as the
reference, all started here on free ports of 127.0.0.1.

    python3 tests/compat/matrix.py [--brokers aerostream-single,aerostream-three,kafka]
                                   [--json FILE] [--write-docs]
                                   [--java-reports DIR] [--connect-reports DIR]
                                   [--go-json FILE]

Prints a markdown table (client × scenario, a cell per broker). With
--write-docs the table replaces the one between the matrix markers of
docs/kafka-compatibility.md. --java-reports reads the JUnit reports of
tests/java (scripts/java-tests.sh: the Java client and Kafka Streams),
--connect-reports those of tests/connect (scripts/connect-tests.sh) and
--go-json the `go test -json` output of tests/go (franz-go, sarama), and
adds their rows (those suites run their own brokers).

Exits 1 when a scenario fails on an AeroStream broker while it passes on
Kafka, or fails on Kafka itself (then the scenario is wrong): that is what
CI checks. The binary is $AEROSTREAM_BIN (else target/debug/aerostream).
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "clients"))
import scenarios  # noqa: E402

BROKERS = ["aerostream-single", "aerostream-three", "kafka"]
BEGIN = "<!-- compatibility matrix: begin (tests/compat/matrix.py --write-docs) -->"
END = "<!-- compatibility matrix: end -->"
# The Java suite's test classes, by the scenario they show.
JAVA_SCENARIOS = {
    "ProducerTest": ["produce-consume", "compression", "idempotence"],
    "ConsumerGroupTest": ["group-classic"],
    "ConsumerProtocolTest": ["group-kip848"],
    "TransactionsTest": ["transactions"],
    "AdminTest": ["admin"],
    "OffsetsTest": ["produce-consume"],
}
# Kafka Streams (StreamsTest of tests/java) and Kafka Connect (tests/connect),
# by the scenarios an application of theirs relies on.
STREAMS_SCENARIOS = {"StreamsTest": ["produce-consume", "group-classic", "transactions"]}
CONNECT_SCENARIOS = {
    "fileSourceAndSinkResumeAfterTheWorkerIsKilled": ["produce-consume", "group-classic"],
    "exactlyOnceSourceResumesAfterTheWorkerIsKilled": ["transactions"],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KafkaBroker:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="aerostream-compat-kafka-")
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"

    def start(self):
        r = subprocess.run([os.path.join(ROOT, "scripts", "kafka.sh"), "--port", str(self.port),
                            "--controller-port", str(free_port()), "--dir", self.dir],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"Apache Kafka did not start: {r.stdout[-500:]} {r.stderr[-1500:]}")
        return self

    def stop(self):
        subprocess.run([os.path.join(ROOT, "scripts", "kafka.sh"), "stop", "--dir", self.dir],
                       capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


def start(name):
    """(bootstrap, stop, environment of the clients) of a started broker."""
    if name == "kafka":
        k = KafkaBroker().start()
        return k.bootstrap, k.stop, {}
    if name == "aerostream-single":
        from broker import Broker
        b = Broker().start()
        return b.bootstrap, b.stop, {}
    if name == "aerostream-three":
        from cluster import VOTERS, Cluster
        c = Cluster().start_voters()

        def stop():
            c.stop_all()
            shutil.rmtree(c.dir, ignore_errors=True)
        bootstrap = ",".join(c.agent(n).bootstrap for n in VOTERS)
        return bootstrap, stop, {"COMPAT_REPLICATION_FACTOR": "3"}
    raise SystemExit(f"unknown broker {name}")


def run_client(broker, bootstrap, env, client):
    r = subprocess.run([sys.executable, os.path.join(HERE, "run_one.py"), bootstrap, client],
                       capture_output=True, text=True, timeout=1200, env=dict(os.environ, **env))
    lines = []
    for line in r.stdout.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        d["broker"] = broker
        lines.append(d)
    if not lines:
        lines.append({"broker": broker, "client": client, "scenario": "*", "result": "fail",
                      "error": f"the runner died: {r.stderr[-500:]}"})
    return lines


def run_brokers(names):
    results = []
    for name in names:
        print(f"compat: starting {name}", flush=True)
        bootstrap, stop, env = start(name)
        try:
            with concurrent.futures.ThreadPoolExecutor(len(scenarios.CLIENTS)) as pool:
                futs = [pool.submit(run_client, name, bootstrap, env, c) for c in scenarios.CLIENTS]
                for f in futs:
                    for d in f.result():
                        results.append(d)
                        print(f"compat: {name} {d['client']} {d['scenario']}: {d['result']}"
                              f" ({d.get('seconds', '?')} s){' ' + d['error'] if d.get('error') and d['result'] == 'fail' else ''}",
                              flush=True)
        finally:
            stop()
    return results


def from_log(path):
    """The results an earlier run printed (`compat: BROKER CLIENT SCENARIO: RESULT (...)`)."""
    out = []
    pattern = re.compile(r"compat: (\S+) (\S+) (\S+): (pass|fail|n/a) \(")
    with open(path, errors="replace") as f:
        for line in f:
            m = pattern.search(line)
            if m and m.group(1) in BROKERS:
                out.append({"broker": m.group(1), "client": m.group(2), "scenario": m.group(3),
                            "result": m.group(4)})
    return out


def java_results(report_dir, targets, mapping=None, client="Java (kafka-clients 4.1.1)"):
    """Rows of a JUnit suite from surefire's XML: each test runs once per
    target, in the order of -Dtargets (`[1]`, `[2]`, ...); `mapping` names
    the scenarios of a test class or a test method."""
    mapping = JAVA_SCENARIOS if mapping is None else mapping
    out = []
    for path in glob.glob(os.path.join(report_dir, "TEST-*.xml")):
        for case in ET.parse(path).getroot().iter("testcase"):
            cls = case.get("classname", "").rsplit(".", 1)[-1]
            m = re.search(r"\[(\d+)\]$", case.get("name", ""))
            if m is None or int(m.group(1)) > len(targets):
                continue
            failed = case.find("failure") is not None or case.find("error") is not None
            skipped = case.find("skipped") is not None
            method = case.get("name", "").split("(", 1)[0]
            for scenario in mapping.get(cls, mapping.get(method, [])):
                out.append({"broker": targets[int(m.group(1)) - 1], "client": client,
                            "scenario": scenario, "result": "n/a" if skipped else ("fail" if failed else "pass")})
    return out


def go_scenario(top, sub):
    """The scenario a test of tests/go shows (`None`: none of the matrix's)."""
    if top in ("TestProduceConsumeCodecs", "TestSyncProducerCodecs"):
        return "compression" if sub not in (None, "none") else "produce-consume"
    if top == "TestAsyncProducerIdempotent":
        return "idempotence"
    if top == "TestGroupSplitCommitResume":
        return "group-kip848" if sub == "kip848" else "group-classic"
    if top == "TestConsumerGroup":
        return "group-classic"
    if top.startswith("TestTransaction") or top == "TestGroupTransactSessionExactlyOnce":
        return "transactions"
    if top.startswith("TestAdmin") or top.startswith("TestClusterAdmin"):
        return "admin"
    return None


def go_results(path):
    """Rows of tests/go from `go test -json`, or from `go test -v` output
    (scripts/go-tests.sh's own, as CI prints it): tests named
    Test.../<target>[/<variant>] in the packages franz and sarama."""
    out = []
    pending = []  # -v results of a package not named yet

    def add(pkg, test, action):
        parts = test.split("/")
        client = {"franz": "franz-go", "sarama": "sarama"}.get(pkg.rsplit("/", 1)[-1])
        if len(parts) < 2 or parts[1] not in BROKERS or client is None:
            return
        scenarios_shown = [go_scenario(parts[0], parts[2] if len(parts) > 2 else None)]
        if parts[0] == "TestProduceConsumeCodecs":
            scenarios_shown.append("idempotence")  # franz-go produces idempotently by default
        for scenario in filter(None, scenarios_shown):
            out.append({"broker": parts[1], "client": client, "scenario": scenario,
                        "result": {"pass": "pass", "fail": "fail", "skip": "n/a"}[action]})
        if client == "sarama":  # sarama has no KIP-848 consumer
            out.append({"broker": parts[1], "client": client, "scenario": "group-kip848", "result": "n/a"})

    verbose = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")
    package_end = re.compile(r"^(?:ok|FAIL)\s+(\S+)\s")
    with open(path, errors="replace") as f:
        for line in f:
            line = re.sub(r"\x1b\[[0-9;]*m", "", line)
            try:
                ev = json.loads(line)
            except ValueError:
                ev = None
            if isinstance(ev, dict):
                if ev.get("Action") in ("pass", "fail", "skip") and ev.get("Test"):
                    add(ev.get("Package", ""), ev["Test"], ev["Action"])
                continue
            m = verbose.match(line)
            if m:
                pending.append((m.group(2), m.group(1).lower()))
                continue
            m = package_end.match(line)
            if m:
                for test, action in pending:
                    add(m.group(1), test, action)
                pending = []
    return out


def merge(results):
    """(client, scenario, broker) -> result; a scenario several tests show
    passes only when all of them pass."""
    cells = {}
    for d in results:
        key = (d["client"], d["scenario"], d["broker"])
        prev = cells.get(key)
        rank = {"fail": 2, "pass": 1, "n/a": 0}
        if prev is None or rank[d["result"]] > rank[prev["result"]]:
            cells[key] = d
    return cells


def table(cells, brokers):
    clients = []
    for (c, _, _) in cells:
        if c not in clients:
            clients.append(c)
    notes = []
    head = "| client | " + " | ".join(s for s, _ in scenarios.SCENARIOS) + " |"
    lines = [head, "|---" * (len(scenarios.SCENARIOS) + 1) + "|"]
    short = {"aerostream-single": "1", "aerostream-three": "3", "kafka": "K"}
    for c in clients:
        row = [c]
        for s, _ in scenarios.SCENARIOS:
            parts = []
            for b in brokers:
                d = cells.get((c, s, b))
                if d is None:
                    continue
                mark = {"pass": "✓", "fail": "✗", "n/a": "–"}[d["result"]]
                if d.get("note") and d["result"] == "pass" and d["note"] not in notes:
                    notes.append(d["note"])
                if d.get("note") and d["result"] == "pass":
                    mark += f"<sup>{notes.index(d['note']) + 1}</sup>"
                parts.append(f"{short[b]} {mark}")
            row.append(" · ".join(parts) if parts else "")
        lines.append("| " + " | ".join(row) + " |")
    legend = ("Cells: 1 = AeroStream on one agent, 3 = AeroStream on three agents "
              "(topics replicated three times), K = Apache Kafka 4.1.1; ✓ passed, ✗ failed, "
              "– the client has no such feature; an empty cell: not covered by that suite.")
    scen = "\n".join(f"- `{s}`: {t}" for s, t in scenarios.SCENARIOS)
    foot = "\n".join(f"<sup>{i + 1}</sup> {n}" for i, n in enumerate(notes))
    return "\n".join(lines) + "\n\n" + legend + "\n\n" + scen + ("\n\n" + foot if foot else "") + "\n"


def verdict(cells):
    """The failures that count: an AeroStream cell failing where Kafka
    passes, and Kafka failing (a scenario that is wrong)."""
    bad = []
    for (c, s, b), d in sorted(cells.items()):
        if d["result"] != "fail":
            continue
        ref = cells.get((c, s, "kafka"))
        if b == "kafka" or ref is None or ref["result"] == "pass":
            bad.append(f"{c} / {s} on {b}: {d.get('error', 'failed')}")
    return bad


def write_docs(text):
    path = os.path.join(ROOT, "docs", "kafka-compatibility.md")
    doc = open(path).read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{path} has no matrix markers")
    before, rest = doc.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    open(path, "w").write(before + BEGIN + "\n" + text + END + after)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default=",".join(BROKERS))
    ap.add_argument("--json")
    ap.add_argument("--from-log", help="take the clients' results from the output of an earlier run "
                                       "(its `compat:` lines, e.g. CI's log) instead of running the brokers")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--java-reports")
    ap.add_argument("--java-targets", default="aerostream-single,aerostream-three,kafka",
                    help="the targets of the Java run, in its order")
    ap.add_argument("--connect-reports", help="tests/connect/target/surefire-reports")
    ap.add_argument("--go-json")
    args = ap.parse_args()
    brokers = [b for b in args.brokers.split(",") if b]
    results = from_log(args.from_log) if args.from_log else run_brokers(brokers)
    if args.java_reports:
        results += java_results(args.java_reports, args.java_targets.split(","))
        results += java_results(args.java_reports, args.java_targets.split(","), STREAMS_SCENARIOS,
                                "Kafka Streams 4.1.1 (exactly_once_v2)")
    if args.connect_reports:
        results += java_results(args.connect_reports, args.java_targets.split(","), CONNECT_SCENARIOS,
                                "Kafka Connect 4.1.1 (distributed)")
    if args.go_json:
        results += go_results(args.go_json)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    cells = merge(results)
    text = table(cells, [b for b in BROKERS if any(k[2] == b for k in cells)])
    print()
    print(text)
    if args.write_docs:
        write_docs(text)
    bad = verdict(cells)
    for b in bad:
        print(f"compat: FAILED {b}", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
