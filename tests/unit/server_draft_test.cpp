// The server with drafting: every response (tokens, deltas, finish reason,
// usage) equals the one without drafting, for completions and chats, with the
// n-gram and the demo's model drafter, and across conversation reuse.
#include <gtest/gtest.h>

#include "generate/drafter_open.h"
#include "generate/ngram_drafter.h"
#include "server/engine.h"

namespace deltafin::server {
namespace {

const std::string kDemo = std::string(DELTAFIN_SOURCE_DIR) + "/models/demo";
const std::string kDemoDraft = std::string(DELTAFIN_SOURCE_DIR) + "/models/demo-draft";

// `drafter`: "off", "ngram" or "model"; `always`: no economics gate or
// back-off, so that every step that can verify drafts does.
std::unique_ptr<Engine> open_engine(const std::string& drafter, bool always) {
  auto m = Model::open(kDemo, 1);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return nullptr;
  EngineOptions o;
  o.prefill_chunk = 32;
  if (always) o.draft.economics = false, o.draft.backoff_max = 0;
  std::unique_ptr<Drafter> d;
  if (drafter == "ngram") d = std::make_unique<NgramDrafter>();
  if (drafter == "model") {
    auto c = open_drafter(kDemoDraft, **m, {}, 1);
    EXPECT_TRUE(c.ok()) << c.message();
    if (!c.ok()) return nullptr;
    d = std::move(c->drafter);
  }
  auto e = Engine::create(std::move(m).value(), kDemo, o);
  EXPECT_TRUE(e.ok()) << e.message();
  if (!e.ok()) return nullptr;
  (*e)->set_drafter(std::move(d));
  return std::move(e).value();
}

GenerationOutcome generate(Engine& e, const GenRequest& r) {
  auto v = e.encode(r);
  EXPECT_TRUE(std::holds_alternative<std::vector<int32_t>>(v));
  if (!std::holds_alternative<std::vector<int32_t>>(v)) return {};
  auto o = e.generate(r, std::get<std::vector<int32_t>>(v), {},
                      [](const std::vector<Delta>&, std::span<const TokenLogprob>) { return true; });
  EXPECT_TRUE(o.ok()) << o.message();
  return o.ok() ? std::move(o).value() : GenerationOutcome{};
}

void expect_same_response(const GenerationOutcome& a, const GenerationOutcome& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.deltas, b.deltas) << what;
  EXPECT_EQ(a.finish_reason, b.finish_reason) << what;
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens) << what;
  EXPECT_EQ(a.completion_tokens, b.completion_tokens) << what;
  EXPECT_EQ(a.cached_tokens, b.cached_tokens) << what;
}

GenRequest completion(std::string prompt, int max_tokens) {
  GenRequest r;
  r.kind = RequestKind::Completion;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

GenRequest chat(nlohmann::ordered_json messages, int max_tokens) {
  GenRequest r;
  r.kind = RequestKind::Chat;
  r.messages = std::move(messages);
  r.max_tokens = max_tokens;
  return r;
}

class ServerDraft : public ::testing::TestWithParam<std::string> {};

TEST_P(ServerDraft, ResponsesEqualDraftingOff) {
  auto off = open_engine("off", false);
  auto on = open_engine(GetParam(), /*always=*/true);
  auto gated = open_engine(GetParam(), /*always=*/false);
  ASSERT_TRUE(off && on && gated);
  const std::vector<GenRequest> requests = {
      completion("def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return", 40),
      completion("one two three four, one two three four, one two", 48),
      chat({{{"role", "user"}, {"content", "Say hello three times."}}}, 48),
  };
  int64_t accepted = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationOutcome want = generate(*off, requests[i]);
    const GenerationOutcome got = generate(*on, requests[i]);
    expect_same_response(want, got, "request " + std::to_string(i) + ", always drafting");
    EXPECT_EQ(want.target_passes, int64_t(want.tokens.size()) - 1);
    EXPECT_LT(got.target_passes + got.draft_accepted, int64_t(got.tokens.size()) + 1) << "request " << i;
    accepted += got.draft_accepted;
    expect_same_response(want, generate(*gated, requests[i]), "request " + std::to_string(i) + ", default policy");
    off->discard(), on->discard(), gated->discard();
  }
  EXPECT_GT(accepted, 0) << "no draft was ever accepted: the test would not see a verification bug";
}

// Turn 2 reuses turn 1's state: the drafter's history starts with the
// reused tokens, and the response still equals a from-scratch plain one.
TEST_P(ServerDraft, ConversationReuseStaysExact) {
  auto off = open_engine("off", false);
  auto on = open_engine(GetParam(), /*always=*/true);
  ASSERT_TRUE(off && on);
  const GenRequest r1 = chat({{{"role", "user"}, {"content", "List three colours."}}}, 24);
  const GenerationOutcome a1 = generate(*off, r1), b1 = generate(*on, r1);
  expect_same_response(a1, b1, "turn 1");
  on->publish();
  off->discard();
  std::string reasoning, content;
  for (const auto& d : b1.deltas) (d.channel == Channel::Reasoning ? reasoning : content) += d.text;
  const GenRequest r2 = chat({{{"role", "user"}, {"content", "List three colours."}},
                              {{"role", "assistant"}, {"content", content}, {"reasoning_content", reasoning}},
                              {{"role", "user"}, {"content", "Again, the same three."}}},
                             24);
  const GenerationOutcome b2 = generate(*on, r2);
  EXPECT_GT(b2.cached_tokens, 0);
  GenerationOutcome a2 = generate(*off, r2);
  EXPECT_EQ(a2.cached_tokens, 0);
  a2.cached_tokens = b2.cached_tokens;  // the only field reuse may change
  expect_same_response(a2, b2, "turn 2");
}

INSTANTIATE_TEST_SUITE_P(Drafters, ServerDraft, ::testing::Values("ngram", "model"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace deltafin::server
