"""terraform/ (and the benchmark's main.tf) checked without a terraform
binary or a cloud account: a real HCL parser reads every file, checkov
finds no failed check, and what the load balancer, the security groups and
the lifecycle rules name is what the code does; the admin password is
generated into an SSM SecureString, and the agents' first-boot script
fetches it with a signature botocore agrees with."""
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import hcl2
import pytest

from conftest import BENCH_AWS, ROOT, TERRAFORM, layout_dirs, rust_default_ports, tf_files


def checkov():
    path = os.environ.get("AEROSTREAM_CHECKOV")
    if not path or not os.path.exists(path):
        pytest.fail("AEROSTREAM_CHECKOV must name checkov (scripts/ci/50-deploy.sh installs it)")
    return path


def load(path):
    with open(path) as f:
        return hcl2.load(f)


def text(value):
    """A string as the parser hands it over, without the quotes some versions keep."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def ref(value):
    """The expression of a reference, `${local.x}` or `local.x`, as `local.x`."""
    v = text(value)
    if isinstance(v, str) and v.startswith("${") and v.endswith("}"):
        return v[2:-1]
    return v


def entries(mapping):
    """A block's attributes and labels, without the parser's own bookkeeping keys."""
    return {text(k): v for k, v in mapping.items() if not str(k).startswith("__")}


def blocks(module_dir, kind):
    """{(type, name): body} of every `resource`/`data` block in a module's files."""
    out = {}
    for path in sorted(module_dir.glob("*.tf")):
        for entry in load(path).get(kind, []):
            for rtype, named in entries(entry).items():
                for name, body in entries(named).items():
                    out[(rtype, name)] = body
    return out


def locals_of(module_dir):
    out = {}
    for path in sorted(module_dir.glob("*.tf")):
        for entry in load(path).get("locals", []):
            out.update(entries(entry))
    return out


def one(value):
    """A nested block: the parser gives a list of bodies."""
    assert isinstance(value, list) and len(value) == 1, value
    return value[0]


