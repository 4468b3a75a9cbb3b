// chat_template_kwargs on /v1/chat/completions: the template's `thinking`
// and `thinking_effort` (vLLM's convention), validated strictly, part of the
// memo key, and what the engine renders.
#include <gtest/gtest.h>

#include "server/engine.h"
#include "server/output_filter.h"
#include "server/request.h"
#include "test_models.h"
#include "tokenizer/chat.h"

namespace deltafin::server {
namespace {

const ValidationLimits& limits() {
  static const ValidationLimits l{"m", 100};
  return l;
}

std::string chat(const std::string& extra) {
  std::string body = R"({"messages":[{"role":"user","content":"a"}])";
  body.append(extra);
  body.push_back('}');
  return body;
}

TEST(ServerChatKwargs, ThinkingAndEffortAreRead) {
  auto v = validate_request(RequestKind::Chat, chat(""), limits());
  ASSERT_TRUE(std::holds_alternative<GenRequest>(v));
  EXPECT_TRUE(std::get<GenRequest>(v).thinking);
  EXPECT_EQ(std::get<GenRequest>(v).thinking_effort, "max");

  v = validate_request(RequestKind::Chat, chat(R"(,"chat_template_kwargs":{"thinking":false})"), limits());
  ASSERT_TRUE(std::holds_alternative<GenRequest>(v));
  EXPECT_FALSE(std::get<GenRequest>(v).thinking);

  v = validate_request(RequestKind::Chat, chat(R"(,"chat_template_kwargs":{"thinking_effort":"low"})"), limits());
  ASSERT_TRUE(std::holds_alternative<GenRequest>(v));
  EXPECT_TRUE(std::get<GenRequest>(v).thinking);
  EXPECT_EQ(std::get<GenRequest>(v).thinking_effort, "low");

  v = validate_request(RequestKind::Chat, chat(R"(,"chat_template_kwargs":{"thinking_effort":null})"), limits());
  ASSERT_TRUE(std::holds_alternative<GenRequest>(v));
  EXPECT_EQ(std::get<GenRequest>(v).thinking_effort, std::nullopt);

  // Qwen3's name for the switch.
  v = validate_request(RequestKind::Chat, chat(R"(,"chat_template_kwargs":{"enable_thinking":false})"), limits());
  ASSERT_TRUE(std::holds_alternative<GenRequest>(v));
  EXPECT_FALSE(std::get<GenRequest>(v).thinking);

  v = validate_request(RequestKind::Chat, chat(R"(,"chat_template_kwargs":null)"), limits());
  ASSERT_TRUE(std::holds_alternative<GenRequest>(v));
  EXPECT_EQ(std::get<GenRequest>(v).thinking_effort, "max");
}

TEST(ServerChatKwargs, BadValuesAreRefusedNamingTheField) {
  for (const char* extra : {R"(,"chat_template_kwargs":{"thinking":"no"})",
                            R"(,"chat_template_kwargs":{"thinking_effort":"medium"})",
                            R"(,"chat_template_kwargs":{"thinking_effort":"HIGH"})",
                            R"(,"chat_template_kwargs":{"enable_thinking":"yes"})",
                            R"(,"chat_template_kwargs":{"enable_thinking":true,"thinking":false})",
                            R"(,"chat_template_kwargs":{"enable_templating":true})",
                            R"(,"chat_template_kwargs":[])",
                            R"(,"chat_template_kwargs":{"thinking_effort":"low"},"reasoning_effort":"high")"}) {
    auto v = validate_request(RequestKind::Chat, chat(extra), limits());
    ASSERT_TRUE(std::holds_alternative<ApiError>(v)) << extra;
    EXPECT_EQ(std::get<ApiError>(v).status, 400) << extra;
    EXPECT_EQ(std::get<ApiError>(v).param, "chat_template_kwargs") << extra;
  }
  // Completions have no template.
  auto v = validate_request(RequestKind::Completion, R"({"prompt":"a","chat_template_kwargs":{}})", limits());
  ASSERT_TRUE(std::holds_alternative<ApiError>(v));
  EXPECT_EQ(std::get<ApiError>(v).param, "chat_template_kwargs");
}

TEST(ServerChatKwargs, TheyArePartOfTheMemoKey) {
  const auto key = [](const std::string& extra) {
    auto v = validate_request(RequestKind::Chat, chat(extra), limits());
    EXPECT_TRUE(std::holds_alternative<GenRequest>(v)) << extra;
    return std::holds_alternative<GenRequest>(v) ? std::get<GenRequest>(v).memo_key : std::string();
  };
  const std::string base = key("");
  EXPECT_EQ(base, key(R"(,"chat_template_kwargs":{"thinking":true,"thinking_effort":"max"})"));
  EXPECT_NE(base, key(R"(,"chat_template_kwargs":{"thinking":false})"));
  EXPECT_NE(base, key(R"(,"chat_template_kwargs":{"thinking_effort":null})"));
  EXPECT_EQ(key(R"(,"reasoning_effort":"low")"), key(R"(,"chat_template_kwargs":{"thinking_effort":"low"})"));
}

TEST(ServerChatKwargs, TheEngineRendersThemAndNonThinkingOutputIsContent) {
  auto m = Model::open(testing::tiny_model(11), 1);
  ASSERT_TRUE(m.ok()) << m.message();
  auto e = Engine::create(std::move(m).value(), testing::tiny_model(11), EngineOptions{});
  ASSERT_TRUE(e.ok()) << e.message();
  GenRequest r;
  r.kind = RequestKind::Chat;
  r.messages = nlohmann::ordered_json::parse(R"([{"role":"user","content":"hi"}])");
  r.max_tokens = 4;
  r.thinking = false;
  r.thinking_effort = "low";  // ignored by the template when not thinking
  auto v = (*e)->encode(r);
  ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(v));
  tokenizer::ChatOptions o;
  o.thinking = false;
  auto want = tokenizer::encode_chat((*e)->tokenizer(), r.messages, o);
  ASSERT_TRUE(want.ok()) << want.message();
  EXPECT_EQ(std::get<std::vector<int32_t>>(v), std::vector<int32_t>(want->begin(), want->end()));

  // After `<|open|>response<|sep|>` the model's text is the answer, not reasoning.
  auto f = OutputFilter::create((*e)->tokenizer(), /*chat=*/true, /*thinking=*/false);
  ASSERT_TRUE(f.ok());
  auto ids = (*e)->tokenizer().encode("Yes.<|close|>response<|sep|><|close|>message<|sep|>", true);
  ASSERT_TRUE(ids.ok());
  std::vector<Delta> out;
  for (uint32_t id : *ids) ASSERT_TRUE(f->push(id, out).ok());
  ASSERT_TRUE(f->finish(out).ok());
  std::string content;
  for (const auto& d : out) {
    EXPECT_EQ(d.channel, Channel::Content);
    content += d.text;
  }
  EXPECT_EQ(content, "Yes.");
}

}  // namespace
}  // namespace deltafin::server
