// The server's engine on the tiny test model: exactly `deltafin run`'s
// tokens, conversation reuse that prefills only new tokens without changing
// the output, and the chat output filter and memo on their own.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "server/engine.h"
#include "server/memo.h"
#include "server/output_filter.h"
#include "test_models.h"

namespace deltafin::server {
namespace {

std::unique_ptr<Engine> open_engine(int seed, bool reuse = true) {
  auto m = Model::open(testing::tiny_model(seed), 1);
  EXPECT_TRUE(m.ok()) << m.message();
  EngineOptions o;
  o.state_reuse = reuse;
  o.prefill_chunk = 48;  // several chunks per prompt: reuse starts mid-chunk
  auto e = Engine::create(std::move(m).value(), testing::tiny_model(seed), o);
  EXPECT_TRUE(e.ok()) << e.message();
  return std::move(e).value();
}

GenRequest chat_request(nlohmann::ordered_json messages, int max_tokens) {
  GenRequest r;
  r.kind = RequestKind::Chat;
  r.messages = std::move(messages);
  r.max_tokens = max_tokens;
  return r;
}

struct Gen {
  GenerationOutcome out;
  int64_t started_prefill = -1;
};

Gen run(Engine& e, const GenRequest& r, const std::vector<int32_t>& ids) {
  Gen res;
  auto o = e.generate(r, ids, [&](int64_t p, int64_t) { res.started_prefill = p; },
                      [](const std::vector<Delta>&, std::span<const TokenLogprob>) { return true; });
  EXPECT_TRUE(o.ok()) << o.message();
  res.out = std::move(o).value();
  return res;
}

std::vector<int32_t> ids_of(Engine& e, const GenRequest& r) {
  auto v = e.encode(r);
  EXPECT_TRUE(std::holds_alternative<std::vector<int32_t>>(v));
  return std::get<std::vector<int32_t>>(v);
}

// `deltafin run --prompt-ids ... --print-ids` as a subprocess.
std::vector<int32_t> deltafin_run(const std::string& model, const std::vector<int32_t>& ids, int max_new, bool chat) {
  std::string csv;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) csv += ',';
    csv += std::to_string(ids[i]);
  }
  const std::string cmd = std::string(DELTAFIN_BINARY) + " run --model " + model + " --threads 1 --print-ids" +
                          (chat ? " --chat" : "") + " --max-new " + std::to_string(max_new) + " --prompt-ids " + csv;
  std::FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::vector<int32_t> out;
  int v;
  while (p && std::fscanf(p, "%d", &v) == 1) out.push_back(v);
  if (p) {
    EXPECT_EQ(pclose(p), 0);
  }
  return out;
}

TEST(ServerEngine, CompletionTokensEqualDeltafinRun) {
  auto e = open_engine(11);
  GenRequest r;
  r.kind = RequestKind::Completion;
  r.prompt = "The quick brown fox";
  r.max_tokens = 12;
  const auto ids = ids_of(*e, r);
  ASSERT_EQ(ids.size(), r.prompt.size());  // byte-level tokenizer
  Gen a = run(*e, r, ids);
  EXPECT_EQ(a.out.finish_reason, "length");
  EXPECT_EQ(a.out.tokens, deltafin_run(testing::tiny_model(11), ids, 12, false));
  EXPECT_EQ(a.out.completion_tokens, 12);
  EXPECT_EQ(a.out.prompt_tokens, int64_t(ids.size()));
}

TEST(ServerEngine, ChatTokensEqualDeltafinRunChat) {
  auto e = open_engine(11);
  GenRequest r = chat_request({{{"role", "user"}, {"content", "hi"}}}, 20);
  const auto ids = ids_of(*e, r);
  Gen a = run(*e, r, ids);
  EXPECT_EQ(a.out.tokens, deltafin_run(testing::tiny_model(11), ids, 20, true));
}

