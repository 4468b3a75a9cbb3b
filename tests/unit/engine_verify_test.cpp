// Verification blocks: verify() gives the logits forward() gives, leaves the
// session as it was, and commit_verified(n) leaves exactly the session that
// forward() over those n rows would have made, for every n.
#include <gtest/gtest.h>

#include <cstring>

#include "model/model.h"
#include "test_models.h"

namespace deltafin {
namespace {

bool same_state(const Session& a, const Session& b, const ModelConfig& cfg) {
  if (a.length != b.length) return false;
  for (int l = 0; l < cfg.num_layers; ++l) {
    if (cfg.attention[size_t(l)] == AttentionKind::KDA) {
      const auto &x = a.kda[size_t(l)], &y = b.kda[size_t(l)];
      if (x.S != y.S || x.conv_q != y.conv_q || x.conv_k != y.conv_k || x.conv_v != y.conv_v) return false;
    } else {
      const auto &x = a.mla[size_t(l)], &y = b.mla[size_t(l)];
      if (x.length() != y.length()) return false;
      for (size_t p = 0; p < x.length(); ++p)
        if (std::memcmp(x.latent(p), y.latent(p), x.latent_dim() * 4) ||
            std::memcmp(x.rope(p), y.rope(p), x.rope_dim() * 4))
          return false;
    }
  }
  return true;
}

TEST(EngineVerify, CommitOfEveryPrefixEqualsPlainForward) {
  for (int threads : {1, 2}) {
    auto m = Model::open(testing::tiny_model(3), threads);
    ASSERT_TRUE(m.ok()) << m.message();
    Model& model = *m.value();
    const size_t V = model.config().vocab;
    std::vector<int32_t> prompt;
    for (int i = 0; i < 300; ++i) prompt.push_back((i * 53 + 7) % 250);  // crosses an MLA cache chunk
    const std::vector<int32_t> block = {17, 200, 3, 3, 99, 42, 5};
    Session base = model.new_session();
    std::vector<float> lg;
    ASSERT_TRUE(model.forward(prompt, base, Logits::None, &lg).ok());

    std::vector<float> want;
    Session plain = base;
    ASSERT_TRUE(model.forward(block, plain, Logits::AllRows, &want).ok());
    for (size_t n = 0; n <= block.size(); ++n) {
      Session s = base;
      std::vector<float> got;
      ASSERT_TRUE(model.verify(block, s, &got).ok());
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << "verify logits, n=" << n;
      // Nothing is committed yet; another block is refused until the commit.
      EXPECT_EQ(s.length, base.length);
      EXPECT_FALSE(model.forward(block, s, Logits::None, &lg).ok());
      ASSERT_TRUE(model.commit_verified(s, n).ok());
      Session ref = base;
      if (n > 0) {
        ASSERT_TRUE(model.forward(std::span<const int32_t>(block.data(), n), ref, Logits::None, &lg).ok());
      }
      EXPECT_TRUE(same_state(s, ref, model.config())) << "threads=" << threads << " n=" << n;
      // And the session decodes on exactly as the plain one does.
      std::vector<float> a, b;
      const int32_t next = 11;
      ASSERT_TRUE(model.forward(std::span<const int32_t>(&next, 1), s, Logits::LastRow, &a).ok());
      ASSERT_TRUE(model.forward(std::span<const int32_t>(&next, 1), ref, Logits::LastRow, &b).ok());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), V * 4), 0) << "next step after commit of " << n;
    }
  }
}

TEST(EngineVerify, CommitNeedsAPendingBlock) {
  auto m = Model::open(testing::tiny_model(3), 1);
  ASSERT_TRUE(m.ok()) << m.message();
  Session s = m.value()->new_session();
  EXPECT_FALSE(m.value()->commit_verified(s, 0).ok());
  std::vector<float> lg;
  const std::vector<int32_t> block = {1, 2, 3};
  ASSERT_TRUE(m.value()->verify(block, s, &lg).ok());
  EXPECT_FALSE(m.value()->commit_verified(s, 4).ok());
  EXPECT_TRUE(m.value()->commit_verified(s, 3).ok());
  EXPECT_EQ(s.length, 3);
  EXPECT_GT(m.value()->verify_bytes_per_row(), 0u);
}

}  // namespace
}  // namespace deltafin
