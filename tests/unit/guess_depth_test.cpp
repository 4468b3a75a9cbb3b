// The learned count of next-layer guesses (`--prefetch auto`): ranks scored
// against hand-made routes, with the ageing worked out by hand.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "model/guess_depth.h"

namespace deltafin {
namespace {

// A guess of experts 0..31 ranked in order, against a route of the given experts.
std::vector<int> ranked32() {
  std::vector<int> r(32);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

TEST(GuessDepth, StartsAtTheInitialCountAndLearnsWhereTheTailStarts) {
  GuessDepth d(3, 32, 0.5, 4);
  EXPECT_EQ(d.per_row(1), 4);
  const std::vector<int> routed = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 40, 41, 42, 43, 44, 45};
  d.score(1, ranked32(), routed);
  EXPECT_EQ(d.per_row(1), 10);  // ranks 0..9 routed, 10..31 not
  EXPECT_EQ(d.per_row(0), 4);   // layers are scored apart
  EXPECT_EQ(d.per_row(2), 4);
}

// A rank routed in every row so far, then in none: its share of the aged
// counts after n misses is keep^n = 0.5^(n / half_life) (the hits' weight
// over a long history is 1 / (1 - keep), as is the rows'), so it stays at
// least one half through n = half_life misses and drops below after.
TEST(GuessDepth, ARankThatStopsBeingRoutedIsDroppedAfterAHalfLife) {
  const int half_life = 8;
  GuessDepth d(1, 32, 0.5, 4, half_life);
  const std::vector<int> wide = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 40, 41, 42, 43, 44, 45};
  for (int i = 0; i < 2000; ++i) d.score(0, ranked32(), wide);
  ASSERT_EQ(d.per_row(0), 10);
  const std::vector<int> narrow = {0, 1, 2, 3, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51};
  for (int i = 0; i < half_life - 1; ++i) d.score(0, ranked32(), narrow);
  EXPECT_EQ(d.per_row(0), 10) << "after " << half_life - 1 << " misses: 0.5^(7/8) of the rows";
  d.score(0, ranked32(), narrow);
  d.score(0, ranked32(), narrow);
  EXPECT_EQ(d.per_row(0), 4) << "after " << half_life + 1 << " misses: 0.5^(9/8) of the rows";
  // and grows back once they are routed again
  for (int i = 0; i < half_life + 1; ++i) d.score(0, ranked32(), wide);
  EXPECT_EQ(d.per_row(0), 10);
}

TEST(GuessDepth, CountsRanksAtTheThresholdNotAPrefix) {
  GuessDepth d(1, 8, 0.5, 2, /*half_life=*/1000000);
  const std::vector<int> ranked = {10, 11, 12, 13, 14, 15, 16, 17};
  // Rank 1 routed in every other row, the latest included (a share just
  // over one half, the ageing favouring the latest), rank 2 never, ranks 0
  // and 3 always.
  for (int i = 0; i < 10; ++i) {
    if (i % 2) d.score(0, ranked, std::vector<int>{10, 11, 13});
    else d.score(0, ranked, std::vector<int>{10, 13});
  }
  EXPECT_EQ(d.per_row(0), 3);
  // A guess shorter than the cap scores only its ranks.
  GuessDepth s(1, 8, 0.5, 2);
  s.score(0, std::vector<int>{1, 2, 3}, std::vector<int>{1, 2, 3});
  EXPECT_EQ(s.per_row(0), 3);
}

TEST(GuessDepth, NothingRoutedMeansNoGuessesAndAZeroCapMeansNone) {
  GuessDepth d(1, 16, 0.5, 4);
  d.score(0, ranked32(), std::vector<int>{100, 101});
  EXPECT_EQ(d.per_row(0), 0);
  GuessDepth z(2, 0, 0.5, 4);
  EXPECT_EQ(z.per_row(1), 0);
  z.score(1, ranked32(), std::vector<int>{0});
  EXPECT_EQ(z.per_row(1), 0);
}

}  // namespace
}  // namespace deltafin
