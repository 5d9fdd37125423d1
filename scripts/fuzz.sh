#!/usr/bin/env bash
# Run cargo-fuzz targets under fuzz/ for SECONDS each (default 60), starting from the seed
# corpus in fuzz/seeds/<target>/ (never modified) and a working corpus under
# fuzz/corpus/<target>/. With target names after SECONDS, only those run; else every target.
# Exits non-zero when any target finds a crash, a timeout (an input that takes longer than
# FUZZ_TIMEOUT seconds, default 2; 10 for bash_command_line) or an out-of-memory; the input that did it is left in
# fuzz/artifacts/<target>/. Each target's log is kept in fuzz/target/logs/<target>.log, and
# the last lines print executions and coverage (cov, ft) per target.
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
#
#   scripts/fuzz.sh 600 frontmatter      # one target for 10 minutes
#   scripts/fuzz.sh 30                   # every target for 30 s (CI)
set -u
seconds="${1:-60}"
shift || true
timeout="${FUZZ_TIMEOUT:-2}"
# The bash splitter's parser (brush-parser) backtracks: under AddressSanitizer, 30-100x
# slower, a line it parses in 20-80 ms natively passes 2 s (the slowest found, 129 bytes,
# takes 79 ms in a release build). Its target gets 10 s unless FUZZ_TIMEOUT says otherwise;
# a hang or real exponential blow-up (the inputs in docs/testing.md) still fails it.
timeout_of() {
    case "$1" in
    bash_command_line) echo "${FUZZ_TIMEOUT:-10}" ;;
    *) echo "$timeout" ;;
    esac
}
cd "$(dirname "$0")/../fuzz" || exit 2

# Start from the main workspace's dependency versions.
[ -f Cargo.lock ] || cp ../Cargo.lock Cargo.lock
if [ "$#" -gt 0 ]; then
    targets="$*"
else
    targets=$(cargo +nightly fuzz list) || exit 2
fi
mkdir -p target/logs
# One build of every target (cargo-fuzz's defaults: optimised, with debug assertions and
# AddressSanitizer; 16 codegen units instead of 1 so a crate's code is generated in parallel,
# at a small cost in speed), then each binary runs directly, so no target pays for a rebuild
# check of its own.
echo "== building the fuzz targets"
cargo +nightly fuzz build --codegen-units 16 >target/logs/build.log 2>&1 || {
    tail -40 target/logs/build.log
    echo "fuzz: the build failed (fuzz/target/logs/build.log)" >&2
    exit 2
}
bin="target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
failed=()
summary=()
for t in $targets; do
    mkdir -p "corpus/$t" "seeds/$t" "artifacts/$t"
    echo "== fuzz target $t for ${seconds}s"
    log="target/logs/$t.log"
    # The log keeps libFuzzer's progress lines (#N NEW/REDUCE/pulse); the screen gets the rest.
    # cargo-fuzz sets detect_odr_violation=0 for the same reason: Rust's symbols trip it.
    ASAN_OPTIONS="detect_odr_violation=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
        "$bin/$t" -artifact_prefix="artifacts/$t/" \
        -max_total_time="$seconds" -timeout="$(timeout_of "$t")" -rss_limit_mb=2048 \
        -max_len=131072 -print_final_stats=1 "corpus/$t" "seeds/$t" >"$log" 2>&1
    rc=$?
    grep -v '^#[0-9]' "$log"
    [ "$rc" -eq 0 ] || failed+=("$t")
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
    summary+=("$t: ${runs:-?} executions in ${seconds}s, ${cov:-no coverage line}")
done
printf 'fuzz: %s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: crashes in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz: no crashes in: $targets"
