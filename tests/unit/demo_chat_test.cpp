// The demo model answers in chat (docs/DEMO_MODEL.md, "Chat tuning"): for
// questions of the three kinds it was tuned on, worded afresh, its greedy
// reply has a response (with thinking on, the think channel was closed), with
// thinking on and off, and at least 7 of the 8 end the message themselves
// (finish "stop", not "length"). Before the chat tuning every reply stayed in
// the think channel (0 of 8). With the tool tuning one reply (complete, with
// thinking off) loops until the limit, as the docs say.
#include <gtest/gtest.h>

#include <iostream>
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

TEST(DemoChat, RepliesCloseTheThinkChannelAndEndTheMessage) {
  auto m = Model::open(kDemo, 2);
  ASSERT_TRUE(m.ok()) << m.message();
  auto e = Engine::create(std::move(m).value(), kDemo, EngineOptions{});
  ASSERT_TRUE(e.ok()) << e.message();
  const std::vector<std::string> questions = {
      "What does `urlsplit` do?",
      "Explain `make_archive`.",
      "Write a Python function `clamp(value, low, high)`.",
      "Complete this code:\n```python\ndef mean(values):\n    total = 0\n```",
  };
  int ended = 0, asked = 0;
  std::string looped;
  for (bool thinking : {true, false}) {
    for (const std::string& q : questions) {
      GenRequest r;
      r.kind = RequestKind::Chat;
      r.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", q}}});
      r.thinking = thinking;
      r.max_tokens = 200;
      auto ids = e.value()->encode(r);
      ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(ids));
      auto o = e.value()->generate(r, std::get<std::vector<int32_t>>(ids), {},
                                   [](const std::vector<Delta>&, std::span<const TokenLogprob>) { return true; });
      ASSERT_TRUE(o.ok()) << o.message();
      e.value()->discard();
      const std::string content = channel_text(o->deltas, Channel::Content);
      const std::string reasoning = channel_text(o->deltas, Channel::Reasoning);
      EXPECT_FALSE(content.empty()) << q << " (thinking " << thinking << "): reasoning " << reasoning;
      ++asked;
      if (o->finish_reason == "stop") ++ended;
      else looped += q + " (thinking " + std::to_string(thinking) + "): " + o->finish_reason + "\n";
      if (!thinking) {
        EXPECT_TRUE(reasoning.empty()) << q;
      }
    }
  }
  EXPECT_GE(ended, 7) << ended << " of " << asked << " replies ended the message; the others:\n" << looped;
  std::cout << ended << " of " << asked << " replies ended the message\n" << looped;
}

}  // namespace
}  // namespace deltafin::server
