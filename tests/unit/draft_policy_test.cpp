// The drafting policy (width, back-off, economics) and the n-gram lookup, as
// pure functions, and the sanitising of proposals.
#include <gtest/gtest.h>

#include "generate/draft_policy.h"
#include "generate/ngram_drafter.h"
#include "generate/speculative.h"

namespace deltafin {
namespace {

TEST(DraftPolicy, ProbesAfterTheBaselineThenWidensAndNarrows) {
  DraftPolicy p(DraftPolicyOptions{});
  EXPECT_EQ(p.width(), 0);  // no baseline yet
  p.plain_step(0.010);
  EXPECT_EQ(p.width(), 0);
  p.plain_step(0.012);
  EXPECT_DOUBLE_EQ(p.baseline(), 0.011);
  EXPECT_DOUBLE_EQ(p.credit(), 0.011);  // one baseline token of allowance
  EXPECT_EQ(p.width(), 2);              // the probe
  p.drafted_step(2, 2, 3, 0.013);       // full match: 3 tokens for 1.2 baselines
  EXPECT_EQ(p.width(), 4);
  p.drafted_step(4, 4, 5, 0.015);
  EXPECT_EQ(p.width(), 7);  // capped at draft_max
  p.drafted_step(7, 2, 3, 0.02);
  EXPECT_EQ(p.width(), 4);  // partial: 2 x accepted
  p.drafted_step(4, 1, 2, 0.014);
  EXPECT_EQ(p.width(), 2);
  EXPECT_FALSE(p.off());
}

TEST(DraftPolicy, ZeroAcceptanceBacksOffDoublingThenProbesAgain) {
  DraftPolicyOptions o;
  o.allowance = 1000;  // economics out of the way
  DraftPolicy p(o);
  p.plain_step(0.01), p.plain_step(0.01);
  for (int pause : {1, 2, 4, 8}) {
    ASSERT_EQ(p.width(), 2);
    p.drafted_step(2, 0, 1, 0.011);
    for (int i = 0; i < pause; ++i) {
      EXPECT_EQ(p.width(), 0) << "pause " << pause << " step " << i;
      p.plain_step(0.01);
    }
  }
  EXPECT_EQ(p.width(), 2);
  p.drafted_step(2, 1, 2, 0.011);  // a success resets the back-off
  p.drafted_step(2, 0, 1, 0.011);
  EXPECT_EQ(p.width(), 0);
  p.plain_step(0.01);
  EXPECT_EQ(p.width(), 2);
}

TEST(DraftPolicy, NegativeCreditSwitchesDraftingOffForTheRequest) {
  DraftPolicy p(DraftPolicyOptions{});
  p.plain_step(0.010), p.plain_step(0.010);
  p.drafted_step(2, 0, 1, 0.014);  // lost 0.4 baselines: credit 0.6
  EXPECT_FALSE(p.off());
  EXPECT_NEAR(p.credit(), 0.006, 1e-12);
  for (int i = 0; i < 4; ++i) p.plain_step(0.010);  // (the back-off)
  p.drafted_step(2, 0, 1, 0.017);                    // lost 0.7: negative
  EXPECT_TRUE(p.off());
  EXPECT_EQ(p.width(), 0);
  EXPECT_NE(p.off_reason().find("credit"), std::string::npos);
  p.drafted_step(2, 2, 3, 0.001);  // nothing turns it back on
  EXPECT_EQ(p.width(), 0);
}

TEST(DraftPolicy, EmptyProposalsCostCredit) {
  DraftPolicy p(DraftPolicyOptions{});
  p.plain_step(0.010), p.plain_step(0.010);
  for (int i = 0; i < 9; ++i) p.empty_proposal(0.001);
  EXPECT_FALSE(p.off());
  p.empty_proposal(0.0011);
  EXPECT_TRUE(p.off());
}

TEST(DraftPolicy, EconomicsOffNeverSwitchesOff) {
  DraftPolicyOptions o;
  o.economics = false;
  DraftPolicy p(o);
  EXPECT_EQ(p.width(), 2);  // no baseline needed
  p.drafted_step(2, 0, 1, 100.0);
  EXPECT_FALSE(p.off());
}

TEST(NgramDrafter, LongestMostRecentSuffixMatch) {
  // "1 2 3 9 ... 1 2 3" -> 9 follows the 3-token suffix.
  EXPECT_EQ(ngram_next(std::vector<int32_t>{1, 2, 3, 9, 5, 1, 2, 3}), 9);
  // The longer match wins over a more recent shorter one.
  EXPECT_EQ(ngram_next(std::vector<int32_t>{7, 1, 2, 8, 4, 4, 1, 2, 6, 7, 1, 2}), 8);
  // Equal lengths: the most recent occurrence.
  EXPECT_EQ(ngram_next(std::vector<int32_t>{1, 2, 5, 1, 2, 6, 1, 2}), 6);
  // A single repeated token is not enough (at least 2).
  EXPECT_EQ(ngram_next(std::vector<int32_t>{3, 4, 5, 3}), -1);
  EXPECT_EQ(ngram_next(std::vector<int32_t>{}), -1);
  EXPECT_EQ(ngram_next(std::vector<int32_t>{1, 1}), -1);
  // Overlapping periodic text extends itself.
  EXPECT_EQ(ngram_next(std::vector<int32_t>{4, 4, 4}), 4);
}

TEST(NgramDrafter, ChainsItsGuesses) {
  NgramDrafter d;
  const std::vector<int32_t> h = {10, 11, 12, 13, 14, 99, 10, 11};
  auto p = d.propose(h, 5);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (std::vector<int32_t>{12, 13, 14, 99, 10}));
  auto none = d.propose(std::vector<int32_t>{1, 2, 3}, 4);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(DraftSanitize, CutsAtInvalidIdsAndAfterStops) {
  const std::vector<int32_t> stops = {7};
  EXPECT_EQ(sanitize_drafts({1, 2, 3, 4}, 2, 10, stops), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(sanitize_drafts({1, 10, 3}, 5, 10, stops), (std::vector<int32_t>{1}));
  EXPECT_EQ(sanitize_drafts({-1, 2}, 5, 10, stops), (std::vector<int32_t>{}));
  EXPECT_EQ(sanitize_drafts({1, 7, 3}, 5, 10, stops), (std::vector<int32_t>{1, 7}));
  EXPECT_EQ(sanitize_drafts({1, 2}, -3, 10, stops), (std::vector<int32_t>{}));
}

}  // namespace
}  // namespace deltafin
