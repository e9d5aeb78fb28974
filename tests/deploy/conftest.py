"""What the deployment checks share: the repository's paths, the facts they
compare against, read from the code itself (default ports from the agent's
settings, the object key layout from the cache crate, the keys the TOML
file accepts), and the tools of this virtual environment."""
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM = ROOT / "terraform"
ANSIBLE = ROOT / "ansible"
BENCH_AWS = ROOT / "benchmarks" / "aws-ec2"
CONFIG_DIR = ROOT / "agent" / "src" / "config"
LAYOUT_RS = ROOT / "cache" / "src" / "layout.rs"


def tool(name):
    """A command installed next to this interpreter (the virtual environment)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable}: "
                    "run scripts/ci/50-deploy.sh, which installs tests/deploy/requirements.txt")
    return str(path)


def tf_files():
    """Every Terraform file of the repository."""
    return sorted(p for d in (TERRAFORM, BENCH_AWS) for p in d.rglob("*.tf")
                  if ".terraform" not in p.parts)


def config_source():
    """Every file of the agent's settings module, as one text: what the checks
    read does not depend on which of its files holds it."""
    return "\n".join(p.read_text() for p in sorted(CONFIG_DIR.glob("*.rs")))


def _default_port(source, pattern, what):
    m = re.search(pattern, source, re.S)
    if not m:
        pytest.fail(f"cannot find the default {what} in {CONFIG_DIR}: "
                    "the pattern this test reads no longer matches the code")
    return int(m.group(1))


def rust_default_ports():
    """The ports `aerostream serve` binds when given no address, as the code has them."""
    src = config_source()
    addr = r"SocketAddr::from\(\(\[[0-9, ]+\],\s*(\d+)\)\)"
    ports = {
        name: _default_port(src, rf"\.or\(file\.{name}_addr\)\s*\.unwrap_or_else\(\|\|\s*{addr}\)",
                            f"{name} address")
        for name in ("kafka", "native", "http")
    }
    ports["cluster"] = _default_port(
        src, rf"let cluster_addr = cluster_addr\.unwrap_or_else\(\|\|\s*{addr}\)", "cluster address")
    return ports


def layout_dirs():
    """TOPICS_DIR, TOMBSTONES_DIR and PACKS_DIR of the cache crate's key layout."""
    out = {}
    for path, const in ((LAYOUT_RS, "TOPICS_DIR"), (LAYOUT_RS, "TOMBSTONES_DIR"), (LAYOUT_RS, "PACKS_DIR")):
        m = re.search(rf'pub const {const}: &str = "([^"]+)";', path.read_text())
        if not m:
            pytest.fail(f"{path} no longer defines {const}")
        out[const] = m.group(1)
    return out


def config_file_keys():
    """The keys the agent's TOML file accepts (FileSettings; unknown keys are an error)."""
    src = config_source()
    m = re.search(r"struct FileSettings \{(.*?)\n\}", src, re.S)
    if not m:
        pytest.fail(f"cannot find struct FileSettings in {CONFIG_DIR}")
    return set(re.findall(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?([a-z_]+):", m.group(1), re.M))


@pytest.fixture(scope="session")
def aerostream_bin():
    path = os.environ.get("AEROSTREAM_BIN")
    if not path or not Path(path).exists():
        pytest.fail("AEROSTREAM_BIN must name the built binary (scripts/ci/50-deploy.sh builds it)")
    return path
