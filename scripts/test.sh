#!/usr/bin/env bash
# The whole AeroStream test suite, exactly as CI runs it: installs what it
# needs, checks formatting and lints, runs every crate's tests, then the
# real-client, object-storage and load-generator suites against the real
# `aerostream` binary, and ends with a table of each step's seconds.
#
# Budget on a 2-core machine: 40 minutes from an empty target directory,
# 20 with a warm one. To fit, every step shares one target directory (kept
# outside the clone, so a fresh clone starts warm), the instrumented fuzz
# build runs once for all fuzz targets, and it and the time-bounded fuzz
# runs go on in the background, at the lowest priority, while the suites
# that mostly wait on servers and clients run in the foreground.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/aerostream/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
mkdir -p "$CARGO_TARGET_DIR"

started=$(date +%s)
names=()
seconds=()
step() {
  local name="$1"; shift
  local t0; t0=$(date +%s)
  printf '\n\033[1m==> %s\033[0m\n' "$name"
  "$@"
  names+=("$name")
  seconds+=("$(( $(date +%s) - t0 ))")
  printf '\033[1m<== %s (%ss)\033[0m\n' "$name" "${seconds[-1]}"
}
table() {
  printf '\n%-58s %8s\n' "step" "seconds"
  local i
  for i in "${!names[@]}"; do
    printf '%-58s %8s\n' "${names[$i]}" "${seconds[$i]}"
  done
  printf '%-58s %8s\n' "total" "$(( $(date +%s) - started ))"
}

step "setup" scripts/setup.sh
# setup.sh may just have installed Rust under ~/.cargo.
if ! command -v cargo >/dev/null 2>&1; then export PATH="$HOME/.cargo/bin:$PATH"; fi
# Test builds carry the object-store fault injector (the tiering fault tests
# drive it through the real binary); release builds never do.
FEATURES=(--features agent/fault-injection)
step "cargo fmt --check" cargo fmt --all --check
step "no import cycles between files" scripts/check-import-cycles.py agent gateway dataplane security storage metastore cache sdk lifecycle loadtest
step "cargo clippy" cargo clippy --workspace --all-targets --locked "${FEATURES[@]}" -- -D warnings
step "cargo clippy (release features)" cargo clippy -p agent --locked -- -D warnings
step "cargo clippy (agent without the AWS SDK)" cargo clippy -p agent --locked --no-default-features -- -D warnings
step "cargo doc (broken links are errors)" cargo doc --workspace --no-deps --locked
step "cargo test" cargo test --workspace --locked "${FEATURES[@]}"

# The fuzz targets' instrumented build and their time-bounded runs go on in
# the background at the lowest priority, beside the suites below, which
# mostly wait on servers and clients: the build takes the CPU they leave
# idle, and the runs are bounded by time, not by work.
fuzz_log=$(mktemp "${TMPDIR:-/tmp}/aerostream-fuzz.XXXXXX")
fuzz_t0=$(date +%s)
(
  set -e
  for s in scripts/ci/fuzz-build.sh scripts/ci/[0-9]*-fuzz.sh; do
    echo "==> $s"
    t0=$(date +%s)
    nice -n 19 "$s"
    echo "<== $s ($(( $(date +%s) - t0 ))s)"
  done
) >"$fuzz_log" 2>&1 &
fuzz_pid=$!
# a failing foreground step ends the script: take the fuzz runs with it
trap 'kill -- -"$fuzz_pid" 2>/dev/null || kill "$fuzz_pid" 2>/dev/null || true' EXIT
echo "fuzz runs in the background (pid $fuzz_pid, log $fuzz_log)"

for s in scripts/ci/[0-9]*.sh; do
  [ -e "$s" ] || continue
  case "$s" in *-fuzz.sh) continue ;; esac
  step "$s" "$s"
done

printf '\n\033[1m==> fuzz build and runs (background)\033[0m\n'
fuzz_rc=0
wait "$fuzz_pid" || fuzz_rc=$?
trap - EXIT
cat "$fuzz_log"
rm -f "$fuzz_log"
names+=("fuzz build and runs, in the background from $(( fuzz_t0 - started ))s")
seconds+=("$(( $(date +%s) - fuzz_t0 ))")
if [ "$fuzz_rc" -ne 0 ]; then
  table
  echo "the fuzz runs failed (exit $fuzz_rc)" >&2
  exit "$fuzz_rc"
fi

table
printf '\nall tests passed in %ss\n' "$(( $(date +%s) - started ))"
