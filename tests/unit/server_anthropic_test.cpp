// The Anthropic Messages API translation: requests into chat bodies (system,
// blocks, tool use and results, thinking, tools, tool_choice, refusals), and
// outcomes into a message and its event stream.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/anthropic.h"

namespace deltafin::server {
namespace {

using nlohmann::ordered_json;

ordered_json chat_of(const std::string& body) {
  auto v = anthropic_to_chat(body);
  EXPECT_TRUE(std::holds_alternative<ordered_json>(v))
      << body << ": " << (std::holds_alternative<ApiError>(v) ? std::get<ApiError>(v).message : "");
  return std::holds_alternative<ordered_json>(v) ? std::get<ordered_json>(v) : ordered_json();
}

TEST(ServerAnthropic, RequestsBecomeChatBodies) {
  const ordered_json c = chat_of(R"({"model":"k3","max_tokens":9,"system":[{"type":"text","text":"Be brief."}],
    "stop_sequences":["END"],"temperature":0.5,"top_k":3,"stream":true,"metadata":{"user_id":"u"},
    "messages":[{"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"need a tool","signature":"s"},
        {"type":"text","text":"Checking."},
        {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"21C"}]},
        {"type":"text","text":"Thanks"}]}],
    "tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object"}}],
    "tool_choice":{"type":"any"},"thinking":{"type":"enabled","budget_tokens":1024}})");
  EXPECT_EQ(c["max_tokens"], 9);
  EXPECT_EQ(c["stop"], ordered_json::parse(R"(["END"])"));
  EXPECT_EQ(c["top_k"], 3);
  EXPECT_EQ(c["stream"], true);
  EXPECT_EQ(c["tool_choice"], "required");
  EXPECT_EQ(c["chat_template_kwargs"]["thinking"], true);
  EXPECT_EQ(c["tools"][0], ordered_json::parse(R"({"type":"function","function":{"name":"get_weather",
    "description":"d","parameters":{"type":"object"}}})"));
  const ordered_json& m = c["messages"];
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], ordered_json::parse(R"({"role":"system","content":"Be brief."})"));
  EXPECT_EQ(m[1]["content"], "Weather in Paris?");
  EXPECT_EQ(m[2]["reasoning_content"], "need a tool");
  EXPECT_EQ(m[2]["content"], "Checking.");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(ordered_json::parse(m[2]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            ordered_json::parse(R"({"city":"Paris"})"));
  EXPECT_EQ(m[3], ordered_json::parse(R"({"role":"tool","tool_call_id":"toolu_1","content":"21C"})"));
  EXPECT_EQ(m[4], ordered_json::parse(R"({"role":"user","content":"Thanks"})"));
  // No thinking unless asked for.
  EXPECT_EQ(chat_of(R"({"max_tokens":1,"messages":[]})")["chat_template_kwargs"]["thinking"], false);
}

TEST(ServerAnthropic, RefusalsNameTheField) {
  struct Bad {
    const char* body;
    const char* param;
  };
  for (const Bad& b : {Bad{R"({"messages":[]})", "max_tokens"},
                       Bad{R"({"max_tokens":1})", "messages"},
                       Bad{R"({"max_tokens":1,"messages":[],"top_a":1})", "top_a"},
                       Bad{R"({"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
                           "messages[0].content[0].type"},
                       Bad{R"({"max_tokens":1,"messages":[{"role":"system","content":"x"}]})", "messages[0].role"},
                       Bad{R"({"max_tokens":1,"messages":[],"tool_choice":{"type":"tool","name":"f"}})", "tool_choice"},
                       Bad{R"({"max_tokens":1,"messages":[],"thinking":{"type":"sometimes"}})", "thinking"},
                       Bad{R"({"max_tokens":1,"messages":[],"tools":[{"type":"web_search_20250305","name":"w"}]})",
                           "tools[0].type"}}) {
    auto v = anthropic_to_chat(b.body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(v)) << b.body;
    EXPECT_EQ(std::get<ApiError>(v).param, b.param) << b.body;
  }
  ApiError e;
  e.status = 404;
  e.message = "no such model";
  EXPECT_EQ(ordered_json::parse(anthropic_error_body(e)),
            ordered_json::parse(R"({"type":"error","error":{"type":"not_found_error","message":"no such model"}})"));
}

TEST(ServerAnthropic, OutcomesBecomeAMessageAndItsEvents) {
  ToolCall call;
  call.id = "call_1_0";
  call.name = "get_weather";
  call.arguments = R"({"city":"Paris"})";
  const std::vector<Delta> deltas = {{Channel::Reasoning, "hm"}, {Channel::Content, "Check"},
                                     {Channel::Content, "ing."}, {Channel::Tool, "", call}};
  AnthropicOutcome o{"msg_1", "k3", "tool_calls", "", 7, 5};
  const ordered_json m = anthropic_message(o, deltas);
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"], ordered_json::parse(R"({"input_tokens":7,"output_tokens":5})"));
  ASSERT_EQ(m["content"].size(), 3u);
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][1], ordered_json::parse(R"({"type":"text","text":"Checking."})"));
  EXPECT_EQ(m["content"][2]["input"], ordered_json::parse(R"({"city":"Paris"})"));
  EXPECT_EQ(anthropic_stop_reason({"", "", "length", "", 0, 0}), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason({"", "", "stop", "END", 0, 0}), "stop_sequence");
  EXPECT_EQ(anthropic_stop_reason({"", "", "stop", "", 0, 0}), "end_turn");

  AnthropicStream s;
  std::string all = s.start("msg_1", "k3", 7);
  for (const Delta& d : deltas) all += s.push(d);
  all += s.finish(o);
  std::vector<std::string> names;
  for (size_t at = 0; (at = all.find("event: ", at)) != std::string::npos; at += 7)
    names.push_back(all.substr(at + 7, all.find('\n', at) - at - 7));
  const std::vector<std::string> want = {
      "message_start",       "content_block_start", "content_block_delta", "content_block_delta",  // thinking + sig
      "content_block_stop",  "content_block_start", "content_block_delta", "content_block_delta",  // text
      "content_block_stop",  "content_block_start", "content_block_delta", "content_block_stop",   // tool_use
      "message_delta",       "message_stop"};
  EXPECT_EQ(names, want);
  EXPECT_NE(all.find(R"("partial_json":"{\"city\":\"Paris\"}")"), std::string::npos);
  EXPECT_NE(all.find(R"("index":2)"), std::string::npos);
}

}  // namespace
}  // namespace deltafin::server
