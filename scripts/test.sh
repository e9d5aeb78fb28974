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
# The shared target directory keeps every old build of the workspace's
# crates (a new hash per Cargo.lock or feature change); drop stale ones.
step "prune stale builds" scripts/ci/prune-target.py
# Test builds carry the object-store fault injector (the tiering fault tests
# drive it through the real binary); release builds never do.
FEATURES=(--features agent/fault-injection)
step "cargo fmt --check" cargo fmt --all --check
step "no import cycles between files" scripts/check-import-cycles.py agent gateway dataplane security storage metastore cache sdk lifecycle loadtest registry connect processor kafka-client
step "cargo clippy" cargo clippy --workspace --all-targets --locked "${FEATURES[@]}" -- -D warnings
step "cargo clippy (release features)" cargo clippy -p agent --locked -- -D warnings
step "cargo clippy (agent without the AWS SDK)" cargo clippy -p agent --locked --no-default-features -- -D warnings
step "cargo doc (broken links are errors)" cargo doc --workspace --no-deps --locked
# Everything the tests run, built once up front: every crate's tests and
# the `aerostream` binary (the very build the suites' own `cargo build`
# lines then find fresh) and the SDK's examples, so the suites in the
# background start before the crates' tests run (cargo holds its build
# lock while it compiles, not while tests run).
build_all() {
  cargo test --workspace --locked "${FEATURES[@]}" --no-run
  cargo build -p sdk --examples --locked
}
step "cargo build (tests, binaries, examples)" build_all

# Suites that share nothing with the others run in the background beside
# the crates' tests and the foreground suites: the fuzz targets' instrumented build and their time-bounded runs, at
# the lowest priority, so the build takes the CPU the server suites leave
# idle while they wait on servers and clients; the offline checks of the
# deployment files (which mostly wait on pip and checkov); and the client
# suites that mostly wait on brokers (44-clients-beside.sh; and one after
# the other, as each starts JVMs: 46-sdk-java.sh, the Java SDK of the native
# protocol against the corpus, agents and kcat, 46-java.sh,
# the Java client and Kafka Streams, 47-go.sh, franz-go and sarama,
# 48-connect.sh, Kafka Connect and MirrorMaker 2, 49-compat.sh, the client
# compatibility matrix); after the deployment checks, 62-connect-engine.sh,
# the built-in Connect engine against moto, PostgreSQL and the schema
# registry. Each writes a log of its own, printed when it is waited for.
bg_names=(); bg_pids=(); bg_logs=(); bg_starts=()
background() { # background NAME NICENESS SCRIPT...
  local name=$1 niceness=$2; shift 2
  local log; log=$(mktemp "${TMPDIR:-/tmp}/aerostream-bg.XXXXXX")
  # job control gives the job a process group of its own, so a failure in
  # the foreground can stop it with everything it started
  set -m
  # every script of a job runs even after one failed, so one run names
  # every failure; the job fails if any script did
  (
    rc=0
    for s in "$@"; do
      echo "==> $s"
      t0=$(date +%s)
      if nice -n "$niceness" "$s"; then
        echo "<== $s ($(( $(date +%s) - t0 ))s)"
      else
        rc=1
        echo "<== $s FAILED ($(( $(date +%s) - t0 ))s)"
      fi
    done
    date +%s >"$log.end"
    exit "$rc"
  ) >"$log" 2>&1 &
  set +m
  bg_names+=("$name"); bg_pids+=("$!"); bg_logs+=("$log"); bg_starts+=("$(date +%s)")
  echo "$name: in the background (pid $!, log $log)"
}
# a failing foreground step ends the script: take the background jobs with it
trap 'for p in "${bg_pids[@]}"; do kill -- -"$p" 2>/dev/null; done; true' EXIT

background "fuzz build and runs" 19 scripts/ci/fuzz-build.sh scripts/ci/[0-9]*-fuzz.sh
background "scripts/ci/50-deploy.sh, 62-connect-engine.sh" 0 scripts/ci/50-deploy.sh \
  scripts/ci/62-connect-engine.sh
background "scripts/ci/44-clients-beside.sh" 0 scripts/ci/44-clients-beside.sh
background "scripts/ci/46-sdk-java.sh, 46-java.sh, 47-go.sh, 48-connect.sh, 49-compat.sh" 0 \
  scripts/ci/46-sdk-java.sh scripts/ci/46-java.sh scripts/ci/47-go.sh scripts/ci/48-connect.sh scripts/ci/49-compat.sh

step "cargo test" cargo test --workspace --locked "${FEATURES[@]}"

for s in scripts/ci/[0-9]*.sh; do
  [ -e "$s" ] || continue
  case "$s" in *-fuzz.sh|*/50-deploy.sh|*/44-clients-beside.sh|*/46-sdk-java.sh|*/46-java.sh|*/47-go.sh|*/48-connect.sh|*/49-compat.sh|*/62-connect-engine.sh) continue ;; esac
  step "$s" "$s"
done

failed=""
for i in "${!bg_pids[@]}"; do
  printf '\n\033[1m==> %s (background)\033[0m\n' "${bg_names[$i]}"
  rc=0
  wait "${bg_pids[$i]}" || rc=$?
  cat "${bg_logs[$i]}"
  ended=$(cat "${bg_logs[$i]}.end" 2>/dev/null || date +%s)
  rm -f "${bg_logs[$i]}" "${bg_logs[$i]}.end"
  names+=("${bg_names[$i]} (background, started at $(( bg_starts[i] - started ))s)")
  seconds+=("$(( ended - bg_starts[i] ))")
  if [ "$rc" -ne 0 ]; then
    failed="$failed ${bg_names[$i]} (exit $rc)"
  fi
done
trap - EXIT

table
if [ -n "$failed" ]; then
  echo "failed in the background:$failed" >&2
  exit 1
fi
printf '\nall tests passed in %ss\n' "$(( $(date +%s) - started ))"
