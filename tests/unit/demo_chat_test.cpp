// The demo model answers in chat (docs/design/demo-model.md, "Chat tuning"):
// for questions of the three kinds it was tuned on, worded afresh, its greedy
// reply has a response (with thinking on, the think channel was closed), with
// thinking on and off. Greedy decoding is deterministic, so each of the eight
// outcomes is pinned: how it finished, how many tokens it took and how its
// answer begins. Seven end the message themselves (finish "stop"); one
// (complete, with thinking off) loops until the limit since the tool tuning,
// as the docs say. Before the chat tuning every reply stayed in the think
// channel. A change here is a change of the engine's numbers or of the model:
// say which, and pin the new outcomes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/engine.h"
#include "server/request.h"

namespace deltafin::server {
namespace {

const std::string kDemo = std::string(DELTAFIN_SOURCE_DIR) + "/models/demo";

std::string channel_text(const std::vector<Delta>& ds, Channel c) {
  std::string s;
  for (const Delta& d : ds)
    if (d.channel == c) s += d.text;
  return s;
}

struct Pinned {
  const char* question;
  bool thinking;
  const char* finish;   // "stop" or "length"
  size_t tokens;        // generated ids, the stop token included
  const char* opening;  // the first bytes of the answer (content channel)
};

TEST(DemoChat, EachGreedyReplyIsPinned) {
  auto m = Model::open(kDemo, 2);
  ASSERT_TRUE(m.ok()) << m.message();
  auto e = Engine::create(std::move(m).value(), kDemo, EngineOptions{});
  ASSERT_TRUE(e.ok()) << e.message();
  const std::vector<Pinned> pinned = {
      // question, thinking, finish, tokens, opening of the answer
      {"What does `urlsplit` do?", true, "stop", 42, "Return the file position"},
      {"Explain `make_archive`.", true, "stop", 43, "Return the current file "},
      {"Write a Python function `clamp(value, low, high)`.", true, "stop", 67, "```python\ndef reset(self"},
      {"Complete this code:\n```python\ndef mean(values):\n    total = 0\n```", true, "stop", 60, "```python\n    if not in "},
      {"What does `urlsplit` do?", false, "stop", 14, "Return the current file "},
      {"Explain `make_archive`.", false, "stop", 13, "Return the file position"},
      {"Write a Python function `clamp(value, low, high)`.", false, "stop", 85, "```python\ndef getregentr"},
      {"Complete this code:\n```python\ndef mean(values):\n    total = 0\n```", false, "length", 200, "```python\n    if not in "},
  };
  ASSERT_EQ(pinned.size(), 8u);
  for (const Pinned& p : pinned) {
    SCOPED_TRACE(std::string(p.question) + (p.thinking ? " (thinking on)" : " (thinking off)"));
    GenRequest r;
    r.kind = RequestKind::Chat;
    r.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", p.question}}});
    r.thinking = p.thinking;
    r.max_tokens = 200;
    auto ids = e.value()->encode(r);
    ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(ids));
    auto o = e.value()->generate(r, std::get<std::vector<int32_t>>(ids), {},
                                 [](const std::vector<Delta>&, std::span<const TokenLogprob>) { return true; });
    ASSERT_TRUE(o.ok()) << o.message();
    e.value()->discard();
    const std::string content = channel_text(o->deltas, Channel::Content);
    const std::string reasoning = channel_text(o->deltas, Channel::Reasoning);
    const std::string opening(p.opening);
    EXPECT_EQ(o->finish_reason, p.finish);
    EXPECT_EQ(o->tokens.size(), p.tokens);
    EXPECT_EQ(content.substr(0, opening.size()), opening) << "content: " << content;
    EXPECT_FALSE(content.empty()) << "reasoning: " << reasoning;
    if (!p.thinking) {
      EXPECT_TRUE(reasoning.empty());
    }
  }
}

}  // namespace
}  // namespace deltafin::server
