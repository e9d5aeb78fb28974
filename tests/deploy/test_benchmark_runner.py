"""benchmarks/aws-ec2/run.sh without --yes: it prints the plan, the time
and the cost, and touches no cloud tool at all."""
import os
import re
import subprocess

import pytest

from conftest import BENCH_AWS

RUN = BENCH_AWS / "run.sh"


@pytest.fixture
def fake_tools(tmp_path):
    """terraform, aws and ssh that only record that they were called."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for name in ("terraform", "aws", "ssh", "scp"):
        p = bin_dir / name
        p.write_text(f"#!/bin/sh\necho {name} \"$@\" >> {calls}\nexit 0\n")
        p.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return env, calls


def run(env, *args):
    return subprocess.run(["bash", str(RUN), *args], env=env, capture_output=True, text=True, timeout=60)


def minutes(out):
    m = re.search(r"^Time:\s+about (\d+) min", out, re.M)
    assert m, out
    return int(m.group(1))


def test_without_yes_it_prints_the_plan_time_and_cost_and_creates_nothing(fake_tools):
    env, calls = fake_tools
    out = run(env)
    assert out.returncode == 0, out.stderr
    assert "Nothing was created" in out.stdout
    assert "c6id.2xlarge" in out.stdout
    for w in ("seed-100k", "seed-200k", "seed-max"):
        assert w in out.stdout
    assert re.search(r"^\s+destroy\s", out.stdout, re.M)
    cost = re.search(r"^Cost:\s+about \$(\d+\.\d\d) at \$([\d.]+) per instance-hour", out.stdout, re.M)
    assert cost and float(cost.group(1)) > 0, out.stdout
    assert not calls.exists(), f"called without --yes: {calls.read_text()}"


def test_the_estimate_follows_the_workloads_and_the_price(fake_tools):
    env, calls = fake_tools
    one = run(env, "seed-100k").stdout
    three = run(env).stdout
    assert minutes(one) < minutes(three)
    dearer = run(dict(env, PRICE_PER_HOUR="0.8064")).stdout
    cost = lambda out: float(re.search(r"^Cost:\s+about \$(\d+\.\d\d)", out, re.M).group(1))
    assert abs(cost(dearer) - 2 * cost(three)) <= 0.02
    assert not calls.exists()


def test_an_unknown_workload_is_refused_before_anything_happens(fake_tools):
    env, calls = fake_tools
    out = run(env, "--yes", "no-such-workload")
    assert out.returncode == 2 and "no workload no-such-workload" in out.stderr
    assert not calls.exists()
