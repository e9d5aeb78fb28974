"""The Dockerfile builds the binary with the steps scripts/run.sh runs (which
the suite and the README exercise; no container runtime runs here), and
the image serves on the binary's default ports with data in a volume."""
import re

from conftest import ROOT, rust_default_ports


def instructions():
    """(instruction, argument) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def run_sh_build_steps():
    """The commands of scripts/run.sh that build the binary (before it execs the server)."""
    steps = []
    for line in (ROOT / "scripts" / "run.sh").read_text().splitlines():
        line = line.strip()
        if line.startswith("scripts/setup.sh") or line.startswith("cargo build"):
            steps.append(" ".join(line.split()))
    assert len(steps) == 2, f"scripts/run.sh changed shape: {steps}"
    return steps


def test_the_build_stage_runs_the_build_steps_of_run_sh():
    ins = instructions()
    stages = [i for i, (word, _) in enumerate(ins) if word == "FROM"]
    assert len(stages) >= 2, "the image must be multi-stage (build, then a runtime without the toolchain)"
    build = ins[stages[0]:stages[1]]
    commands = [c.strip() for word, arg in build if word == "RUN" for c in arg.split("&&")]
    steps = run_sh_build_steps()
    assert commands[:len(steps)] == steps, f"build stage runs {commands}, scripts/run.sh runs {steps}"


def test_the_image_serves_on_the_default_ports_with_data_in_a_volume():
    ins = instructions()
    runtime = ins[[i for i, (w, _) in enumerate(ins) if w == "FROM"][-1]:]
    ports = rust_default_ports()
    exposed = set(" ".join(a for w, a in runtime if w == "EXPOSE").split())
    assert {f"{ports['kafka']}/tcp", f"{ports['native']}/tcp", f"{ports['native']}/udp",
            f"{ports['http']}/tcp"} <= exposed
    env = dict(re.findall(r"(AEROSTREAM_[A-Z_]+)=(\S+)", " ".join(a for w, a in runtime if w == "ENV")))
    assert env["AEROSTREAM_KAFKA_ADDR"] == f"0.0.0.0:{ports['kafka']}"
    assert env["AEROSTREAM_NATIVE_ADDR"] == f"0.0.0.0:{ports['native']}"
    assert env["AEROSTREAM_HTTP_ADDR"] == f"0.0.0.0:{ports['http']}"
    volumes = " ".join(a for w, a in runtime if w == "VOLUME")
    assert env["AEROSTREAM_DATA_DIR"] in volumes
    assert any(w == "USER" and a != "root" for w, a in runtime), "the agent must not run as root"
    entry = " ".join(a for w, a in runtime if w in ("ENTRYPOINT", "CMD"))
    assert "aerostream" in entry and "serve" in entry
