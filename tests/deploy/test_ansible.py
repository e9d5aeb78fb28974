"""ansible/ checked here: ansible-lint's production profile, a syntax check
of every playbook, and site.yml applied for real to this machine under a
temporary root (no mount, sysctl or systemd action on the machine itself):
it formats a disk image with xfs, writes the mount unit, kernel settings,
configuration and service unit, and the real binary then starts with the
configuration it wrote. A second run must change nothing."""
import base64
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.request

import pytest
import yaml

from conftest import ANSIBLE, config_file_keys, rust_default_ports, tool

PLAYBOOKS = sorted(p.name for p in ANSIBLE.glob("*.yml"))
IN_SYNC = ANSIBLE / "roles" / "aerostream_agent" / "files" / "aerostream-in-sync"
NVME_MOUNT = "/var/lib/aerostream-nvme"


def ansible_env(tmp):
    env = dict(os.environ)
    env.update(ANSIBLE_CONFIG=str(ANSIBLE / "ansible.cfg"), ANSIBLE_HOME=str(tmp / "ansible-home"),
               ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", PATH=f"{os.path.dirname(sys.executable)}:{env['PATH']}")
    return env


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ansible_lint_production_profile_is_clean(tmp_path):
    out = subprocess.run([tool("ansible-lint"), "--profile", "production", "--offline", "--nocolor"],
                         cwd=ANSIBLE, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-6000:]


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_playbook_passes_syntax_check(playbook, tmp_path):
    out = subprocess.run([tool("ansible-playbook"), "-i", "examples/inventory.yml", "--syntax-check", playbook],
                         cwd=ANSIBLE, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture(scope="module")
def applied(tmp_path_factory, aerostream_bin):
    """site.yml applied twice to this machine under a temporary root."""
    tmp = tmp_path_factory.mktemp("site")
    root = tmp / "root"
    # a fake sysfs: one EBS volume, one instance store device
    for dev, model in (("nvme0n1", "Amazon Elastic Block Store"), ("nvme1n1", "Amazon EC2 NVMe Instance Storage")):
        (root / "sys/block" / dev / "device").mkdir(parents=True)
        (root / "sys/block" / dev / "device/model").write_text(model + "\n")
    (root / "dev").mkdir()
    # irqbalance is there to be told where interrupts go
    (root / "usr/sbin").mkdir(parents=True)
    (root / "usr/sbin/irqbalance").write_text("")
    with open(root / "dev/nvme1n1", "wb") as f:
        f.truncate(512 << 20)  # sparse; xfs needs 300 MiB at least
    cluster_port = free_udp_port()
    # a copy of its own: a build in a shared target folder must not change the binary between the two runs
    binary = tmp / "aerostream"
    shutil.copy2(aerostream_bin, binary)
    # Extra variables win over everything else: what keeps the run inside
    # the temporary root and away from the machine's mounts and services.
    confine = {
        "aerostream_prefix": str(root),
        "aerostream_apply": False,
        "aerostream_disk_sysfs": str(root / "sys"),
        "aerostream_agent_binary": str(binary),
        "aerostream_agent_cluster_certs": str(tmp / "cluster-certs"),
        # what the playbook generates on the control host, kept out of the clone
        "aerostream_admin_password_file": str(tmp / "credentials" / "admin-password"),
        "aerostream_agent_kafka_tls_dir": str(tmp / "kafka-tls"),
    }
    inventory = {
        "aerostream_agents": {
            "hosts": {"agent-1": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "ansible_become": False,
                "aerostream_node_id": 1,
                "aerostream_private_ip": "127.0.0.1",
                "aerostream_rack": "zone-a",
            }},
            "vars": {
                "aerostream_cluster_port": cluster_port,
                # one CPU kept for interrupts even on a small machine
                "aerostream_reserved_cpus": 1,
                "aerostream_voters": [f"1@127.0.0.1:{cluster_port}"],
                "aerostream_load_balanced": True,
                "aerostream_advertised_kafka": "nlb.example.internal:9092",
                "aerostream_object_store": "s3://segments/cluster-1",
                "aerostream_environment": {"AWS_REGION": "eu-west-1"},
            },
        },
    }
    inv = tmp / "inventory.yml"
    inv.write_text(yaml.safe_dump(inventory))
    extra = tmp / "confine.yml"
    extra.write_text(yaml.safe_dump(confine))
    runs = []
    for _ in range(2):
        out = subprocess.run([tool("ansible-playbook"), "-i", str(inv), "-e", f"@{extra}", "site.yml"], cwd=ANSIBLE,
                             env=ansible_env(tmp), capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout[-8000:] + out.stderr[-4000:]
        runs.append(out.stdout)
    return {"tmp": tmp, "root": root, "runs": runs, "cluster_port": cluster_port}


def test_the_instance_store_is_formatted_with_xfs_and_mounted_with_noatime(applied):
    root = applied["root"]
    probe = lambda tag: subprocess.run(["blkid", "-p", "-o", "value", "-s", tag, str(root / "dev/nvme1n1")],
                                       capture_output=True, text=True).stdout.strip()
    assert probe("TYPE") == "xfs"
    unit_name = subprocess.run(["systemd-escape", "--path", "--suffix=mount", NVME_MOUNT],
                               capture_output=True, text=True, check=True).stdout.strip()
    unit = (root / "etc/systemd/system" / unit_name).read_text()
    assert f"What=/dev/disk/by-uuid/{probe('UUID')}" in unit
    assert f"Where={NVME_MOUNT}" in unit and "Type=xfs" in unit
    assert "noatime" in re.search(r"^Options=(.*)$", unit, re.M).group(1).split(",")
    # the EBS volume was left alone
    assert not (root / "dev/nvme0n1").exists()


def changed_tasks(output):
    """The tasks that reported a change, from ansible-playbook's output."""
    return re.findall(r"^TASK \[(.*?)\] \**\n(?:[^\n]*\n)*?changed: ", output, re.M)


def test_a_second_run_changes_nothing(applied):
    recap = re.findall(r"^(\S+)\s*:\s*ok=\d+\s+changed=(\d+)", applied["runs"][1], re.M)
    assert recap and all(changed == "0" for _, changed in recap), \
        f"changed again: {changed_tasks(applied['runs'][1])}\n" + applied["runs"][1][-3000:]
    assert re.search(r"changed=[1-9]", applied["runs"][0]), "the first run changed nothing"


def test_kernel_settings_cover_map_count_and_quic_buffers(applied):
    conf = (applied["root"] / "etc/sysctl.d/60-aerostream.conf").read_text()
    values = dict(re.findall(r"^([a-z_.]+) = (\d+)$", conf, re.M))
    # docs/configuration.md, "Operating system limits"
    assert int(values["vm.max_map_count"]) >= 262144
    assert int(values["net.core.rmem_max"]) >= 4 << 20 and int(values["net.core.wmem_max"]) >= 4 << 20


def test_shards_and_interrupts_get_separate_cpus(applied):
    config = tomllib.loads((applied["root"] / "etc/aerostream/config.toml").read_text())
    cpus = os.cpu_count()
    assert config["shards"] == cpus - 1
    # shards pin themselves to CPUs 0..shards-1 (dataplane/src/shard.rs); irqbalance keeps off them
    shard_rs = (ANSIBLE.parent / "dataplane/src/shard.rs").read_text()
    assert re.search(r"for i in 0\.\.n \{.*?pin_to_core\(i\)", shard_rs, re.S), \
        "shards no longer pin shard i to CPU i: the CPU placement of the tuning role must follow"
    irq = (applied["root"] / "etc/default/irqbalance").read_text()
    assert re.search(rf"^IRQBALANCE_BANNED_CPULIST=0-{cpus - 2}$", irq, re.M), irq


def test_the_service_unit_is_hardened_and_restarts_on_failure(applied):
    unit_path = applied["root"] / "etc/systemd/system/aerostream.service"
    unit = unit_path.read_text()
    for line in ("Restart=on-failure", "NoNewPrivileges=true", "ProtectSystem=strict",
                 "ExecStart=/usr/local/bin/aerostream serve --config /etc/aerostream/config.toml",
                 "LimitNOFILE=1048576", f"ReadWritePaths=/var/lib/aerostream {NVME_MOUNT}",
                 f"RequiresMountsFor=/var/lib/aerostream {NVME_MOUNT}"):
        assert re.search(rf"^{re.escape(line)}$", unit, re.M), f"missing {line}"
    # systemd's own assessment of the unit's exposure: at most 2.0 of 10 ("OK")
    out = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=20", str(unit_path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_configuration_uses_only_keys_the_agent_accepts(applied):
    config = tomllib.loads((applied["root"] / "etc/aerostream/config.toml").read_text())
    assert set(config) <= config_file_keys(), f"unknown keys: {set(config) - config_file_keys()}"
    ports = rust_default_ports()
    for key, port in (("kafka_addr", ports["kafka"]), ("native_addr", ports["native"]),
                      ("http_addr", ports["http"])):
        assert config[key] == f"0.0.0.0:{port}"
    assert config["node_id"] == 1
    assert config["voters"] == [f"1@127.0.0.1:{applied['cluster_port']}"]
    assert config["load_balanced"] is True
    assert config["advertised_kafka_addr"] == "nlb.example.internal:9092"
    assert config["advertised_native_addr"] == f"127.0.0.1:{ports['native']}"
    assert config["cache_dir"].startswith(NVME_MOUNT + "/")
    assert config["local_disk_limit"] > 0
    assert config["rack"] == "zone-a"
    # the partition logs live on the instance store
    log = applied["root"] / "var/lib/aerostream/log"
    assert log.is_symlink() and os.readlink(log) == str(applied["root"]) + NVME_MOUNT + "/log"
    env = (applied["root"] / "etc/aerostream/aerostream.env").read_text()
    assert "AWS_REGION=eu-west-1" in env


def mode(path):
    return os.stat(path).st_mode & 0o777


def test_security_is_on_with_a_generated_admin_password_and_kafka_tls(applied):
    """TLS and SCRAM in the configuration, the admin user in a root-only file
    the unit reads, its password generated on the control host (0600) and
    the same on the second run, each agent's certificate naming the
    addresses clients dial."""
    root, tmp = applied["root"], applied["tmp"]
    config = tomllib.loads((root / "etc/aerostream/config.toml").read_text())
    assert config["kafka_tls_cert"] == "/etc/aerostream/kafka.pem"
    assert config["kafka_tls_key"] == "/etc/aerostream/kafka.key"
    assert config["sasl_mechanisms"] == ["SCRAM-SHA-512", "SCRAM-SHA-256"]
    assert not any(k.startswith("sasl_oauthbearer") for k in config), "OAUTHBEARER is on only with a key set"
    assert "admin_user" not in config, "the password must not be in the configuration"

    generated = tmp / "credentials" / "admin-password"
    password = generated.read_text().strip()
    assert len(password) >= 32 and mode(generated) == 0o600 and mode(generated.parent) == 0o700
    env = root / "etc/aerostream/admin.env"
    assert env.read_text() == f"AEROSTREAM_ADMIN_USER='admin:{password}'\n"
    assert mode(env) == 0o600
    assert password not in "".join(applied["runs"]), "the password shows in ansible's output"
    unit = (root / "etc/systemd/system/aerostream.service").read_text()
    assert re.search(r"^EnvironmentFile=/etc/aerostream/admin.env$", unit, re.M), \
        "the unit must require the admin file (no leading '-')"

    assert mode(root / "etc/aerostream/kafka.key") == 0o600
    assert mode(tmp / "kafka-tls" / "ca.key") == 0o600
    names = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in",
                            str(root / "etc/aerostream/kafka.pem")], capture_output=True, text=True, check=True).stdout
    for name in ("DNS:nlb.example.internal", "IP Address:127.0.0.1", "DNS:localhost"):
        assert name in names, names
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(tmp / "kafka-tls" / "ca.pem"),
                             str(root / "etc/aerostream/kafka.pem")], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_the_role_refuses_oauthbearer_without_issuer_and_audience(tmp_path):
    """The role on its own: its first task stops the run before anything is written."""
    out = subprocess.run(
        [tool("ansible"), "localhost", "-i", "localhost,", "-c", "local", "-m", "ansible.builtin.include_role",
         "-a", "name=aerostream_agent tasks_from=main",
         "-e", "aerostream_agent_oauthbearer_jwks=/nonexistent/jwks.json",
         "-e", "aerostream_agent_oauthbearer_issuer=https://idp.example.com/",
         "-e", f"aerostream_prefix={tmp_path} aerostream_apply=false aerostream_node_id=1 aerostream_private_ip=127.0.0.1",
         # should the check ever let it through: nothing lands in the clone
         "-e", f"aerostream_admin_password_file={tmp_path}/credentials/admin-password "
               f"aerostream_agent_kafka_tls_dir={tmp_path}/kafka-tls aerostream_agent_binary={tmp_path}/none",
         "-e", f"ansible_python_interpreter={sys.executable}"],
        cwd=ANSIBLE, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert out.returncode != 0, out.stdout[-3000:]
    assert "needs both aerostream_agent_oauthbearer_issuer and _audience" in " ".join(out.stdout.split()), \
        out.stdout[-3000:]
    assert not (tmp_path / "etc").exists(), "the role wrote files before checking its settings"


def test_the_agent_starts_with_the_written_configuration_and_certificates(applied, aerostream_bin, tmp_path):
    """The file as written, with only the addresses and folders of the host
    replaced by flags (which win over the file) and the admin user taken
    from the file the unit reads: the agent forms its one-voter cluster with
    the certificates site.yml issued and serves Kafka over TLS with logins
    (the REST API too); the in-sync check used by rolling restarts logs in
    and sees its partitions, and says what is missing without a login."""
    root = applied["root"]
    admin_env = root / "etc/aerostream/admin.env"
    admin = re.search(r"^AEROSTREAM_ADMIN_USER='(.*)'$", admin_env.read_text(), re.M).group(1)
    args = [aerostream_bin, "serve", "--config", str(root / "etc/aerostream/config.toml"),
            "--data-dir", str(tmp_path / "data"), "--cache-dir", str(tmp_path / "cache"),
            "--object-store", f"file://{tmp_path / 'objects'}",
            "--cluster-certs", str(root / "etc/aerostream/certs"),
            "--kafka-tls-cert", str(root / "etc/aerostream/kafka.pem"),
            "--kafka-tls-key", str(root / "etc/aerostream/kafka.key"),
            "--cluster-addr", f"127.0.0.1:{applied['cluster_port']}",
            "--kafka-addr", "127.0.0.1:0", "--native-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
            "--local-disk-limit", "256MiB", "--cache-disk-bytes", "0"]
    (tmp_path / "objects").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AEROSTREAM_")}
    env["AEROSTREAM_ADMIN_USER"] = admin
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        native, lines = None, []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"aerostream listening kafka=(\S+) http=(\S+) native=(\S+)", line)
            if m:
                kafka, http, native = m.groups()
                break
        assert native, "the agent did not serve:\n" + "".join(lines[-40:])
        # keep reading its output so that it never blocks on a full pipe
        threading.Thread(target=lambda: [lines.append(x) for x in proc.stdout], daemon=True).start()

        # Kafka over TLS, the certificate naming the address clients dial
        ctx = ssl.create_default_context(cafile=str(applied["tmp"] / "kafka-tls" / "ca.pem"))
        host, port = kafka.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="nlb.example.internal") as tls:
                assert tls.version() in ("TLSv1.2", "TLSv1.3")
        # the REST API needs the admin's login
        def get(auth=None):
            req = urllib.request.Request(f"http://{http}/v1/topics")
            if auth:
                req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code
        assert get() == 401 and get(admin) == 200

        check = [sys.executable, str(IN_SYNC), "--addr", native, "--topic", "deploy-probe"]
        anonymous = subprocess.run(check, capture_output=True, text=True, timeout=30)
        assert anonymous.returncode == 2 and "--credentials-file" in anonymous.stderr, anonymous.stderr
        check += ["--credentials-file", str(admin_env)]
        out = None
        for _ in range(50):
            out = subprocess.run(check + ["--node", "1"], capture_output=True, text=True, timeout=30)
            if out.returncode == 0:
                break
            time.sleep(0.2)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "1/1 partitions in sync" in out.stdout
        gone = subprocess.run(check + ["--node", "7"], capture_output=True, text=True, timeout=30)
        assert gone.returncode == 1 and "node 7 is not live" in gone.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, "the agent did not stop cleanly on SIGTERM"


def test_the_in_sync_check_says_when_it_cannot_ask():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run([sys.executable, str(IN_SYNC), "--addr", f"127.0.0.1:{port}", "--timeout", "2"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "cannot ask" in out.stderr
