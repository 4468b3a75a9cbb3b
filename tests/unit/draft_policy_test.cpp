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
  p.plain_step(0.013);
  EXPECT_EQ(p.width(), 0);
  p.plain_step(0.011);
  EXPECT_DOUBLE_EQ(p.baseline(), 0.011);  // the median of three
  EXPECT_DOUBLE_EQ(p.credit(), 0.022);    // two baseline tokens of allowance
  EXPECT_EQ(p.width(), 2);              // the probe
  // Verification that costs no more than a plain step: only the rule limits the width.
  p.drafted_step(2, 2, 3, 0.011);  // full match
  EXPECT_EQ(p.width(), 4);
  p.drafted_step(4, 4, 5, 0.011);
  EXPECT_EQ(p.width(), 7);  // capped at draft_max
  p.drafted_step(7, 2, 3, 0.011);
  EXPECT_EQ(p.width(), 4);  // partial: 2 x accepted
  p.drafted_step(4, 1, 2, 0.011);
  EXPECT_EQ(p.width(), 2);
  EXPECT_FALSE(p.off());
  EXPECT_DOUBLE_EQ(p.row_cost(), 0);
}

TEST(DraftPolicy, MeasuredCostCapsTheWidth) {
  DraftPolicyOptions o;
  o.allowance = 1000;
  DraftPolicy p(o);
  p.plain_step(0.010), p.plain_step(0.010), p.plain_step(0.010);
  // Each proposed token costs half a plain step; draft 1 is right 3 times in 4,
  // later ones always once reached.
  p.drafted_step(2, 2, 3, 0.020);
  p.drafted_step(2, 2, 3, 0.020);
  p.drafted_step(2, 2, 3, 0.020);
  EXPECT_NEAR(p.row_cost(), 0.5, 1e-12);
  EXPECT_LE(p.width(), 7);
  const int k = p.width();
  EXPECT_GE(k, 2);
  for (int other = 1; other <= 7; ++other) EXPECT_GE(p.expected_speedup(k) + 1e-12, p.expected_speedup(other)) << other;
  // Expensive drafts that are mostly wrong: no width pays, drafting backs off.
  DraftPolicy q(o);
  q.plain_step(0.010), q.plain_step(0.010), q.plain_step(0.010);
  q.drafted_step(2, 1, 2, 0.040);  // 1.5 plain steps per proposed token
  EXPECT_LT(q.expected_speedup(1), 1.0);
  EXPECT_EQ(q.width(), 0);
  q.plain_step(0.010);
  EXPECT_EQ(q.width(), 1);  // then it probes again, at the width that loses least
}

TEST(DraftPolicy, ZeroAcceptanceBacksOffDoublingThenProbesAgain) {
  DraftPolicyOptions o;
  o.allowance = 1000;  // economics out of the way
  DraftPolicy p(o);
  p.plain_step(0.01), p.plain_step(0.01), p.plain_step(0.01);
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
  p.plain_step(0.010), p.plain_step(0.010), p.plain_step(0.010);
  p.drafted_step(2, 0, 1, 0.020);  // lost 1 baseline (c = 0.5): credit 1
  EXPECT_FALSE(p.off());
  EXPECT_NEAR(p.credit(), 0.010, 1e-12);
  EXPECT_NEAR(p.row_cost(), 0.5, 1e-12);
  for (int i = 0; i < 4; ++i) p.plain_step(0.010);  // (the back-off)
  p.drafted_step(2, 0, 1, 0.024);                    // c = median(0.5, 0.7) = 0.6: credit 2 - 0.6 x 4 < 0
  EXPECT_TRUE(p.off());
  EXPECT_EQ(p.width(), 0);
  EXPECT_NE(p.off_reason().find("credit"), std::string::npos);
  p.drafted_step(2, 2, 3, 0.001);  // nothing turns it back on
  EXPECT_EQ(p.width(), 0);
}

TEST(DraftPolicy, EmptyProposalsCostCredit) {
  DraftPolicy p(DraftPolicyOptions{});
  p.plain_step(0.010), p.plain_step(0.010), p.plain_step(0.010);
  for (int i = 0; i < 19; ++i) p.empty_proposal(0.001);
  EXPECT_FALSE(p.off());
  p.empty_proposal(0.0011);
  EXPECT_TRUE(p.off());
}

TEST(DraftPolicy, OneSlowStepDoesNotDecide) {
  DraftPolicy p(DraftPolicyOptions{});
  p.plain_step(0.010), p.plain_step(0.010), p.plain_step(0.010);
  p.drafted_step(4, 4, 5, 0.012);
  p.drafted_step(4, 4, 5, 0.012);
  p.drafted_step(4, 4, 5, 0.200);  // preempted: 20 plain steps of wall time
  EXPECT_FALSE(p.off());
  EXPECT_NEAR(p.row_cost(), 0.05, 1e-12);  // the median ignores it
}

TEST(DraftPolicy, EconomicsOffNeverSwitchesOff) {
  DraftPolicyOptions o;
  o.economics = false;
  DraftPolicy p(o);
  EXPECT_EQ(p.width(), 2);  // no baseline needed
  p.drafted_step(2, 0, 1, 100.0);
  EXPECT_FALSE(p.off());
}

// A drafter that reports what it was asked.
class Named : public Drafter {
 public:
  Named(std::string n, std::vector<int> layers) : n_(std::move(n)), layers_(std::move(layers)) {}
  std::string name() const override { return n_; }
  std::vector<int> target_layers() const override { return layers_; }
  Status reset() override { ++resets; return {}; }
  Result<std::vector<int32_t>> propose(std::span<const int32_t>, int k) override {
    return std::vector<int32_t>(size_t(k), int32_t(n_.size()));
  }
  Status accept(size_t) override { return {}; }
  int resets = 0;

 private:
  std::string n_;
  std::vector<int> layers_;
};

TEST(DrafterChain, FallsBackInOrderAndResetsPerRequest) {
  std::vector<std::unique_ptr<Drafter>> v;
  v.push_back(std::make_unique<Named>("first", std::vector<int>{2, 5}));
  v.push_back(std::make_unique<Named>("second-one", std::vector<int>{}));
  auto* first = static_cast<Named*>(v[0].get());
  DrafterChain c(std::move(v));
  EXPECT_EQ(c.name(), "first");
  EXPECT_EQ(c.target_layers(), (std::vector<int>{2, 5}));
  EXPECT_EQ(c.propose(std::vector<int32_t>{1}, 2).value(), (std::vector<int32_t>{5, 5}));
  EXPECT_TRUE(c.fall_back());
  EXPECT_EQ(c.name(), "second-one");
  EXPECT_TRUE(c.target_layers().empty());
  EXPECT_EQ(c.propose(std::vector<int32_t>{1}, 1).value(), (std::vector<int32_t>{10}));
  EXPECT_FALSE(c.fall_back());  // nothing after the last
  ASSERT_TRUE(c.reset().ok());  // a new request starts at the first again
  EXPECT_EQ(c.name(), "first");
  EXPECT_EQ(first->resets, 1);
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