@pytest.mark.parametrize("path", tf_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_terraform_file_parses_with_an_hcl_parser(path):
    doc = load(path)
    assert doc, f"{path} parsed to nothing"


def test_the_load_balancer_listens_on_the_binarys_default_ports():
    ports = rust_default_ports()
    local = locals_of(TERRAFORM)
    assert {k: local[f"{k}_port"] for k in ports} == ports, \
        "terraform/ports.tf must name the ports agent/src/config/ binds by default"

    res = blocks(TERRAFORM, "resource")
    kafka = res[("aws_lb_listener", "kafka")]
    native = res[("aws_lb_listener", "native")]
    assert ref(kafka["port"]) == "local.kafka_port" and text(kafka["protocol"]) == "TCP"
    # QUIC runs on the UDP port of the native listener's number
    assert ref(native["port"]) == "local.native_port" and text(native["protocol"]) == "TCP_UDP"
    for tg in ("kafka", "native"):
        check = one(res[("aws_lb_target_group", tg)]["health_check"])
        assert text(check["protocol"]) == "HTTP"
        assert "local.http_port" in ref(check["port"])
        assert text(check["path"]) == "/health"
    # the agent answers that path (the axum router of gateway/src/http/mod.rs)
    http = (ROOT / "gateway" / "src" / "http" / "mod.rs").read_text()
    assert re.search(r'\.route\("/health",\s*any\(health\)\)', http), \
        "gateway/src/http/mod.rs no longer serves /health"


def test_the_cluster_port_is_open_between_agents_only():
    res = blocks(TERRAFORM, "resource")
    rules = {name: body for (rtype, name), body in res.items()
             if rtype in ("aws_vpc_security_group_ingress_rule", "aws_vpc_security_group_egress_rule")}
    cluster = [b for b in rules.values() if "local.cluster_port" in str(b.get("from_port"))]
    assert cluster, "no rule opens the cluster port"
    for body in cluster:
        assert text(body["ip_protocol"]) == "udp"
        assert "aws_security_group.agents.id" in ref(body["referenced_security_group_id"])
        assert "cidr_ipv4" not in body
    for name, body in rules.items():
        if "cidr_ipv4" in body:
            low, high = ref(body["from_port"]), ref(body["to_port"])
            assert "cluster_port" not in str(low) + str(high), f"rule {name} opens the cluster port to addresses"


def _prefix_locals(module_dir):
    dirs = layout_dirs()
    local = locals_of(module_dir)
    key_root = text(local["key_root"])
    assert re.search(r"\$\{var\.prefix\}/", key_root), \
        f"{module_dir.name}: key_root must be the prefix followed by a slash: {key_root}"
    assert text(local["topics_prefix"]) == "${local.key_root}" + dirs["TOPICS_DIR"] + "/"
    assert text(local["tombstones_prefix"]) == "${local.key_root}" + dirs["TOMBSTONES_DIR"] + "/"
    assert text(local["packs_prefix"]) == "${local.key_root}" + dirs["PACKS_DIR"] + "/"


def test_s3_lifecycle_rules_match_the_key_layout_in_cache():
    module = TERRAFORM / "modules" / "s3-bucket"
    _prefix_locals(module)
    cfg = blocks(module, "resource")[("aws_s3_bucket_lifecycle_configuration", "segments")]
    rules = {text(r["id"]): r for r in cfg["rule"]}
    abort = rules["aerostream-abort-incomplete-multipart-uploads"]
    # the whole bucket, or at least every key of the cluster
    assert ref(entries(one(abort["filter"])).get("prefix", "")) in ("", "local.key_root")
    assert one(abort["abort_incomplete_multipart_upload"])["days_after_initiation"]
    tomb = rules["aerostream-expire-tombstones"]
    assert ref(one(tomb["filter"])["prefix"]) == "local.tombstones_prefix"
    assert one(tomb["expiration"])["days"]
    # replaced and deleted versions of live keys expire: segments and packs alike
    replaced = rules["aerostream-expire-replaced-versions"]
    assert ref(entries(one(replaced["filter"])).get("prefix", "")) in ("", "local.key_root")
    assert one(replaced["noncurrent_version_expiration"])["noncurrent_days"]
    for r in rules.values():
        assert text(r["status"]) == "Enabled"


def test_gcs_lifecycle_rules_match_the_key_layout_in_cache():
    module = TERRAFORM / "modules" / "gcs-bucket"
    _prefix_locals(module)
    bucket = blocks(module, "resource")[("google_storage_bucket", "segments")]
    rules = [(text(one(r["action"])["type"]), one(r["condition"])) for r in bucket["lifecycle_rule"]]
    aborts = [c for t, c in rules if t == "AbortIncompleteMultipartUpload"]
    assert len(aborts) == 1
    # the whole bucket, or at least every key of the cluster
    assert [ref(p) for p in aborts[0].get("matches_prefix", [""])] in ([""], ["local.key_root"])
    deletes = [ref(p) for t, c in rules if t == "Delete" and "age" in c for p in c["matches_prefix"]]
    assert deletes == ["local.tombstones_prefix"]


def test_azure_lifecycle_rules_match_the_key_layout_in_cache():
    module = TERRAFORM / "modules" / "azure-container"
    _prefix_locals(module)
    policy = blocks(module, "resource")[("azurerm_storage_management_policy", "segments")]
    rules = {text(r["name"]): r for r in policy["rule"]}
    prefixes = [text(p) for p in one(rules["aerostream-expire-tombstones"]["filters"])["prefix_match"]]
    # Azure's prefixes start with the container's name
    assert prefixes == ["${azurerm_storage_container.segments.name}/${local.tombstones_prefix}"]
    replaced = [text(p) for p in one(rules["aerostream-expire-replaced-versions"]["filters"])["prefix_match"]]
    assert sorted(replaced) == sorted(f"${{azurerm_storage_container.segments.name}}/${{local.{d}_prefix}}"
                                      for d in ("topics", "packs"))


def test_the_command_line_lifecycle_files_match_the_key_layout_in_cache():
    dirs = layout_dirs()
    lifecycle = TERRAFORM / "lifecycle"
    s3 = json.loads((lifecycle / "s3-lifecycle.json").read_text())["Rules"]
    by_id = {r["ID"]: r["Filter"]["Prefix"] for r in s3}
    root = by_id["aerostream-abort-incomplete-multipart-uploads"]
    assert root.endswith("/")
    assert by_id["aerostream-expire-tombstones"] == root + dirs["TOMBSTONES_DIR"] + "/"
    # every live key: segments under topics/ and packed objects under packs/
    assert by_id["aerostream-expire-replaced-versions"] == root

    gcs = json.loads((lifecycle / "gcs-lifecycle.json").read_text())["rule"]
    aborts = [p for r in gcs if r["action"]["type"] == "AbortIncompleteMultipartUpload"
              for p in r["condition"]["matchesPrefix"]]
    expiring = [p for r in gcs if r["action"]["type"] == "Delete" and "age" in r["condition"]
                for p in r["condition"]["matchesPrefix"]]
    assert expiring == [p + dirs["TOMBSTONES_DIR"] + "/" for p in aborts]

    azure = {r["name"]: r["definition"]["filters"]["prefixMatch"]
             for r in json.loads((lifecycle / "azure-lifecycle-policy.json").read_text())["rules"]}
    for p in azure["aerostream-expire-tombstones"]:
        container, _, rest = p.partition("/")
        assert container and rest.endswith("/" + dirs["TOMBSTONES_DIR"] + "/")
    replaced = azure["aerostream-expire-replaced-versions"]
    tomb_root = azure["aerostream-expire-tombstones"][0][:-len(dirs["TOMBSTONES_DIR"] + "/")]
    assert sorted(replaced) == sorted(tomb_root + dirs[d] + "/" for d in ("TOPICS_DIR", "PACKS_DIR"))


def _checkov(*args):
    """checkov's JSON reports (one document per scanned folder, one after the other)."""
    out = subprocess.run([checkov(), "--compact", "-o", "json", "--skip-download", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    reports, decoder, pos, s = [], json.JSONDecoder(), 0, out.stdout
    try:
        while True:
            while pos < len(s) and s[pos].isspace():
                pos += 1
            if pos >= len(s):
                break
            doc, pos = decoder.raw_decode(s, pos)
            reports.extend(doc if isinstance(doc, list) else [doc])
    except json.JSONDecodeError:
        pytest.fail(f"checkov gave no JSON (exit {out.returncode}):\n{s[-3000:]}\n{out.stderr[-3000:]}")
    assert reports, f"checkov reported nothing (exit {out.returncode}): {out.stderr[-3000:]}"
    return reports


@pytest.fixture(scope="module")
def checkov_reports():
    # one folder per run: given several, checkov 3.3 scans the first twice and skips the others
    reports = []
    for folder in (TERRAFORM, BENCH_AWS):
        got = _checkov("-d", str(folder.relative_to(ROOT)), "--framework", "terraform",
                       "--download-external-modules", "false")
        assert sum(r.get("summary", {}).get("resource_count", 0) for r in got) > 0, f"checkov read nothing in {folder}"
        reports += got
    docker = _checkov("-f", "Dockerfile", "--framework", "dockerfile")
    assert [r.get("check_type") for r in docker] == ["dockerfile"]
    return reports + docker


def test_checkov_reports_no_failed_check(checkov_reports):
    failed, passed = [], 0
    for report in checkov_reports:
        results = report.get("results", {})
        passed += len(results.get("passed_checks", []))
        for c in results.get("failed_checks", []):
            failed.append(f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}")
    assert passed > 100, f"checkov passed only {passed} checks: did it read the files?"
    assert not failed, "checkov failed:\n" + "\n".join(failed)


def test_every_checkov_skip_says_why_next_to_it(checkov_reports):
    written = {}
    for path in tf_files() + [ROOT / "Dockerfile"]:
        for m in re.finditer(r"#\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?", path.read_text()):
            reason = (m.group(2) or "").strip()
            assert len(reason) >= 30, f"{path}: the skip of {m.group(1)} needs a reason ({reason!r})"
            written.setdefault(m.group(1), reason)
    skipped = {c["check_id"] for r in checkov_reports for c in r.get("results", {}).get("skipped_checks", [])}
    assert skipped <= set(written), f"checks skipped without a comment: {sorted(skipped - set(written))}"
    assert set(written) <= skipped, f"skip comments checkov did not use: {sorted(set(written) - skipped)}"


# --- the admin user: generated, kept in SSM, read by each agent at first boot ---

BOOT_SCRIPT = TERRAFORM / "boot" / "admin-credential.py.tftpl"


def test_the_admin_password_is_generated_and_kept_as_a_securestring():
    res = blocks(TERRAFORM, "resource")
    password = res[("random_password", "admin")]
    assert password["length"] >= 24
    # the password goes into a quoted line of an environment file and an HTTP Basic login
    assert password["special"] is False
    param = res[("aws_ssm_parameter", "admin_password")]
    assert text(param["type"]) == "SecureString"
    assert ref(param["value"]) == "random_password.admin.result"
    assert ref(param["key_id"]) == "aws_kms_key.secrets.arn"
    assert res[("aws_kms_key", "secrets")]["enable_key_rotation"] is True
    # the agents may read that parameter and nothing else of SSM, decrypting through SSM only
    policy = json.dumps(res[("aws_iam_role_policy", "agent_admin_password")]["policy"])
    assert "ssm:GetParameter" in policy and "aws_ssm_parameter.admin_password.arn" in policy
    assert "ssm:*" not in policy and "kms:ViaService" in policy
    outputs = {text(k): v for entry in load(TERRAFORM / "outputs.tf")["output"] for k, v in entries(entry).items()}
    assert ref(outputs["admin_password_parameter"]["value"]) == "aws_ssm_parameter.admin_password.name"
    assert outputs["admin_password"]["sensitive"] is True


def test_agents_reach_ssm_through_an_interface_endpoint_only():
    res = blocks(TERRAFORM, "resource")
    endpoint = res[("aws_vpc_endpoint", "ssm")]
    assert text(endpoint["vpc_endpoint_type"]) == "Interface" and endpoint["private_dns_enabled"] is True
    assert text(endpoint["service_name"]).endswith(".ssm")
    egress = [b for (t, _), b in res.items() if t == "aws_vpc_security_group_egress_rule"
              and ref(b["security_group_id"]) == "aws_security_group.agents.id"]
    assert egress and all("cidr_ipv4" not in b for b in egress), "the agents must get no egress to address ranges"
    assert any(ref(b.get("referenced_security_group_id", "")) == "aws_security_group.endpoints.id"
               and b["from_port"] == 443 for b in egress)


def test_each_agent_runs_the_first_boot_script_and_ansible_leaves_its_file_alone():
    agent = blocks(TERRAFORM, "resource")[("aws_instance", "agent")]
    call = text(agent["user_data"])
    m = re.fullmatch(r'\$\{templatefile\("\$\{path\.module\}/(boot/[^"]+)", \{(.*)\}\)\}', call)
    assert m, call
    assert TERRAFORM / m.group(1) == BOOT_SCRIPT
    given = set(re.findall(r"(\w+) = ", m.group(2)))
    used = set(re.findall(r"\$\{(\w+)\}", BOOT_SCRIPT.read_text()))
    assert given == used, f"templatefile gives {given}, the script uses {used}"
    assert "user_data" in one(agent["lifecycle"])["ignore_changes"], \
        "a changed first-boot script must not stop every agent at once"
    assert "${aws_vpc_endpoint.ssm}" in agent["depends_on"]
    inventory = text(entries(next(e for e in load(TERRAFORM / "outputs.tf")["output"]
                                  if '"ansible_inventory"' in e or "ansible_inventory" in e))
                     .get("ansible_inventory", {}).get("value", ""))
    assert 'aerostream_admin_password_source = "instance"' in inventory
    # the file the script writes is the one the role's unit requires
    unit = (ROOT / "ansible/roles/aerostream_agent/templates/aerostream.service.j2").read_text()
    target = re.search(r'TARGET = os\.environ\.get\("AEROSTREAM_ADMIN_ENV", "([^"]+)"\)', BOOT_SCRIPT.read_text())
    assert f"EnvironmentFile={target.group(1)}" in unit


class _FakeAws(http.server.BaseHTTPRequestHandler):
    """IMDSv2 and SSM's GetParameter, as much as the boot script uses; SSM
    checks the request's Signature Version 4 with botocore's signer, and
    refuses the first call (as while the role's policy settles)."""
    creds = {"AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "c2VjcmV0/+key", "Token": "session-token"}
    region, parameter, value = "eu-west-1", "/aerostream/admin-password", "Gen3rated0Password"
    calls = []

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="text/plain"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        self.calls.append(("PUT", self.path))
        ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        self.reply(200 if ok else 400, "imds-token")

    def do_GET(self):
        self.calls.append(("GET", self.path))
        if self.headers.get("X-aws-ec2-metadata-token") != "imds-token":
            return self.reply(401, "IMDSv2 token required")
        if self.path == "/latest/meta-data/iam/security-credentials/":
            return self.reply(200, "aerostream-agent")
        if self.path == "/latest/meta-data/iam/security-credentials/aerostream-agent":
            return self.reply(200, json.dumps(self.creds))
        self.reply(404, "")

    def do_POST(self):
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.calls.append(("POST", self.path))
        auth = self.headers.get("Authorization", "")
        m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/ssm/aws4_request, "
                         r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", auth)
        if not m or m.group(1) != self.creds["AccessKeyId"] or m.group(3) != self.region:
            return self.reply(403, f"bad Authorization: {auth}")
        signed = m.group(4).split(";")
        if not {"host", "x-amz-date", "x-amz-security-token", "x-amz-target"} <= set(signed):
            return self.reply(403, f"signs only {signed}")
        req = AWSRequest(method="POST", url=f"http://{self.headers['Host']}/", data=body,
                         headers={h: self.headers[h] for h in signed if h != "host"})
        req.context["timestamp"] = self.headers["X-Amz-Date"]
        signer = SigV4Auth(Credentials(self.creds["AccessKeyId"], self.creds["SecretAccessKey"],
                                       self.creds["Token"]), "ssm", self.region)
        canonical = signer.canonical_request(req)
        expected = signer.signature(signer.string_to_sign(req, canonical), req)
        if expected != m.group(5):
            return self.reply(403, "SignatureDoesNotMatch; botocore's canonical request:\n" + canonical)
        if self.headers["X-Amz-Target"] != "AmazonSSM.GetParameter":
            return self.reply(400, "wrong target")
        asked = json.loads(body)
        if asked != {"Name": self.parameter, "WithDecryption": True}:
            return self.reply(400, f"asked {asked}")
        if sum(1 for c in self.calls if c[0] == "POST") == 1:
            return self.reply(400, '{"__type": "AccessDeniedException"}', "application/x-amz-json-1.1")
        self.reply(200, json.dumps({"Parameter": {"Name": self.parameter, "Type": "SecureString",
                                                  "Value": self.value}}), "application/x-amz-json-1.1")


def test_the_first_boot_script_reads_the_parameter_with_a_valid_signature(tmp_path):
    fake = _FakeAws
    fake.calls = []
    rendered = BOOT_SCRIPT.read_text()
    for name, value in (("parameter", fake.parameter), ("region", fake.region), ("admin_user", "admin")):
        rendered = rendered.replace("${" + name + "}", value)
    assert "${" not in rendered and "%{" not in rendered, "a template sequence terraform would interpret"
    script = tmp_path / "boot.py"
    script.write_text(rendered)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), fake)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    target = tmp_path / "etc" / "aerostream" / "admin.env"
    env = dict(os.environ, AEROSTREAM_ADMIN_ENV=str(target), AEROSTREAM_IMDS_URL=url, AEROSTREAM_SSM_URL=url,
               AEROSTREAM_FETCH_DEADLINE_S="30")
    try:
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "retrying" in out.stderr, "the refused first call was not retried"
        assert target.read_text() == f"AEROSTREAM_ADMIN_USER='admin:{fake.value}'\n"
        assert os.stat(target).st_mode & 0o777 == 0o600
        assert fake.value not in out.stdout + out.stderr, "the password was printed"
        # a second boot leaves the file alone and asks nothing
        before = len(fake.calls)
        again = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and len(fake.calls) == before
    finally:
        server.shutdown()


def test_terraform_files_are_formatted():
    """`terraform fmt`, where terraform is installed (it needs no provider or network)."""
    terraform = shutil.which("terraform")
    if not terraform:
        pytest.skip("no terraform binary on PATH")
    out = subprocess.run([terraform, "fmt", "-check", "-recursive", "-list=true", str(TERRAFORM), str(BENCH_AWS)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, TF_CLI_CONFIG_FILE="/dev/null"))
    assert out.returncode == 0, f"not formatted: {out.stdout} {out.stderr[-2000:]}"


def test_terraform_validates_against_the_aws_provider():
    """`terraform validate` of terraform/, where terraform and a local mirror of
    the AWS provider are installed (nothing is downloaded: the mirror is
    AEROSTREAM_TF_PLUGIN_DIR, default /opt/tf-plugins). The mirror has no
    `random` provider, so in a copy its one resource becomes a fixed value."""
    terraform = shutil.which("terraform")
    mirror = os.environ.get("AEROSTREAM_TF_PLUGIN_DIR", "/opt/tf-plugins")
    if not terraform or not list(Path(mirror).glob("registry.terraform.io/hashicorp/aws/*/linux_amd64")):
        pytest.skip(f"no terraform, or no AWS provider under {mirror}")
    work = Path(tempfile.mkdtemp(prefix="aerostream-tf-"))
    try:
        copy = work / "terraform"
        shutil.copytree(TERRAFORM, copy, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"))
        versions = copy / "versions.tf"
        stripped = re.sub(r"\n    random = \{[^}]*\}", "", versions.read_text())
        assert stripped != versions.read_text(), "versions.tf no longer requires the random provider"
        versions.write_text(stripped)
        for tf in copy.glob("*.tf"):
            body = re.sub(r'resource "random_password" "admin" \{[^}]*\}',
                          'locals {\n  stub_password = "stub"\n}', tf.read_text())
            tf.write_text(body.replace("random_password.admin.result", "local.stub_password"))
        env = dict(os.environ, TF_CLI_CONFIG_FILE="/dev/null", TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1")
        init = subprocess.run([terraform, "init", "-backend=false", f"-plugin-dir={mirror}", "-input=false",
                               "-no-color"], cwd=copy, env=env, capture_output=True, text=True, timeout=300)
        assert init.returncode == 0, init.stdout[-3000:] + init.stderr[-3000:]
        out = subprocess.run([terraform, "validate", "-no-color"], cwd=copy, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
