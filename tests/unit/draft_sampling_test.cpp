// Drafting with seeded sampling: generate_drafted() gives memcmp-identical ids
// and logits to generate() with the same sampling parameters and seed, with
// drafters that are right (the plain output itself), plausible (n-gram, the
// demo's model drafter) and hostile; the same seed repeats, another differs.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "draft_test_util.h"
#include "generate/drafter_open.h"
#include "generate/ngram_drafter.h"

namespace deltafin {
namespace {

using testing::always_draft;
using testing::Decoded;
using testing::decode_drafted;
using testing::decode_plain;
using testing::same_decoding;
using testing::ScriptedDrafter;

const std::string kDemo = std::string(DELTAFIN_SOURCE_DIR) + "/models/demo";
const std::string kDemoDraft = std::string(DELTAFIN_SOURCE_DIR) + "/models/demo-draft";

std::vector<std::vector<int32_t>> some_prompts() {
  std::ifstream f(std::string(DELTAFIN_SOURCE_DIR) + "/tests/golden/demo_pytorch_tokens.json");
  const auto j = nlohmann::json::parse(f);
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < j.at("prompts").size(); i += 8) out.push_back(j["prompts"][i].at("ids").get<std::vector<int32_t>>());
  return out;
}

std::vector<SamplingParams> parameter_sets() {
  SamplingParams a;
  a.temperature = 0.8;
  a.top_p = 0.9;
  a.seed = 11;
  SamplingParams b;
  b.temperature = 1.3;
  b.top_k = 20;
  b.min_p = 0.02;
  b.presence_penalty = 0.5;
  b.frequency_penalty = 0.4;
  b.seed = 12;
  SamplingParams c;  // greedy with penalties
  c.frequency_penalty = 1.0;
  return {a, b, c};
}

TEST(DraftSampling, SeededSamplingIsIdenticalWithEveryDrafter) {
  auto m = Model::open(kDemo, 2);
  ASSERT_TRUE(m.ok()) << m.message();
  Model& model = **m;
  const int V = model.config().vocab;
  GenerateOptions g;
  g.max_new = 40;
  g.stop_ids = {model.config().eos_id};
  std::vector<int32_t> truth;
  size_t prompt_len = 0;
  auto continuation = [&](std::span<const int32_t> h, size_t n) {
    std::vector<int32_t> out;
    for (size_t i = h.size() - prompt_len; i < truth.size() && out.size() < n; ++i) out.push_back(truth[i]);
    return out;
  };
  ScriptedDrafter right("right", [&](std::span<const int32_t> h, int k) { return continuation(h, size_t(k)); });
  ScriptedDrafter off_by_one("right-then-wrong", [&](std::span<const int32_t> h, int k) {
    auto out = continuation(h, size_t(k));
    if (out.size() > 1) out.back() = (out.back() + 1) % V;
    return out;
  });
  NgramDrafter ngram;
  auto model_drafter = open_drafter(kDemoDraft, model, {}, 2);
  ASSERT_TRUE(model_drafter.ok()) << model_drafter.message();
  std::vector<Drafter*> drafters = {&right, &off_by_one, &ngram, model_drafter->drafter.get()};

  int64_t accepted = 0;
  for (const SamplingParams& p : parameter_sets()) {
    for (const auto& prompt : some_prompts()) {
      TokenPicker plain_picker(p);
      GenerateOptions gp = g;
      gp.picker = &plain_picker;
      Session s0 = model.new_session();
      const Decoded plain = decode_plain(model, s0, prompt, gp);
      truth = plain.ids;
      prompt_len = prompt.size();
      for (Drafter* d : drafters) {
        TokenPicker picker(p);
        GenerateOptions gd = g;
        gd.picker = &picker;
        Session s1 = model.new_session();
        DraftStats ds;
        const Decoded drafted = decode_drafted(model, s1, prompt, gd, d, always_draft(), &ds);
        ASSERT_TRUE(same_decoding(plain, drafted)) << d->name() << " temperature " << p.temperature;
        ASSERT_EQ(s0.length, s1.length) << d->name();
        accepted += ds.accepted;
      }
    }
  }
  EXPECT_GT(accepted, 100);  // the verifier's accepting path was exercised, not only rejections
}

TEST(DraftSampling, SameSeedRepeatsAnotherSeedDiffers) {
  auto m = Model::open(kDemo, 1);
  ASSERT_TRUE(m.ok()) << m.message();
  const auto prompt = some_prompts().front();
  auto run = [&](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0;
    p.seed = seed;
    TokenPicker picker(p);
    GenerateOptions g;
    g.max_new = 24;
    g.picker = &picker;
    Session s = (*m)->new_session();
    return decode_plain(**m, s, prompt, g).ids;
  };
  const auto a = run(1);
  EXPECT_EQ(a, run(1));
  EXPECT_NE(a, run(2));
  GenerateOptions greedy;
  greedy.max_new = 24;
  Session s = (*m)->new_session();
  EXPECT_NE(a, decode_plain(**m, s, prompt, greedy).ids);
}

}  // namespace
}  // namespace deltafin
