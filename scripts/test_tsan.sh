#!/usr/bin/env bash
# The read engine's concurrency tests under ThreadSanitizer: its own build
# directory, then the io/store unit tests (the engine stress test with
# concurrent demand + prefetch reads and cancellations, the store source) and
# prepare run in-process (its pack writer fills ahead on a second thread).
# Usage: scripts/test_tsan.sh [build-dir] [deltafin binary]
#   The binary (scripts/test.sh passes the release build's, built from the same
#   tree) makes the tests' models; without it this build compiles its own
#   `deltafin` under TSan too, which is most of its compile time.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-tsan}
tool=${2:-}
[[ -n $tool ]] && tool=$(realpath "$tool")
jobs=$(nproc)
cmake -S . -B "$dir" -DDELTAFIN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DDELTAFIN_SANITIZE=thread \
      -DDELTAFIN_TOOL_BINARY="$tool" >/dev/null
# Only the target with the read engine's test files (CMakeLists.txt: deltafin_tsan_tests).
cmake --build "$dir" -j"$jobs" --target deltafin_tsan_tests
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" \
  -R '^tsan\.(IoEngine|IoArena|StoreFaults\.(StoreSourceBytesMatchCheckpoint|StreamingWaitsFromSeveralThreads|PrefetchedReadsAreClaimedOrDropped|RamTierConcurrentFillAndUse|RamTierAdmitsAClaimedGuessLikeAMiss|RamTierNeverKeepsACorruptedRead)|StorePrepareShards\..*)'
