// Stop strings: the matcher on its own (spans deltas, holds back a tail that
// may begin a stop, never splits UTF-8, only the visible channel), the
// request field, and the engine on the demo model: the response is exactly
// the no-stop response cut before the first occurrence, with drafting too.
#include <gtest/gtest.h>

#include "generate/ngram_drafter.h"
#include "server/engine.h"
#include "server/request.h"
#include "server/stop_strings.h"

namespace deltafin::server {
namespace {

std::string text_of(const std::vector<Delta>& ds, Channel c) {
  std::string s;
  for (const auto& d : ds)
    if (d.channel == c) s += d.text;
  return s;
}

// Feeds `pieces` one delta per step; returns what was shown and whether it stopped.
std::pair<std::vector<Delta>, bool> feed(std::vector<std::string> stops, const std::vector<Delta>& pieces) {
  StopMatcher m(std::move(stops));
  std::vector<Delta> out;
  for (const auto& p : pieces)
    if (m.push({p}, out)) return {out, true};
  m.finish(out);
  return {out, false};
}

TEST(StopMatcher, CutsBeforeTheFirstStopEvenAcrossDeltas) {
  const std::vector<Delta> pieces = {{Channel::Text, "Hello wo"}, {Channel::Text, "rld, END"}, {Channel::Text, "X tail"}};
  auto [out, stopped] = feed({"ENDX", "world"}, pieces);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text_of(out, Channel::Text), "Hello ");  // "world" completes first, across two deltas
  auto [out2, stopped2] = feed({"ENDX"}, pieces);
  EXPECT_TRUE(stopped2);
  EXPECT_EQ(text_of(out2, Channel::Text), "Hello world, ");
  auto [out3, stopped3] = feed({"nowhere"}, pieces);
  EXPECT_FALSE(stopped3);
  EXPECT_EQ(text_of(out3, Channel::Text), "Hello world, ENDX tail");
}

TEST(StopMatcher, HoldsBackOnlyWhatMayBeginAStop) {
  StopMatcher m({"abc"});
  std::vector<Delta> out;
  EXPECT_FALSE(m.push({{Channel::Text, "xxab"}}, out));
  EXPECT_EQ(text_of(out, Channel::Text), "xx");  // "ab" may become "abc"
  out.clear();
  EXPECT_FALSE(m.push({{Channel::Text, "d"}}, out));
  EXPECT_EQ(text_of(out, Channel::Text), "abd");  // it did not
  out.clear();
  EXPECT_FALSE(m.push({{Channel::Text, "a"}}, out));
  EXPECT_TRUE(out.empty());
  m.finish(out);
  EXPECT_EQ(text_of(out, Channel::Text), "a");  // the end shows the held tail
}

TEST(StopMatcher, NeverSplitsUtf8) {
  // "é" is two bytes; a stop that begins with it holds back whole characters.
  StopMatcher m({"\xc3\xa9t\xc3\xa9"});
  std::vector<Delta> out;
  EXPECT_FALSE(m.push({{Channel::Text, "caf\xc3\xa9"}}, out));
  EXPECT_EQ(text_of(out, Channel::Text), "caf");
  out.clear();
  EXPECT_TRUE(m.push({{Channel::Text, "t\xc3\xa9!"}}, out));
  EXPECT_TRUE(out.empty());
}

TEST(StopMatcher, ReasoningIsNotMatchedAndASwitchFlushes) {
  StopMatcher m({"STOP"});
  std::vector<Delta> out;
  EXPECT_FALSE(m.push({{Channel::Reasoning, "think STOP now"}}, out));
  EXPECT_FALSE(m.push({{Channel::Content, "ST"}}, out));
  EXPECT_FALSE(m.push({{Channel::Reasoning, "more"}}, out));  // flushes "ST" first, in order
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1], (Delta{Channel::Content, "ST"}));
  EXPECT_TRUE(m.push({{Channel::Content, "a STOP b"}}, out));
  EXPECT_EQ(out.back(), (Delta{Channel::Content, "a "}));
}

