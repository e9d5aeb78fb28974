"""librdkafka's own test programs (tests/test-runner of its source) run
against AeroStream. The source comes from the npm package node-rdkafka,
which bundles librdkafka with its tests (npm is reachable where GitHub may
not be); it is unpacked and built once under ~/.cache/aerostream/librdkafka
(scripts/librdkafka-tests.sh builds it; the tests here skip while it is
absent).

    run(bootstrap, "0103") -> (passed, tail of the output)
"""

import os
import subprocess
import tempfile

NODE_RDKAFKA = "3.6.1"  # bundles librdkafka 2.12.0
HOME = os.path.join(os.path.expanduser("~"), ".cache", "aerostream", "librdkafka")
SOURCE = os.path.join(HOME, f"node-rdkafka-{NODE_RDKAFKA}", "librdkafka")


def runner():
    """The built test-runner, or None."""
    path = os.path.join(SOURCE, "tests", "test-runner")
    return path if os.access(path, os.X_OK) else None


def run(bootstrap, test, timeout=900, kafka_version="4.0.0"):
    """Runs librdkafka test `test` (e.g. "0103") against `bootstrap`;
    returns (passed, the last lines of its output)."""
    tests_dir = os.path.join(SOURCE, "tests")
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as conf:
        conf.write(f"metadata.broker.list={bootstrap}\n")
        conf.write("test.topic.random=true\n")
    env = dict(os.environ,
               TESTS=test,
               TEST_KAFKA_VERSION=kafka_version,
               RDKAFKA_TEST_CONF=conf.name,
               LD_LIBRARY_PATH=f"{os.path.join(SOURCE, 'src')}:{os.path.join(SOURCE, 'src-cpp')}")
    try:
        p = subprocess.run(["./test-runner"], cwd=tests_dir, env=env,
                           capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(conf.name)
    out = p.stdout + p.stderr
    tail = "\n".join(line for line in out.splitlines()[-60:])
    passed = p.returncode == 0 and "ALL TESTS PASSED" in out and "TEST FAILURE" not in out
    return passed, tail
