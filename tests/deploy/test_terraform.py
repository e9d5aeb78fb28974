"""terraform/ (and the benchmark's main.tf) checked without a terraform
binary or a cloud account: a real HCL parser reads every file, checkov
finds no failed check, and what the load balancer, the security groups and
the lifecycle rules name is what the code does."""
import json
import os
import re
import subprocess

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


def test_the_command_line_lifecycle_files_match_the_key_layout_in_cache():
    dirs = layout_dirs()
    lifecycle = TERRAFORM / "lifecycle"
    s3 = json.loads((lifecycle / "s3-lifecycle.json").read_text())["Rules"]
    by_id = {r["ID"]: r["Filter"]["Prefix"] for r in s3}
    root = by_id["aerostream-abort-incomplete-multipart-uploads"]
    assert root.endswith("/")
    assert by_id["aerostream-expire-tombstones"] == root + dirs["TOMBSTONES_DIR"] + "/"
    assert by_id["aerostream-expire-replaced-versions"] == root + dirs["TOPICS_DIR"] + "/"

    gcs = json.loads((lifecycle / "gcs-lifecycle.json").read_text())["rule"]
    aborts = [p for r in gcs if r["action"]["type"] == "AbortIncompleteMultipartUpload"
              for p in r["condition"]["matchesPrefix"]]
    expiring = [p for r in gcs if r["action"]["type"] == "Delete" and "age" in r["condition"]
                for p in r["condition"]["matchesPrefix"]]
    assert expiring == [p + dirs["TOMBSTONES_DIR"] + "/" for p in aborts]

    azure = json.loads((lifecycle / "azure-lifecycle-policy.json").read_text())["rules"]
    for p in azure[0]["definition"]["filters"]["prefixMatch"]:
        container, _, rest = p.partition("/")
        assert container and rest.endswith("/" + dirs["TOMBSTONES_DIR"] + "/")


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
