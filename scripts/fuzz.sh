#!/usr/bin/env bash
# Run every cargo-fuzz target under fuzz/ for SECONDS each (default 60), starting from the
# seed corpus in fuzz/seeds/<target>/ (never modified) and a working corpus under
# fuzz/corpus/<target>/. Exits non-zero when any target finds a crash, a timeout (an input
# that takes longer than FUZZ_TIMEOUT seconds, default 2) or an out-of-memory; the input
# that did it is left in fuzz/artifacts/<target>/.
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -u
seconds="${1:-60}"
timeout="${FUZZ_TIMEOUT:-2}"
cd "$(dirname "$0")/../fuzz" || exit 2

# Start from the main workspace's dependency versions.
[ -f Cargo.lock ] || cp ../Cargo.lock Cargo.lock
targets=$(cargo +nightly fuzz list) || exit 2
failed=()
for t in $targets; do
    mkdir -p "corpus/$t" "seeds/$t"
    echo "== fuzz target $t for ${seconds}s"
    if ! cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 \
        -max_len=131072 -print_final_stats=1; then
        failed+=("$t")
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: crashes in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz: no crashes in: $targets"
