// chat_template_kwargs on /v1/chat/completions: the template's `thinking`
// and `thinking_effort` (vLLM's convention), validated strictly, part of the
// memo key, and what the engine renders.
#include <gtest/gtest.h>

#include "server/request.h"

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

  v = validate_request(RequestKind::Chat, chat(R"(,"chat_template_kwargs":null)"), limits());
  ASSERT_TRUE(std::holds_alternative<GenRequest>(v));
  EXPECT_EQ(std::get<GenRequest>(v).thinking_effort, "max");
}

TEST(ServerChatKwargs, BadValuesAreRefusedNamingTheField) {
  for (const char* extra : {R"(,"chat_template_kwargs":{"thinking":"no"})",
                            R"(,"chat_template_kwargs":{"thinking_effort":"medium"})",
                            R"(,"chat_template_kwargs":{"thinking_effort":"HIGH"})",
                            R"(,"chat_template_kwargs":{"enable_thinking":true})",
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

}  // namespace
}  // namespace deltafin::server
