# Shared by the fuzz steps (sourced): one instrumented build for every
# target, kept apart from the workspace build, with the same flags when it is
# built (fuzz-build.sh) and when each target runs (20-storage-fuzz.sh,
# 41-gateway-fuzz.sh), so the runs never rebuild.
#
# --dev: no optimisation. The runs are bounded by time, so an unoptimised
# build only means fewer executions per second, while an optimised build of
# the whole dependency tree with coverage instrumentation costs the suite
# several minutes on 2 cores. Debug assertions and overflow checks stay on.
# cargo-fuzz needs nightly-only compiler flags; on a stable toolchain
# RUSTC_BOOTSTRAP=1 enables them for the fuzz builds only.
FUZZ_BUILD_FLAGS=(--fuzz-dir fuzz --dev)

fuzz_env() {
    if ! command -v cargo-fuzz >/dev/null 2>&1; then
        echo "== installing cargo-fuzz (one-off, a few minutes)"
        cargo install cargo-fuzz --locked
    fi
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/fuzz"
    export RUSTC_BOOTSTRAP=1
}

fuzz_env_done() {
    unset RUSTC_BOOTSTRAP
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR%/fuzz}"
}
