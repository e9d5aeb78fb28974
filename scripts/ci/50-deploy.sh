#!/usr/bin/env bash
# Deployment files checked offline, with no cloud account (where terraform
# is installed: terraform fmt, and terraform validate against a local mirror
# of the AWS provider when there is one): every .tf parses with an HCL parser,
# checkov finds no failed check, the load balancer's ports are the binary's
# defaults and the bucket's lifecycle prefixes are the cache crate's key
# layout; the admin password is an SSM SecureString the agents' first-boot
# script fetches with a signature botocore agrees with; ansible-lint
# (production profile) and --syntax-check on every playbook; site.yml
# applied to this machine under a temporary root (it formats a disk image
# with xfs, and the real binary starts with the configuration it writes:
# Kafka over TLS, logins on Kafka, native and HTTP); the Dockerfile builds
# with run.sh's steps, and its start script, run with the real binary,
# refuses 0.0.0.0 without logins and otherwise serves TLS and SCRAM; the
# AWS benchmark runner creates nothing without --yes.
# Needs: python3-venv, xfsprogs, systemd-analyze, openssl (apt); the pins of
# tests/deploy/requirements*.txt, installed here into virtual environments of
# their own (kept between runs).
# Bounded: about 2-4 minutes once the packages are installed (installing
# them the first time takes a minute or two more).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started ))s"; }

# two virtual environments, kept between runs: the tests' tools, and checkov
# (whose own HCL parser fork would replace python-hcl2 in the same one)
venvs="${AEROSTREAM_DEPLOY_VENVS:-$HOME/.cache/aerostream/deploy-venvs}"
install() { # install VENV REQUIREMENTS
    local venv=$1 req=$2
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    if ! cmp -s "$req" "$venv/.aerostream-requirements"; then
        echo "== pip install -r $req (into $venv)"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
        cp "$req" "$venv/.aerostream-requirements"
    fi
}
install "$venvs/tests" tests/deploy/requirements.txt
install "$venvs/checkov" tests/deploy/requirements-checkov.txt
export AEROSTREAM_CHECKOV="$venvs/checkov/bin/checkov"
venv="$venvs/tests"
echo "== deploy tools ready after $(elapsed)"

# the disk role formats an image with mkfs.xfs; the unit checks use systemd-escape and systemd-analyze
missing=()
command -v mkfs.xfs >/dev/null || [ -x /usr/sbin/mkfs.xfs ] || [ -x /sbin/mkfs.xfs ] || missing+=(xfsprogs)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian's ${missing[*]} for the ansible and container checks" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
export PATH="$PATH:/usr/sbin:/sbin"

# the binary the rest of the suite builds (scripts/ci/40-clients.sh): a no-op there
cargo build -p agent --bin aerostream --features fault-injection
export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
echo "== binary ready after $(elapsed)"

timeout 900 "$venv/bin/python" -m pytest tests/deploy -q -p no:warnings -p no:cacheprovider
echo "== deploy checks passed in $(elapsed)"
