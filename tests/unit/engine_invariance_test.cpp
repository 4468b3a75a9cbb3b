// Batch invariance, bitwise: a row's logits do not depend on the prefill
// chunking, the thread count, or on sharing a block with other rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "generate/greedy.h"
#include "model/layers.h"
#include "model/model.h"
#include "test_models.h"

namespace deltafin {
namespace {

struct GenRun {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // concatenated per decided step
};

GenRun generate_with(const std::string& dir, int threads, int chunk, const std::vector<int32_t>& prompt, int max_new) {
  auto m = Model::open(dir, threads);
  EXPECT_TRUE(m.ok()) << m.message();
  GenRun r;
  if (!m.ok()) return r;
  Session s = m.value()->new_session();
  GenerateOptions g;
  g.max_new = max_new;
  g.prefill_chunk = chunk;
  Status st = generate(*m.value(), s, prompt, g, [&](int32_t tok, std::span<const float> lg) {
    r.tokens.push_back(tok);
    r.logits.insert(r.logits.end(), lg.begin(), lg.end());
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return r;
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 37 + salt * 11 + 5) % 256);
  return p;
}

TEST(EngineInvariance, ChunkingAndThreadsAreBitwiseIdentical) {
  const std::string& dir = testing::tiny_model(1);
  const auto prompt = prompt_of(70, 3);
  const GenRun base = generate_with(dir, 1, 1, prompt, 12);
  ASSERT_EQ(base.tokens.size(), 12u);
  for (int threads : {1, 2}) {
    for (int chunk : {1, 2, 7, 64}) {
      const GenRun r = generate_with(dir, threads, chunk, prompt, 12);
      ASSERT_EQ(r.tokens, base.tokens) << "threads=" << threads << " chunk=" << chunk;
      ASSERT_EQ(r.logits.size(), base.logits.size());
      EXPECT_EQ(std::memcmp(r.logits.data(), base.logits.data(), base.logits.size() * 4), 0)
          << "threads=" << threads << " chunk=" << chunk;
    }
  }
}

// A verification block [pending, d1..dk] gives, row by row, the same logits
// as decoding those tokens one at a time (what exact drafting relies on).
TEST(EngineInvariance, BlockRowsEqualSequentialDecode) {
  const std::string& dir = testing::tiny_model(2);
  auto m = Model::open(dir, 2);
  ASSERT_TRUE(m.ok()) << m.message();
  Model& model = *m.value();
  const auto prompt = prompt_of(9, 1);
  const std::vector<int32_t> block = {17, 200, 3, 3, 99, 42};
  const size_t V = model.config().vocab;

  Session a = model.new_session();
  std::vector<float> lg;
  ASSERT_TRUE(model.forward(prompt, a, Logits::None, &lg).ok());
  Session b = a;  // snapshot
  std::vector<float> all;
  ASSERT_TRUE(model.forward(block, a, Logits::AllRows, &all).ok());
  ASSERT_EQ(all.size(), block.size() * V);
  for (size_t i = 0; i < block.size(); ++i) {
    ASSERT_TRUE(model.forward(std::span<const int32_t>(&block[i], 1), b, Logits::LastRow, &lg).ok());
    EXPECT_EQ(std::memcmp(lg.data(), all.data() + i * V, V * 4), 0) << "row " << i;
  }
  EXPECT_EQ(a.length, b.length);
}

TEST(EngineInvariance, RejectsOutOfVocabularyIds) {
  auto m = Model::open(testing::tiny_model(1), 1);
  ASSERT_TRUE(m.ok()) << m.message();
  Session s = m.value()->new_session();
  std::vector<float> lg;
  const std::vector<int32_t> bad = {1, m.value()->config().vocab};
  Status st = m.value()->forward(bad, s, Logits::LastRow, &lg);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("outside the vocabulary"), std::string::npos) << st.message();
}

TEST(Routing, TopKOrderIsDescendingCorrectedScoreTiesToLowerId) {
  // choice = sigmoid(logit) + bias: expert 6 -> 1.0, expert 5 -> 0.881,
  // all others tie at 0.5 and must come in ascending id order.
  std::vector<float> logits(8, 0.0f), bias(8, 0.0f);
  logits[5] = 2.0f;
  bias[6] = 0.5f;
  int ids[4];
  float w[4];
  layers::route(logits.data(), bias.data(), 8, 4, ids, w);
  EXPECT_EQ(ids[0], 6);
  EXPECT_EQ(ids[1], 5);
  EXPECT_EQ(ids[2], 0);
  EXPECT_EQ(ids[3], 1);
  // Weights use the unbiased sigmoid scores, renormalised.
  const float s5 = 1.0f / (1.0f + std::exp(-2.0f));
  const float sum = 0.5f + s5 + 0.5f + 0.5f;
  EXPECT_FLOAT_EQ(w[0], 0.5f / sum);
  EXPECT_FLOAT_EQ(w[1], s5 / sum);
  EXPECT_FLOAT_EQ(w[0] + w[1] + w[2] + w[3], 1.0f);
}

}  // namespace
}  // namespace deltafin
