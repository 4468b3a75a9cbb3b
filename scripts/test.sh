#!/usr/bin/env bash
# Builds Deltafin and runs every test: the release build with -Werror, then the
# tests again under AddressSanitizer + UndefinedBehaviorSanitizer (all but the
# benchmark harness and e2e.logits_golden: bit-exact logit comparisons of
# whole runs, three minutes under ASan, whose code paths the other tests run),
# then the read engine's tests under ThreadSanitizer (scripts/test_tsan.sh).
# Usage: scripts/test.sh [--no-sanitizers]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
jobs=$(nproc)

cmake -S . -B build-test -DDELTAFIN_WERROR=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-test -j"$jobs"
ctest --test-dir build-test --output-on-failure -j"$jobs"

if [[ "${1:-}" != "--no-sanitizers" ]]; then
  cmake -S . -B build-asan -DDELTAFIN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DDELTAFIN_SANITIZE=address,undefined >/dev/null
  cmake --build build-asan -j"$jobs" --target deltafin deltafin_tests  # not the microbenchmarks
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -E '^e2e\.(bench|logits_golden)'
fi

# The read engine's concurrency tests under ThreadSanitizer.
if [[ "${1:-}" != "--no-sanitizers" && -f scripts/test_tsan.sh ]]; then
  bash scripts/test_tsan.sh
fi