// Turn 2 of a conversation: reuse prefills only the new tokens and yields the
// tokens of a from-scratch run, for both retained boundaries.
TEST(ServerEngine, ConversationReuseIsExactAndPrefillsOnlyNewTokens) {
  auto e = open_engine(11);
  auto scratch = open_engine(11, /*reuse=*/false);
  GenRequest r1 = chat_request({{{"role", "user"}, {"content", "first question"}}}, 9);
  const auto ids1 = ids_of(*e, r1);
  Gen t1 = run(*e, r1, ids1);
  EXPECT_EQ(t1.started_prefill, int64_t(ids1.size()));
  e->publish();
  EXPECT_EQ(e->retained_boundaries(), 2u);

  // (a) the client re-sends the conversation rendered by the template: extends the prompt boundary.
  const auto& msg = t1.out;
  std::string reasoning, content;
  for (const auto& d : msg.deltas) (d.channel == Channel::Reasoning ? reasoning : content) += d.text;
  GenRequest r2 = chat_request({{{"role", "user"}, {"content", "first question"}},
                                {{"role", "assistant"}, {"content", content}, {"reasoning_content", reasoning}},
                                {{"role", "user"}, {"content", "second"}}},
                               9);
  const auto ids2 = ids_of(*e, r2);
  ASSERT_GT(ids2.size(), ids1.size());
  ASSERT_TRUE(std::equal(ids1.begin(), ids1.end(), ids2.begin()));
  Gen t2 = run(*e, r2, ids2);
  EXPECT_EQ(t2.out.cached_tokens, int64_t(ids1.size()));
  EXPECT_EQ(t2.started_prefill, int64_t(ids2.size() - ids1.size()));
  Gen s2 = run(*scratch, r2, ids2);
  EXPECT_EQ(s2.out.cached_tokens, 0);
  EXPECT_EQ(t2.out.tokens, s2.out.tokens);
  EXPECT_EQ(t2.out.deltas, s2.out.deltas);
  e->publish();

  // (b) a prompt that extends prompt + generated tokens resumes after the answer
  // (its last token was never run through the model: it is prefilled now).
  std::vector<int32_t> ids3 = ids2;
  ids3.insert(ids3.end(), t2.out.tokens.begin(), t2.out.tokens.end());
  for (int32_t t : {65, 66, 67}) ids3.push_back(t);
  Gen t3 = run(*e, r2, ids3);
  EXPECT_EQ(t3.out.cached_tokens, int64_t(ids2.size() + t2.out.tokens.size() - 1));
  EXPECT_EQ(t3.started_prefill, 4);
  Gen s3 = run(*scratch, r2, ids3);
  EXPECT_EQ(t3.out.tokens, s3.out.tokens);

  // Not published (e.g. the client left): the next request starts from scratch.
  Gen t4 = run(*e, r2, ids3);
  EXPECT_EQ(t4.out.cached_tokens, 0);
  EXPECT_EQ(t4.out.tokens, s3.out.tokens);
  e->publish();
  // Equal prompt (not a strict extension) is not reused.
  Gen t5 = run(*e, r2, ids3);
  EXPECT_EQ(t5.out.cached_tokens, 0);
}

TEST(ServerEngine, CancelStopsAtOnceAndKeepsNothing) {
  auto e = open_engine(11);
  GenRequest r = chat_request({{{"role", "user"}, {"content", "x"}}}, 50);
  const auto ids = ids_of(*e, r);
  int calls = 0;
  auto o = e->generate(r, ids, nullptr,
                       [&](const std::vector<Delta>&, std::span<const TokenLogprob>) { return ++calls < 3; });
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->cancelled);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(o->tokens.size(), 3u);
  e->publish();
  EXPECT_EQ(e->retained_boundaries(), 0u);
}

