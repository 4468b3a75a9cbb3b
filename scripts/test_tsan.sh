#!/usr/bin/env bash
# The read engine's concurrency tests under ThreadSanitizer: its own build
# directory, then the io/store unit tests (the engine stress test with
# concurrent demand + prefetch reads and cancellations, and the store source).
# Usage: scripts/test_tsan.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-tsan}
jobs=$(nproc)
cmake -S . -B "$dir" -DDELTAFIN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DDELTAFIN_SANITIZE=thread >/dev/null
# Only the target with the read engine's test files (CMakeLists.txt: deltafin_tsan_tests).
cmake --build "$dir" -j"$jobs" --target deltafin_tsan_tests
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" \
  -R '^tsan\.(IoEngine|IoArena|StoreFaults\.(StoreSourceBytesMatchCheckpoint|StreamingWaitsFromSeveralThreads|PrefetchedReadsAreClaimedOrDropped|RamTierConcurrentFillAndUse|RamTierNeverKeepsACorruptedRead))'
