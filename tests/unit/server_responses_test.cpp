// Response bodies and SSE chunks for tool calls, choices and log probabilities.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/responses.h"

namespace deltafin::server {
namespace {

using nlohmann::json;

ToolCall call(size_t i, const char* name, const char* args) {
  ToolCall c;
  c.index = i;
  c.id = "call_1_" + std::to_string(i);
  c.name = name;
  c.arguments = args;
  return c;
}

json parse_frame(const std::string& frame) {
  EXPECT_EQ(frame.rfind("data: ", 0), 0u) << frame;
  return json::parse(frame.substr(6));
}

TEST(ServerResponses, ToolCallsInTheMessageAndInStreamDeltas) {
  ResponseMeta m{RequestKind::Chat, "chatcmpl-1", "k3", 1, 0};
  const std::vector<Delta> deltas = {{Channel::Reasoning, "hm"},
                                     {Channel::Content, "Checking."},
                                     {Channel::Tool, "", call(0, "get_weather", R"({"city":"Paris"})")},
                                     {Channel::Tool, "", call(1, "no_args", "{}")}};
  const json body = json::parse(dump_json(full_response(m, deltas, "tool_calls", Usage{5, 9, 0})));
  const json& msg = body["choices"][0]["message"];
  EXPECT_EQ(msg["content"], "Checking.");
  EXPECT_EQ(msg["reasoning_content"], "hm");
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  EXPECT_EQ(msg["tool_calls"][0], json::parse(R"({"id":"call_1_0","type":"function",
    "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}})"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  const json chunk = parse_frame(sse_delta(m, deltas[3], false));
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "no_args");
  // Without calls there is no tool_calls field (clients read its absence).
  const json plain = json::parse(dump_json(full_response(m, {deltas[1]}, "stop", Usage{})));
  EXPECT_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
}

// "timings": rates from the counts and times; null where there is nothing to
// divide (one token has no decode steps); on the usage chunk and the body.
TEST(ServerResponses, TimingsGiveRatesAndNullWhereUndefined) {
  const Timings t{100, 41, 0.25, 0.5, 3'000'000};
  const json j = json::parse(t.to_json().dump());
  EXPECT_EQ(j["prefill_tokens"], 100);
  EXPECT_DOUBLE_EQ(j["prefill_ms"].get<double>(), 250.0);
  EXPECT_DOUBLE_EQ(j["prefill_tokens_per_second"].get<double>(), 400.0);
  EXPECT_EQ(j["completion_tokens"], 41);
  EXPECT_DOUBLE_EQ(j["decode_ms"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(j["decode_tokens_per_second"].get<double>(), 80.0);  // 40 steps after the first token
  EXPECT_EQ(j["expert_bytes"], 3000000);
  EXPECT_DOUBLE_EQ(j["expert_mb_per_second"].get<double>(), 4.0);       // 3 MB over 0.75 s
  const json one = json::parse(Timings{5, 1, 0.01, 0.0, 0}.to_json().dump());
  EXPECT_TRUE(one["decode_tokens_per_second"].is_null());
  EXPECT_TRUE(one["expert_mb_per_second"].is_null());

  ResponseMeta m;
  m.kind = RequestKind::Completion;
  const Usage u{10, 41, 0};
  const std::string frame = sse_usage(m, u, &t);
  const json chunk = json::parse(frame.substr(6));
  EXPECT_EQ(chunk["timings"], j);
  EXPECT_FALSE(json::parse(sse_usage(m, u).substr(6)).contains("timings"));
  EXPECT_EQ(json::parse(full_response(m, {}, "stop", u, nullptr, &t).dump())["timings"], j);
  EXPECT_FALSE(json::parse(full_response(m, {}, "stop", u).dump()).contains("timings"));
}

TEST(ServerResponses, ChoiceIndexAndLogprobShapes) {
  ResponseMeta m{RequestKind::Completion, "cmpl-1", "k3", 1, 2};
  TokenLogprob a{"ab", -0.5, {{"ab", -0.5}, {"a", -1.5}}, 0}, b{"\xff", -2.0, {{"\xfe", -1.0}, {"\xff", -2.0}}, 2};
  const std::vector<TokenLogprob> lp = {a, b};
  const std::span<const TokenLogprob> all(lp);
  const json body = json::parse(dump_json(full_response(m, {{Channel::Text, "ab?"}}, "length", Usage{}, &all)));
  const json& c = body["choices"][0];
  EXPECT_EQ(c["index"], 2);
  EXPECT_EQ(c["logprobs"]["tokens"], json::parse(R"(["ab", "\ufffd"])"));
  EXPECT_EQ(c["logprobs"]["token_logprobs"], json::parse("[-0.5, -2.0]"));
  EXPECT_EQ(c["logprobs"]["text_offset"], json::parse("[0, 2]"));
  // Two invalid spellings read as one key by a client: the likelier is kept.
  EXPECT_EQ(c["logprobs"]["top_logprobs"][1], json::parse(R"({"\ufffd": -1.0})"));
  ResponseMeta cm{RequestKind::Chat, "chatcmpl-1", "k3", 1, 0};
  const json chat = parse_frame(sse_delta(cm, {Channel::Content, "ab"}, false, &all));
  const json& e = chat["choices"][0]["logprobs"]["content"][1];
  EXPECT_EQ(e["bytes"], json::parse("[255]"));
  EXPECT_EQ(e["top_logprobs"][0]["bytes"], json::parse("[254]"));
  EXPECT_TRUE(parse_frame(sse_delta(cm, {Channel::Content, "x"}, false))["choices"][0]["logprobs"].is_null());
}

}  // namespace
}  // namespace deltafin::server