TEST(StopField, AcceptedShapesAndRefusals) {
  ValidationLimits lim;
  lim.model_name = "m";
  auto req = [&](const std::string& stop) {
    return validate_request(RequestKind::Completion, R"({"prompt":"x","stop":)" + stop + "}", lim);
  };
  auto ok = [&](const std::string& stop) {
    auto v = req(stop);
    EXPECT_TRUE(std::holds_alternative<GenRequest>(v)) << stop;
    return std::holds_alternative<GenRequest>(v) ? std::get<GenRequest>(v).stop : std::vector<std::string>{};
  };
  EXPECT_EQ(ok("null"), std::vector<std::string>{});
  EXPECT_EQ(ok("[]"), std::vector<std::string>{});
  EXPECT_EQ(ok(R"("\n\n")"), std::vector<std::string>{"\n\n"});
  EXPECT_EQ(ok(R"(["a","bc","d","e"])"), (std::vector<std::string>{"a", "bc", "d", "e"}));
  for (const char* bad : {R"(["a","b","c","d","e"])", R"("")", R"(["a",""])", R"([1])", "3", R"({"a":1})"}) {
    auto v = req(bad);
    ASSERT_TRUE(std::holds_alternative<ApiError>(v)) << bad;
    EXPECT_EQ(std::get<ApiError>(v).status, 400) << bad;
    EXPECT_TRUE(std::get<ApiError>(v).param.value_or("").starts_with("stop")) << bad;
  }
  // Stops decide the output: they are part of the memo key.
  EXPECT_NE(std::get<GenRequest>(req(R"("a")")).memo_key, std::get<GenRequest>(req(R"("b")")).memo_key);
}

const std::string kDemo = std::string(DELTAFIN_SOURCE_DIR) + "/models/demo";

std::unique_ptr<Engine> demo_engine(bool draft) {
  auto m = Model::open(kDemo, 1);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return nullptr;
  EngineOptions o;
  o.draft.economics = false, o.draft.backoff_max = 0;
  auto e = Engine::create(std::move(m).value(), kDemo, o);
  EXPECT_TRUE(e.ok()) << e.message();
  if (!e.ok()) return nullptr;
  if (draft) (*e)->set_drafter(std::make_unique<NgramDrafter>());
  return std::move(e).value();
}

GenerationOutcome complete(Engine& e, const std::string& prompt, std::vector<std::string> stop, int max_tokens,
                           std::vector<Delta>* streamed = nullptr) {
  GenRequest r;
  r.kind = RequestKind::Completion;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.stop = std::move(stop);
  auto ids = std::get<std::vector<int32_t>>(e.encode(r));
  auto o = e.generate(r, ids, {}, [&](const std::vector<Delta>& d, std::span<const TokenLogprob>) {
    if (streamed) streamed->insert(streamed->end(), d.begin(), d.end());
    return true;
  });
  EXPECT_TRUE(o.ok()) << o.message();
  e.discard();
  return o.ok() ? std::move(o).value() : GenerationOutcome{};
}

TEST(StopStrings, ResponseIsThePlainOneCutBeforeTheStop) {
  for (bool draft : {false, true}) {
    auto e = demo_engine(draft);
    ASSERT_TRUE(e);
    const std::string prompt = "def add(a, b):\n    return a + b\n\n\ndef";
    const GenerationOutcome full = complete(*e, prompt, {}, 64);
    const std::string text = text_of(full.deltas, Channel::Text);
    ASSERT_GT(text.size(), 40u) << text;
    // A stop taken from the middle of the output, which spans token boundaries.
    const std::string stop = text.substr(20, 6);
    const size_t at = text.find(stop);
    std::vector<Delta> streamed;
    const GenerationOutcome cut = complete(*e, prompt, {"never-in-this-output", stop}, 64, &streamed);
    EXPECT_EQ(text_of(cut.deltas, Channel::Text), text.substr(0, at)) << "drafting " << draft;
    EXPECT_EQ(text_of(streamed, Channel::Text), text.substr(0, at));
    EXPECT_EQ(cut.finish_reason, "stop");
    EXPECT_LT(cut.completion_tokens, full.completion_tokens);
    // The tokens are the plain run's up to the one that completed the stop.
    ASSERT_LE(cut.tokens.size(), full.tokens.size());
    EXPECT_TRUE(std::equal(cut.tokens.begin(), cut.tokens.end(), full.tokens.begin()));
    // A stop that never occurs changes nothing.
    const GenerationOutcome same = complete(*e, prompt, {"\x01\x02"}, 64);
    EXPECT_EQ(same.deltas, full.deltas);
    EXPECT_EQ(same.finish_reason, full.finish_reason);
  }
}

}  // namespace
}  // namespace deltafin::server
