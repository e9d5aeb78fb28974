#!/usr/bin/env bash
# The whole AeroStream test suite, exactly as CI runs it: installs what it
# needs, checks formatting and lints, runs every crate's tests, then the
# real-client, object-storage and load-generator suites against the real
# `aerostream` binary.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/aerostream/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
mkdir -p "$CARGO_TARGET_DIR"

started=$(date +%s)
step() {
  local name="$1"; shift
  local t0; t0=$(date +%s)
  printf '\n\033[1m==> %s\033[0m\n' "$name"
  "$@"
  printf '\033[1m<== %s (%ss)\033[0m\n' "$name" "$(( $(date +%s) - t0 ))"
}

step "setup" scripts/setup.sh
# setup.sh may just have installed Rust under ~/.cargo.
if ! command -v cargo >/dev/null 2>&1; then export PATH="$HOME/.cargo/bin:$PATH"; fi
# Test builds carry the object-store fault injector (the tiering fault tests
# drive it through the real binary); release builds never do.
FEATURES=(--features agent/fault-injection)
step "cargo fmt --check" cargo fmt --all --check
step "no import cycles between files" scripts/check-import-cycles.py agent gateway dataplane storage metastore cache sdk lifecycle loadtest
step "cargo clippy" cargo clippy --workspace --all-targets --locked "${FEATURES[@]}" -- -D warnings
step "cargo clippy (release features)" cargo clippy -p agent --locked -- -D warnings
step "cargo clippy (agent without the AWS SDK)" cargo clippy -p agent --locked --no-default-features -- -D warnings
step "cargo doc (broken links are errors)" cargo doc --workspace --no-deps --locked
step "cargo test" cargo test --workspace --locked "${FEATURES[@]}"
for s in scripts/ci/[0-9]*.sh; do
  [ -e "$s" ] || continue
  step "$s" "$s"
done

printf '\nall tests passed in %ss\n' "$(( $(date +%s) - started ))"
