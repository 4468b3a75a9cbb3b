#!/usr/bin/env bash
# Builds Deltafin and runs every test: the release build with -Werror, then the
# unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
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
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -E '^e2e\.bench'
fi

# The read engine's concurrency tests under ThreadSanitizer.
if [[ "${1:-}" != "--no-sanitizers" && -f scripts/test_tsan.sh ]]; then
  bash scripts/test_tsan.sh
fi
