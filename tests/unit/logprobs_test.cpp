// Log probabilities (generate/logprobs.h) against a long-double log-softmax,
// and the server engine's entries: one per generated non-stop token, the
// chosen token's text and value, the greedy choice at the top, and the same
// entries with and without streaming consumers.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "generate/logprobs.h"
#include "server/engine.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {
namespace {

TEST(Logprobs, EqualALongDoubleLogSoftmax) {
  const std::vector<float> l = {1.0f, -2.5f, 3.0f, 3.0f, 0.25f, -40.0f, 1e4f, 9999.5f};
  long double m = -1e30L, z = 0;
  for (float x : l) m = std::max(m, (long double)x);
  for (float x : l) z += std::exp((long double)x - m);
  const long double lse = m + std::log(z);
  double total = 0;
  for (int32_t j = 0; j < int32_t(l.size()); ++j) {
    const Logprobs lp = logprobs_of(l, j, 0);
    EXPECT_NEAR(lp.chosen, double((long double)l[size_t(j)] - lse), 1e-9) << j;
    EXPECT_LE(lp.chosen, 0.0);
    total += std::exp(lp.chosen);
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
  const Logprobs top = logprobs_of(l, 0, 4);
  ASSERT_EQ(top.top.size(), 4u);
  EXPECT_EQ(top.top[0].id, 6);  // 1e4
  EXPECT_EQ(top.top[1].id, 7);
  EXPECT_EQ(top.top[2].id, 2);  // 3.0 twice: the lower id first
  EXPECT_EQ(top.top[3].id, 3);
  EXPECT_EQ(top.top[2].logprob, top.top[3].logprob);
  EXPECT_EQ(logprobs_of(l, 0, 100).top.size(), l.size());  // k past the vocabulary: all of it
}

server::GenRequest completion(const std::string& prompt, int max_tokens, int top) {
  server::GenRequest r;
  r.kind = server::RequestKind::Completion;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.logprobs = true;
  r.top_logprobs = top;
  return r;
}

TEST(Logprobs, EngineGivesOneEntryPerGeneratedToken) {
  auto m = Model::open(testing::tiny_model(11), 1);
  ASSERT_TRUE(m.ok()) << m.message();
  auto e = server::Engine::create(std::move(m).value(), testing::tiny_model(11), {});
  ASSERT_TRUE(e.ok()) << e.message();
  server::Engine& eng = **e;
  auto tok = tokenizer::Tokenizer::load_from_checkpoint_dir(testing::tiny_model(11));
  ASSERT_TRUE(tok.ok()) << tok.message();
  for (int top : {0, 3}) {
    const auto r = completion("The quick brown fox", 12, top);
    const auto ids = std::get<std::vector<int32_t>>(eng.encode(r));
    std::vector<server::TokenLogprob> streamed;
    auto o = eng.generate(r, ids, {}, [&](const std::vector<server::Delta>&, std::span<const server::TokenLogprob> lp) {
      streamed.insert(streamed.end(), lp.begin(), lp.end());
      return true;
    });
    ASSERT_TRUE(o.ok()) << o.message();
    ASSERT_EQ(o->logprobs.size(), o->tokens.size());  // completions have no stop ids
    ASSERT_EQ(streamed.size(), o->logprobs.size());
    std::string text, joined;
    for (const auto& d : o->deltas) text += d.text;
    int64_t offset = 0;
    for (size_t i = 0; i < o->logprobs.size(); ++i) {
      const server::TokenLogprob& t = o->logprobs[i];
      EXPECT_EQ(t.text, streamed[i].text);
      EXPECT_EQ(t.logprob, streamed[i].logprob);
      EXPECT_LE(t.logprob, 0.0);
      EXPECT_EQ(t.text_offset, offset);
      offset += int64_t(t.text.size());
      joined += t.text;
      ASSERT_EQ(t.top.size(), size_t(top));
      if (top > 0) {
        // Greedy decoding: the emitted token is the likeliest.
        EXPECT_EQ(t.top[0].text, t.text);
        EXPECT_EQ(t.top[0].logprob, t.logprob);
        for (size_t k = 1; k < t.top.size(); ++k) EXPECT_LE(t.top[k].logprob, t.top[k - 1].logprob);
      }
    }
    // Raw completions show every token's bytes, invalid UTF-8 replaced; the entries keep the bytes.
    EXPECT_EQ(tok->decode_bytes(std::vector<uint32_t>(o->tokens.begin(), o->tokens.end())).value(), joined);
    EXPECT_EQ(tok->decode(std::vector<uint32_t>(o->tokens.begin(), o->tokens.end())).value(), text);
  }
  // Without the field: no entries.
  auto r = completion("The quick brown fox", 4, 0);
  r.logprobs = false;
  auto o = eng.generate(r, std::get<std::vector<int32_t>>(eng.encode(r)), {},
                        [](const std::vector<server::Delta>&, std::span<const server::TokenLogprob> lp) {
                          EXPECT_TRUE(lp.empty());
                          return true;
                        });
  ASSERT_TRUE(o.ok()) << o.message();
  EXPECT_TRUE(o->logprobs.empty());
}

}  // namespace
}  // namespace deltafin
