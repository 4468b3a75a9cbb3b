// ConversationState (generate/conversation_state.h), the model state of
// `deltafin chat`, on the demo model with K3's chat template: each turn's
// tokens equal those of a fresh session given the whole conversation, and a
// turn after a complete answer prefills only the new turn.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "generate/conversation_state.h"
#include "server/output_filter.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {
namespace {

using ojson = nlohmann::ordered_json;

const std::string kDemo = std::string(DELTAFIN_SOURCE_DIR) + "/models/demo";

struct Fixture {
  std::unique_ptr<Model> model;
  std::optional<tokenizer::Tokenizer> tok;
  std::vector<int32_t> stops;
};

Fixture open_demo() {
  Fixture f;
  auto m = Model::open(kDemo, 2);
  EXPECT_TRUE(m.ok()) << m.message();
  if (m.ok()) f.model = std::move(m).value();
  auto t = tokenizer::Tokenizer::load_from_checkpoint_dir(kDemo);
  EXPECT_TRUE(t.ok()) << t.message();
  if (t.ok()) f.tok = std::move(t).value();
  auto s = tokenizer::chat_stop_ids(*f.tok);
  EXPECT_TRUE(s.ok());
  if (s.ok()) f.stops.assign(s->begin(), s->end());
  return f;
}

std::vector<int32_t> render(const Fixture& f, const ojson& messages) {
  auto ids = tokenizer::encode_chat(*f.tok, messages);
  EXPECT_TRUE(ids.ok()) << ids.message();
  return ids.ok() ? std::vector<int32_t>(ids->begin(), ids->end()) : std::vector<int32_t>{};
}

GenerateOptions options(const Fixture& f, int max_new, int chunk) {
  GenerateOptions g;
  g.max_new = max_new;
  g.prefill_chunk = chunk;
  g.stop_ids = f.stops;
  return g;
}

// The tokens a fresh session generates after the whole rendering.
std::vector<int32_t> fresh(Fixture& f, const std::vector<int32_t>& ids, const GenerateOptions& g) {
  Session s = f.model->new_session();
  std::vector<int32_t> out;
  Status st = generate(*f.model, s, ids, g, [&](int32_t t, std::span<const float>) {
    out.push_back(t);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// The assistant message the chat keeps: the answer parsed as the server does.
ojson assistant(const Fixture& f, const std::vector<int32_t>& tokens) {
  auto filter = server::OutputFilter::create(*f.tok, /*chat=*/true, /*thinking=*/true);
  EXPECT_TRUE(filter.ok());
  std::vector<server::Delta> ds;
  for (int32_t t : tokens) {
    if (std::find(f.stops.begin(), f.stops.end(), t) == f.stops.end()) {
      EXPECT_TRUE(filter->push(uint32_t(t), ds).ok());
    }
  }
  EXPECT_TRUE(filter->finish(ds).ok());
  std::string reasoning, content;
  for (const auto& d : ds) (d.channel == server::Channel::Reasoning ? reasoning : content) += d.text;
  return {{"role", "assistant"}, {"content", content}, {"reasoning_content", reasoning}};
}

struct Turn {
  std::vector<int32_t> ids, tokens;
  ConversationTurnStats stats;
};

Turn say(ConversationState& state, const std::vector<int32_t>& ids, const GenerateOptions& g) {
  Turn t;
  t.ids = ids;
  Status st = state.generate(ids, g, nullptr, {}, [&](int32_t tok, std::span<const float>) {
    t.tokens.push_back(tok);
    return true;
  }, &t.stats);
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

TEST(ChatConversationState, ThreeTurnsPrefillOnlyTheNewTurnAndMatchAFreshSession) {
  Fixture f = open_demo();
  ASSERT_TRUE(f.model && f.tok);
  ConversationState state(*f.model);
  const GenerateOptions g = options(f, 200, 16);  // several blocks per turn: reuse starts mid-block
  ojson messages = ojson::array();
  Turn prev;
  for (const char* q : {"What does `urlsplit` do?", "Explain `make_archive`.", "What does `urljoin` do?"}) {
    messages.push_back({{"role", "user"}, {"content", q}});
    Turn t = say(state, render(f, messages), g);
    EXPECT_EQ(t.tokens, fresh(f, t.ids, g)) << q;
    EXPECT_EQ(t.stats.prompt_tokens, int64_t(t.ids.size()));
    EXPECT_EQ(t.stats.prefilled_tokens + t.stats.reused_tokens, t.stats.prompt_tokens);
    if (prev.ids.empty()) {
      EXPECT_EQ(t.stats.reused_tokens, 0);
    } else {
      // The answer ended with its stop token, which is pending: everything
      // before it is reused; the stop token and the new turn are prefilled.
      ASSERT_FALSE(prev.tokens.empty());
      ASSERT_NE(std::find(f.stops.begin(), f.stops.end(), prev.tokens.back()), f.stops.end()) << "answer cut";
      EXPECT_EQ(t.stats.reused_tokens, int64_t(prev.ids.size() + prev.tokens.size() - 1)) << q;
    }
    EXPECT_EQ(state.kept_boundaries(), 2u);
    messages.push_back(assistant(f, t.tokens));
    prev = std::move(t);
  }
}

// An answer cut at max_new is re-rendered with its closing markers: the
// turn after it reuses at least the prompt and still matches a fresh session.
TEST(ChatConversationState, CutAnswerReusesThePromptAndStaysExact) {
  Fixture f = open_demo();
  ASSERT_TRUE(f.model && f.tok);
  ConversationState state(*f.model);
  ojson messages = ojson::array({{{"role", "user"}, {"content", "What does `urlsplit` do?"}}});
  Turn t1 = say(state, render(f, messages), options(f, 5, 512));
  ASSERT_EQ(t1.tokens.size(), 5u);
  messages.push_back(assistant(f, t1.tokens));
  messages.push_back({{"role", "user"}, {"content", "Go on."}});
  const GenerateOptions g = options(f, 60, 512);
  Turn t2 = say(state, render(f, messages), g);
  EXPECT_GE(t2.stats.reused_tokens, int64_t(t1.ids.size()));
  EXPECT_LT(t2.stats.reused_tokens, int64_t(t2.ids.size()));
  EXPECT_EQ(t2.tokens, fresh(f, t2.ids, g));
}

// A prefill interrupted between blocks keeps what ran; the same prompt
// resumes from there and gives a fresh session's tokens.
TEST(ChatConversationState, InterruptedPrefillResumesExactly) {
  Fixture f = open_demo();
  ASSERT_TRUE(f.model && f.tok);
  ConversationState state(*f.model);
  const auto ids = render(f, ojson::array({{{"role", "user"}, {"content", "Explain `make_archive`."}}}));
  ASSERT_GT(ids.size(), 24u);
  GenerateOptions g = options(f, 40, 8);
  int asked = 0;
  g.interrupted = [&] { return ++asked > 2; };  // two blocks run, then stop
  Turn cut = say(state, ids, g);
  EXPECT_TRUE(cut.tokens.empty());
  g.interrupted = nullptr;
  Turn t = say(state, ids, g);
  EXPECT_EQ(t.stats.reused_tokens, 16);
  EXPECT_EQ(t.tokens, fresh(f, ids, g));
}

// A conversation that does not extend the kept one (after /reset, or an
// edited history) starts from an empty session.
TEST(ChatConversationState, AnotherConversationStartsFresh) {
  Fixture f = open_demo();
  ASSERT_TRUE(f.model && f.tok);
  ConversationState state(*f.model);
  const GenerateOptions g = options(f, 30, 512);
  say(state, render(f, ojson::array({{{"role", "user"}, {"content", "What does `urlsplit` do?"}}})), g);
  const auto other = render(f, ojson::array({{{"role", "user"}, {"content", "Explain `make_archive`."}}}));
  Turn t = say(state, other, g);
  // The two renderings share their opening (the thinking-effort message), not the user turn.
  EXPECT_LT(t.stats.reused_tokens, int64_t(other.size()));
  EXPECT_EQ(t.stats.reused_tokens, 0);
  EXPECT_EQ(t.tokens, fresh(f, other, g));
  state.clear();
  EXPECT_EQ(state.kept_boundaries(), 0u);
  EXPECT_EQ(say(state, other, g).stats.reused_tokens, 0);
}

}  // namespace
}  // namespace deltafin
