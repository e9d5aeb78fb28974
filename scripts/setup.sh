#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian/Ubuntu machine:
# the Rust components, the Kafka clients the compatibility suite drives, and
# the object-storage servers the tiering tests run against. Safe to re-run:
# it only installs what is missing. With --build-only it installs just what
# building the broker needs (scripts/run.sh uses that).
set -euo pipefail
BUILD_ONLY=false
[ "${1:-}" = "--build-only" ] && BUILD_ONLY=true
cd "$(dirname "$0")/.."

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# --- system packages -------------------------------------------------------
if $BUILD_ONLY; then
  APT_PACKAGES=(gcc g++ make pkg-config curl ca-certificates)
else
  # haproxy: the load balancer in front of three agents in the client
  # suites, of which two run side by side (40-clients.sh, 44-clients-beside.sh)
  APT_PACKAGES=(kcat haproxy python3-pip python3-venv xfsprogs nodejs npm openjdk-17-jdk-headless maven postgresql gcc g++ make pkg-config curl ca-certificates)
fi
missing=()
for p in "${APT_PACKAGES[@]}"; do
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm) command -v npm >/dev/null 2>&1 && continue ;;
    # the Java client's suite (tests/java/): any JDK 17 or newer will do
    openjdk-17-jdk-headless) command -v javac >/dev/null 2>&1 && continue ;;
    maven) command -v mvn >/dev/null 2>&1 && continue ;;
    # the Connect engine's PostgreSQL connector tests start their own server
    postgresql) compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && continue ;;
    python3-pip) python3 -m pip --version >/dev/null 2>&1 && continue ;;
    python3-venv) python3 -c 'import venv' >/dev/null 2>&1 && continue ;;
    haproxy) { command -v haproxy || [ -x /usr/sbin/haproxy ]; } >/dev/null 2>&1 && continue ;;
  esac
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Rust ------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  log "no Rust toolchain: installing stable with rustup (https://rustup.rs)"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if command -v rustup >/dev/null 2>&1; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
  done
fi

if $BUILD_ONLY; then
  log "done"
  exit 0
fi

# --- Python clients and servers -------------------------------------------
log "pip install -r tests/requirements.txt"
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r tests/requirements.txt

# --- Node clients and servers ----------------------------------------------
log "npm install (tests/js)"
(cd tests/js && npm install --no-audit --no-fund --loglevel=error >/dev/null)

log "done"
