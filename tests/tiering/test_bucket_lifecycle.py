"""`aerostream bucket check` and the start-up lifecycle check against moto's
real S3 server: the rules AeroStream relies on (abort incomplete multipart
uploads, expire PREFIX/tombstones/) are reported missing or wrong, `--apply`
installs them beside the user's own rules, and `serve` warns until they are
there."""

import json
import os
import re
import subprocess

import pytest

import servers
from harness import Broker, binary, wait_until

BUCKET = "lifecycle"
URL = f"s3://{BUCKET}/cluster-1"
ABORT_ID = "aerostream-abort-incomplete-multipart-uploads"
TOMBSTONE_ID = "aerostream-expire-tombstones"
USER_RULE = {
    "ID": "expire-exports",
    "Status": "Enabled",
    "Filter": {"Prefix": "exports/"},
    "Expiration": {"Days": 30},
}


@pytest.fixture(scope="module")
def moto_server():
    s = servers.moto()
    yield s
    s.cleanup()


@pytest.fixture
def bucket(moto_server, request):
    """A fresh bucket per test (moto keeps buckets for the server's lifetime)."""
    name = f"{BUCKET}-{request.node.name.replace('_', '-')[:40]}".lower()
    servers.create_bucket(moto_server, name)
    return name


def check(server, url, *extra, env=None):
    proc = subprocess.run([binary(), "bucket", "check", "--object-store", url, *extra],
                          env={**os.environ, **servers.s3_env(server), **(env or {})},
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def rules(server, bucket):
    return servers.s3_client(server).get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]


def put_rules(server, bucket, rules):
    servers.s3_client(server).put_bucket_lifecycle_configuration(
        Bucket=bucket, LifecycleConfiguration={"Rules": rules})


def test_a_fresh_bucket_misses_both_rules(moto_server, bucket):
    code, out = check(moto_server, f"s3://{bucket}/cluster-1")
    assert code == 1, out
    assert "MISSING  abort incomplete multipart uploads under cluster-1/" in out, out
    assert "MISSING  expire deleted objects under cluster-1/tombstones/" in out, out
    assert "--apply" in out


def test_apply_installs_the_rules_and_keeps_the_users_rule(moto_server, bucket):
    put_rules(moto_server, bucket, [USER_RULE])
    url = f"s3://{bucket}/cluster-1"
    code, out = check(moto_server, url, "--apply")
    assert code == 0, out
    assert f'added    rule "{ABORT_ID}"' in out and f'added    rule "{TOMBSTONE_ID}"' in out, out

    by_id = {r["ID"]: r for r in rules(moto_server, bucket)}
    assert set(by_id) == {USER_RULE["ID"], ABORT_ID, TOMBSTONE_ID}
    assert by_id[USER_RULE["ID"]] == USER_RULE, "the user's rule was changed"
    assert by_id[ABORT_ID]["Filter"] == {"Prefix": "cluster-1/"}
    assert by_id[ABORT_ID]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 2}
    assert by_id[TOMBSTONE_ID]["Filter"] == {"Prefix": "cluster-1/tombstones/"}
    assert by_id[TOMBSTONE_ID]["Expiration"]["Days"] == 7

    code, out = check(moto_server, url)
    assert code == 0, out
    assert "MISSING" not in out and "WRONG" not in out, out
    # a second --apply has nothing to do
    code, out = check(moto_server, url, "--apply")
    assert code == 0 and "added" not in out, out


def test_a_tombstone_rule_with_the_wrong_prefix_is_reported(moto_server, bucket):
    put_rules(moto_server, bucket, [
        {"ID": ABORT_ID, "Status": "Enabled", "Filter": {"Prefix": ""},
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}},
        {"ID": TOMBSTONE_ID, "Status": "Enabled", "Filter": {"Prefix": "cluster-1/deleted/"},
         "Expiration": {"Days": 7}},
    ])
    code, out = check(moto_server, f"s3://{bucket}/cluster-1")
    assert code == 1, out
    assert f"ok       abort incomplete multipart uploads under cluster-1/: rule \"{ABORT_ID}\"" in out, out
    assert ("WRONG    expire deleted objects under cluster-1/tombstones/: rule \"aerostream-expire-tombstones\": "
            "its prefix cluster-1/deleted/ differs from the tombstone prefix cluster-1/tombstones/") in out, out


