// Mt19937_64 gives std::mt19937_64's stream exactly (make-model's weights are
// defined by it), one value at a time and in bulk, across state refills.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/mt19937_64.h"

namespace deltafin {
namespace {

TEST(Mt19937_64, SameStreamAsTheStandardEngine) {
  for (uint64_t seed : {0ull, 1ull, 5489ull, 0x9e3779b97f4a7c15ull, ~0ull}) {
    std::mt19937_64 ref(seed);
    Mt19937_64 mine(seed);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(mine(), ref()) << "seed " << seed << " value " << i;
  }
}

TEST(Mt19937_64, BulkFillMatchesSingleValuesAtAnyOffset) {
  std::mt19937_64 ref(77);
  Mt19937_64 mine(77);
  // Odd chunk sizes, so fills start and end everywhere inside the 312-word state.
  for (size_t n : {1, 7, 311, 312, 313, 5, 1000, 0, 624, 3}) {
    std::vector<uint64_t> got(n);
    mine.fill(got.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], ref()) << "chunk " << n << " index " << i;
    ASSERT_EQ(mine(), ref());  // and single values carry on from the same place
  }
}

}  // namespace
}  // namespace deltafin
