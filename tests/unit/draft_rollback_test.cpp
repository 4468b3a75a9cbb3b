// Rollback: whatever position a proposal is rejected at (0..k, k = full
// acceptance), the target session after the step is byte-identical to the one
// plain decoding builds, and so is the model drafter's own session after its
// rollback.
#include <gtest/gtest.h>

#include <cstring>

#include "draft_test_util.h"
#include "generate/model_drafter.h"
#include "test_models.h"

namespace deltafin {
namespace {

using testing::always_draft;
using testing::Decoded;
using testing::decode_drafted;
using testing::decode_plain;
using testing::same_decoding;
using testing::ScriptedDrafter;

::testing::AssertionResult same_state(const Session& a, const Session& b, const ModelConfig& cfg) {
  if (a.length != b.length) return ::testing::AssertionFailure() << "length " << a.length << " vs " << b.length;
  for (int l = 0; l < cfg.num_layers; ++l) {
    if (cfg.attention[size_t(l)] == AttentionKind::KDA) {
      const auto &x = a.kda[size_t(l)], &y = b.kda[size_t(l)];
      if (x.S != y.S || x.conv_q != y.conv_q || x.conv_k != y.conv_k || x.conv_v != y.conv_v)
        return ::testing::AssertionFailure() << "KDA layer " << l << " differs";
    } else {
      const auto &x = a.mla[size_t(l)], &y = b.mla[size_t(l)];
      if (x.length() != y.length()) return ::testing::AssertionFailure() << "MLA layer " << l << " length";
      for (size_t p = 0; p < x.length(); ++p)
        if (std::memcmp(x.latent(p), y.latent(p), x.latent_dim() * 4) ||
            std::memcmp(x.rope(p), y.rope(p), x.rope_dim() * 4))
          return ::testing::AssertionFailure() << "MLA layer " << l << " position " << p;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(DraftRollback, RejectionAtEveryPositionLeavesThePlainSession) {
  for (int threads : {1, 2}) {
    auto mo = Model::open(testing::tiny_model(3), threads);
    ASSERT_TRUE(mo.ok()) << mo.message();
    Model& m = *mo.value();
    const std::vector<int32_t> prompt = {9, 8, 300, 41, 41, 2, 150};
    constexpr int kMax = 24, kWidth = 7;
    GenerateOptions all;
    all.max_new = kMax;
    Session s = m.new_session();
    const Decoded truth = decode_plain(m, s, prompt, all);
    for (int wrong_at = 0; wrong_at <= kWidth; ++wrong_at) {
      // The true continuation with draft number wrong_at replaced (none when wrong_at == k).
      ScriptedDrafter d("reject-at", [&](std::span<const int32_t> h, int k) {
        std::vector<int32_t> out;
        for (size_t i = h.size() - prompt.size(); i < truth.ids.size() && int(out.size()) < k; ++i)
          out.push_back(truth.ids[i]);
        if (wrong_at < int(out.size())) out[size_t(wrong_at)] = (out[size_t(wrong_at)] + 1) % m.config().vocab;
        return out;
      });
      // Every stopping point: the session after each emitted token count.
      for (int max_new = 1; max_new <= kMax; ++max_new) {
        GenerateOptions g;
        g.max_new = max_new;
        Session a = m.new_session(), b = m.new_session();
        const Decoded want = decode_plain(m, a, prompt, g);
        DraftStats ds;
        const Decoded got = decode_drafted(m, b, prompt, g, &d, always_draft(kWidth), &ds);
        ASSERT_TRUE(same_decoding(want, got)) << "wrong at " << wrong_at << ", max_new " << max_new;
        ASSERT_TRUE(same_state(a, b, m.config())) << "threads " << threads << ", wrong at " << wrong_at
                                                  << ", max_new " << max_new;
        if (max_new == kMax && wrong_at < kWidth) {
          EXPECT_GT(ds.verify_passes, 0);
          ASSERT_GT(ds.accepted_at.size() + 1, size_t(wrong_at));
          if (wrong_at > 0) {
            EXPECT_GT(ds.accepted_at[size_t(wrong_at - 1)], 0);
          }
        }
      }
    }
  }
}

// The model drafter's own rollback: after any sequence of proposals and
// verdicts its session equals one that ran exactly the tokens it holds.
TEST(DraftRollback, ModelDrafterSessionAfterRollbackIsPlain) {
  auto target = Model::open(testing::tiny_model(3), 1);
  ASSERT_TRUE(target.ok()) << target.message();
  auto dr = ModelDrafter::open(testing::tiny_model(4), target.value()->config(), 1);
  ASSERT_TRUE(dr.ok()) << dr.message();
  ModelDrafter& d = *dr.value();
  std::vector<int32_t> history = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  Mt19937_64 rng(5);
  ASSERT_TRUE(d.reset().ok());
  for (int step = 0; step < 30; ++step) {
    const int k = 1 + int(rng() % 7);
    auto p = d.propose(history, k);
    ASSERT_TRUE(p.ok()) << p.message();
    ASSERT_EQ(p->size(), size_t(k));
    const size_t accepted = size_t(rng() % uint64_t(k + 1));
    ASSERT_TRUE(d.accept(accepted).ok());
    for (size_t i = 0; i < accepted; ++i) history.push_back((*p)[i]);
    history.push_back(int32_t(rng() % 512));  // the target's own token
    // What the drafter holds is a prefix of the history, and its state is
    // that of a plain run over those tokens.
    const auto& fed = d.fed();
    ASSERT_LE(fed.size(), history.size());
    ASSERT_TRUE(std::equal(fed.begin(), fed.end(), history.begin()));
    Session ref = d.model().new_session();
    std::vector<float> lg;
    if (!fed.empty()) {
      ASSERT_TRUE(d.model().forward(fed, ref, Logits::None, &lg).ok());
    }
    ASSERT_TRUE(same_state(d.session(), ref, d.model().config())) << "step " << step;
  }
}

}  // namespace
}  // namespace deltafin