def test_a_missing_bucket_and_an_unsupported_store_are_plain_errors(moto_server):
    code, out = check(moto_server, "s3://no-such-bucket/cluster-1")
    assert code == 2, out
    assert "bucket no-such-bucket does not exist" in out, out

    for url in ("gs://segments/cluster-1", "az://segments/cluster-1"):
        code, out = check(moto_server, url)
        assert code == 3, out
        assert "cannot check lifecycle rules" in out and "terraform/lifecycle/" in out, out


def test_serve_warns_at_start_until_the_rules_are_applied(moto_server, bucket):
    url = f"s3://{bucket}/cluster-1"
    broker = Broker(url, servers.s3_env(moto_server), ["--object-store-tombstones", "true"])
    try:
        broker.start()
        wait_until("the start-up check warned about both rules",
                   lambda: broker.log().count("bucket lifecycle rule missing") >= 2, timeout=60)
        log = broker.log()
        assert "abort incomplete multipart uploads under cluster-1/" in log
        assert "expire deleted objects under cluster-1/tombstones/" in log
        assert f"aerostream bucket check --object-store {url} --apply" in log
        assert broker.stop() == 0

        code, out = check(moto_server, url, "--apply")
        assert code == 0, out

        seen = len(broker.log())
        broker.start()
        wait_until("the start-up check found the rules",
                   lambda: "has the lifecycle rules AeroStream relies on" in broker.log()[seen:], timeout=60)
        assert "bucket lifecycle rule missing" not in broker.log()[seen:]
        assert broker.stop() == 0
    finally:
        broker.cleanup()


@pytest.fixture(scope="module")
def agent_keys_without_lifecycle():
    """moto enforcing IAM, and keys whose policy covers objects but not the
    bucket's lifecycle configuration (as the AWS deployment's agent role)."""
    # moto lets this many requests through unauthenticated: the set-up below
    server = servers.moto(env={"INITIAL_NO_AUTH_ACTION_COUNT": "4"})
    try:
        servers.create_bucket(server, "restricted")
        import boto3
        iam = boto3.client("iam", endpoint_url=server.endpoint, aws_access_key_id="test",
                           aws_secret_access_key="test", region_name="us-east-1")
        iam.create_user(UserName="agent")
        key = iam.create_access_key(UserName="agent")["AccessKey"]
        iam.put_user_policy(UserName="agent", PolicyName="objects", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Resource": "*", "Action": [
                "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket",
                "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]}]}))
        env = dict(servers.s3_env(server), AWS_ACCESS_KEY_ID=key["AccessKeyId"],
                   AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"])
        yield server, env
    finally:
        server.cleanup()


def test_without_permission_check_says_access_denied_and_serve_stays_quiet(agent_keys_without_lifecycle):
    server, env = agent_keys_without_lifecycle
    url = "s3://restricted/cluster-1"
    code, out = check(server, url, env=env)
    assert code == 2, out
    assert "access denied" in out and "s3:GetLifecycleConfiguration" in out, out

    broker = Broker(url, env)
    try:
        broker.start()
        wait_until("the start-up check gave up for lack of permission",
                   lambda: "bucket lifecycle rules not checked: access denied" in broker.log(), timeout=60)
        plain = re.sub(r"\x1b\[[0-9;]*m", "", broker.log())
        lines = [line for line in plain.splitlines() if "lifecycle" in line]
        assert len(lines) == 1 and " INFO " in lines[0], lines
        assert broker.stop() == 0
    finally:
        broker.cleanup()