TEST(ServerEngine, ContextBoundIsA400) {
  auto m = Model::open(testing::tiny_model(11), 1);
  ASSERT_TRUE(m.ok());
  EngineOptions o;
  o.max_context = 40;
  auto e = Engine::create(std::move(m).value(), testing::tiny_model(11), o);
  ASSERT_TRUE(e.ok());
  GenRequest r;
  r.kind = RequestKind::Completion;
  r.prompt = std::string(30, 'a');
  r.max_tokens = 11;
  auto v = (*e)->encode(r);
  ASSERT_TRUE(std::holds_alternative<ApiError>(v));
  EXPECT_EQ(std::get<ApiError>(v).code, "context_length_exceeded");
  r.max_tokens = 10;
  EXPECT_TRUE(std::holds_alternative<std::vector<int32_t>>((*e)->encode(r)));
}

class FilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = tokenizer::Tokenizer::load_from_checkpoint_dir(testing::tiny_model(11));
    ASSERT_TRUE(t.ok()) << t.message();
    tok_ = std::make_unique<tokenizer::Tokenizer>(std::move(t).value());
  }
  std::vector<uint32_t> ids(const std::string& text) {
    auto v = tok_->encode(text, /*allow_special=*/true);
    EXPECT_TRUE(v.ok()) << v.message();
    return v.ok() ? v.value() : std::vector<uint32_t>{};
  }
  std::pair<std::string, std::string> filter(const std::string& text) {
    auto f = OutputFilter::create(*tok_, true);
    EXPECT_TRUE(f.ok());
    std::vector<Delta> out;
    for (uint32_t id : ids(text)) EXPECT_TRUE(f->push(id, out).ok());
    EXPECT_TRUE(f->finish(out).ok());
    std::string r, c;
    for (const auto& d : out) {
      EXPECT_FALSE(d.text.empty());
      (d.channel == Channel::Reasoning ? r : c) += d.text;
    }
    return {r, c};
  }
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(FilterTest, SplitsReasoningAndAnswerAndHidesMarkers) {
  auto [r, c] = filter("I think so.<|close|>think<|sep|><|open|>response<|sep|>Yes.<|close|>response<|sep|>"
                       "<|close|>message<|sep|>");
  EXPECT_EQ(r, "I think so.");
  EXPECT_EQ(c, "Yes.");
}

TEST_F(FilterTest, BrokenMarkerTextIsKeptAndSpecialsAreNotShown) {
  auto [r, c] = filter("a<|open|>resp<|end_of_msg|>b<|open|>" + std::string(40, 'x') + "<|sep|>z");
  EXPECT_EQ(r, "arespb" + std::string(40, 'x') + "z");
  EXPECT_EQ(c, "");
}

TEST_F(FilterTest, SplitUtf8IsHeldBackNotBroken) {
  auto f = OutputFilter::create(*tok_, false);
  ASSERT_TRUE(f.ok());
  std::vector<Delta> out;
  const std::string euro = "\xE2\x82\xAC";
  for (unsigned char b : euro) ASSERT_TRUE(f->push(b, out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].text, euro);
}

TEST(ServerMemo, LruBoundedByEntriesAndBytes) {
  ResponseMemo m(2, 1 << 20);
  MemoEntry e{{{Channel::Text, "abc"}}, "length", 3, 1};
  m.insert("a", e);
  m.insert("b", e);
  ASSERT_TRUE(m.find("a"));  // a becomes most recent
  m.insert("c", e);          // evicts b
  EXPECT_TRUE(m.find("a"));
  EXPECT_FALSE(m.find("b"));
  EXPECT_TRUE(m.find("c"));
  EXPECT_EQ(m.find("a")->deltas, e.deltas);

  ResponseMemo small(100, e.bytes() + 10);
  small.insert("x", e);
  small.insert("y", e);  // over the byte budget: x goes
  EXPECT_FALSE(small.find("x"));
  EXPECT_TRUE(small.find("y"));
  MemoEntry huge{{{Channel::Text, std::string(1000, 'z')}}, "stop", 1, 1};
  small.insert("h", huge);  // larger than the whole budget: not kept, nothing evicted
  EXPECT_FALSE(small.find("h"));
  EXPECT_TRUE(small.find("y"));

  ResponseMemo off(0, 1 << 20);
  off.insert("a", e);
  EXPECT_FALSE(off.find("a"));
}

}  // namespace
}  // namespace deltafin::server
