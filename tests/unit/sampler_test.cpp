// The token picker (generate/sampler.h): greedy is the argmax; a seeded draw
// is a pure function of (logits, parameters, seed, position, generated
// tokens); its frequencies follow the softmax; each cut keeps what it says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "generate/greedy.h"
#include "generate/sampler.h"

namespace deltafin {
namespace {

std::vector<float> ramp_logits() { return {0.5f, 2.0f, 1.0f, -1.0f, 2.0f, 0.0f, 1.5f, -3.0f}; }

TEST(Sampler, CounterUniformIsAPureFunctionInTheUnitInterval) {
  std::set<double> seen;
  for (int64_t p = 0; p < 2000; ++p) {
    const double u = counter_uniform(42, p);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    EXPECT_EQ(u, counter_uniform(42, p));
    seen.insert(u);
  }
  EXPECT_EQ(seen.size(), 2000u);
  EXPECT_NE(counter_uniform(1, 5), counter_uniform(2, 5));
  double mean = 0;
  for (int64_t p = 0; p < 100000; ++p) mean += counter_uniform(9, p);
  EXPECT_NEAR(mean / 100000, 0.5, 0.005);
}

TEST(Sampler, GreedyIsTheArgmaxAndPenaltiesMoveIt) {
  const auto l = ramp_logits();
  TokenPicker plain;
  EXPECT_EQ(plain.pick(l, 0), argmax_lowest(l));
  EXPECT_EQ(plain.pick(l, 0), 1);  // ties (ids 1 and 4) go to the lower id
  SamplingParams p;
  p.presence_penalty = 0.25;
  TokenPicker pen(p);
  pen.accept(1);
  EXPECT_EQ(pen.pick(l, 1), 4);  // 2.0 - 0.25 < 2.0
  pen.accept(4);
  EXPECT_EQ(pen.pick(l, 2), 1);  // both penalised once: the lower id again
  p.presence_penalty = 0;
  p.frequency_penalty = 0.3;
  TokenPicker freq(p);
  for (int i = 0; i < 2; ++i) freq.accept(1);
  freq.accept(4);
  EXPECT_EQ(freq.pick(l, 3), 4);  // id 1: 2.0 - 0.6 = 1.4, id 4: 1.7, id 6: 1.5
  freq.accept(4);
  freq.accept(4);
  EXPECT_EQ(freq.pick(l, 4), 6);  // id 4: 2.0 - 0.9 = 1.1
}

TEST(Sampler, SeededDrawsRepeatAndFollowTheSoftmax) {
  const auto l = ramp_logits();
  SamplingParams p;
  p.temperature = 0.7;
  p.seed = 123;
  TokenPicker a(p), b(p);
  std::vector<int> count(l.size(), 0);
  const int n = 40000;
  for (int64_t pos = 0; pos < n; ++pos) {
    const int32_t t = a.pick(l, pos);
    ASSERT_EQ(t, b.pick(l, pos));
    count[size_t(t)]++;
  }
  double z = 0;
  for (float x : l) z += std::exp(double(x) / 0.7);
  for (size_t j = 0; j < l.size(); ++j) {
    const double want = std::exp(double(l[j]) / 0.7) / z;
    EXPECT_NEAR(double(count[j]) / n, want, 4 * std::sqrt(want * (1 - want) / n) + 1e-4) << "id " << j;
  }
  // Another seed: another sequence.
  p.seed = 124;
  TokenPicker c(p);
  int same = 0;
  for (int64_t pos = 0; pos < 200; ++pos) same += c.pick(l, pos) == a.pick(l, pos);
  EXPECT_LT(same, 150);
}

TEST(Sampler, CutsKeepWhatTheySay) {
  const auto l = ramp_logits();  // ranks: 1, 4 (tie, lower id first), 6, 2, 0, 5, 3, 7
  auto drawn = [&](SamplingParams p) {
    p.temperature = 1;
    TokenPicker t(p);
    std::set<int32_t> s;
    for (int64_t pos = 0; pos < 4000; ++pos) s.insert(t.pick(l, pos));
    return s;
  };
  SamplingParams k;
  k.top_k = 3;
  EXPECT_EQ(drawn(k), (std::set<int32_t>{1, 4, 6}));
  k.top_k = 1;
  EXPECT_EQ(drawn(k), (std::set<int32_t>{1}));
  // top_p: weights e^(x - 2) are 1, 1, .61, .37, .22, .14, .05, .007 (sum 3.39): 0.5 of
  // the mass is reached by the first two ranks.
  SamplingParams tp;
  tp.top_p = 0.5;
  EXPECT_EQ(drawn(tp), (std::set<int32_t>{1, 4}));
  tp.top_p = 0.6;  // 2.03 of 3.39 needed: three ranks
  EXPECT_EQ(drawn(tp), (std::set<int32_t>{1, 4, 6}));
  SamplingParams mp;
  mp.min_p = 0.3;  // w >= 0.3: ids 1, 4, 6 (0.61), 2 (0.37)
  EXPECT_EQ(drawn(mp), (std::set<int32_t>{1, 4, 6, 2}));
  SamplingParams all;
  EXPECT_EQ(drawn(all).size(), 8u);
}

TEST(Sampler, BigVocabularyTopPEqualsTheFullSortDefinition) {
  // 50,000 ids: the growing-head search must give the cut a full sort gives.
  std::vector<float> l(50000);
  for (size_t j = 0; j < l.size(); ++j) l[j] = float(std::sin(double(j) * 0.37) * 3.0);
  SamplingParams p;
  p.temperature = 0.9;
  p.top_p = 0.97;
  p.seed = 5;
  std::vector<int32_t> order(l.size());
  for (size_t j = 0; j < l.size(); ++j) order[j] = int32_t(j);
  std::vector<double> s(l.size()), w(l.size());
  double m = -1e300, z = 0;
  for (size_t j = 0; j < l.size(); ++j) m = std::max(m, s[j] = double(l[j]) / 0.9);
  for (size_t j = 0; j < l.size(); ++j) z += (w[j] = std::exp(s[j] - m));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
  double acc = 0;
  size_t n = 0;
  while (acc < 0.97 * z) acc += w[size_t(order[n++])];
  const std::set<int32_t> keep(order.begin(), order.begin() + ptrdiff_t(n));
  TokenPicker t(p);
  for (int64_t pos = 0; pos < 60; ++pos) {
    const int32_t id = t.pick(l, pos);
    // The expected draw: the first kept id in id order past u x (kept mass).
    double zk = 0;
    for (int32_t j : keep) zk += w[size_t(j)];
    const double target = counter_uniform(5, pos) * zk;
    double run = 0;
    int32_t want = -1;
    for (int32_t j : keep) {  // std::set iterates in id order
      run += w[size_t(j)];
      want = j;
      if (run > target) break;
    }
    ASSERT_EQ(id, want) << "position " << pos;
  }
}

TEST(Sampler, RewindForgetsTentativeTokens) {
  SamplingParams p;
  p.temperature = 0.8;
  p.frequency_penalty = 1.5;
  p.seed = 3;
  const auto l = ramp_logits();
  TokenPicker a(p), b(p);
  a.accept(1);
  b.accept(1);
  const size_t mark = b.mark();
  b.accept(4);
  b.accept(4);
  b.rewind(mark);
  for (int64_t pos = 0; pos < 100; ++pos) ASSERT_EQ(a.pick(l, pos), b.pick(l, pos));
}

}  // namespace
}  // namespace deltafin
