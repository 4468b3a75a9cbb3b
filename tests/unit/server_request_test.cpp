// Strict request validation: accepted defaults, refused fields named in param.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "server/http_transport.h"
#include "server/json_body.h"
#include "server/request.h"

namespace deltafin::server {
namespace {

ValidationLimits limits() {
  ValidationLimits l;
  l.model_name = "m";
  l.max_tokens = 100;
  return l;
}

ApiError refused(RequestKind k, const std::string& body) {
  Validated v = validate_request(k, body, limits());
  EXPECT_TRUE(std::holds_alternative<ApiError>(v)) << body;
  return std::holds_alternative<ApiError>(v) ? std::get<ApiError>(v) : ApiError{};
}

GenRequest accepted(RequestKind k, const std::string& body) {
  Validated v = validate_request(k, body, limits());
  EXPECT_TRUE(std::holds_alternative<GenRequest>(v)) << body << ": "
                                                     << (std::holds_alternative<ApiError>(v) ? std::get<ApiError>(v).message : "");
  return std::holds_alternative<GenRequest>(v) ? std::get<GenRequest>(v) : GenRequest{};
}

constexpr auto Chat = RequestKind::Chat;
constexpr auto Comp = RequestKind::Completion;

TEST(ServerRequest, AcceptsDefaultsThatChangeNothing) {
  GenRequest r = accepted(Chat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],
    "temperature":1.5,"top_p":0.1,"n":1,"stop":null,"logit_bias":{},"seed":3,"user":"u","stream":true,
    "stream_options":{"include_usage":true},"reasoning_effort":" HIGH ","max_completion_tokens":7})");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.thinking_effort, "high");
  EXPECT_EQ(accepted(Chat, R"({"messages":[{"role":"user","content":"a"}]})").max_tokens, 100);
  EXPECT_EQ(accepted(Comp, R"({"prompt":"a"})").max_tokens, 100);  // min(256, ceiling)
}

TEST(ServerRequest, MemoKeyIgnoresTransportOnly) {
  const auto a = accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":5})").memo_key;
  const auto b = accepted(Chat, R"({ "stream":true, "max_tokens":5, "temperature":0, "seed":9,
                                     "messages":[ {"role":"user", "content":"a"} ] })").memo_key;
  EXPECT_EQ(a, b);  // greedy: the seed changes nothing
  EXPECT_NE(a, accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":6})").memo_key);
  EXPECT_NE(a, accepted(Chat, R"({"messages":[{"role":"user","content":"b"}],"max_tokens":5})").memo_key);
  EXPECT_NE(a, accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":5,
                                  "reasoning_effort":"low"})").memo_key);
  EXPECT_NE(a, accepted(Comp, R"({"prompt":"a","max_tokens":5})").memo_key);
  EXPECT_NE(a, accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":5,
                                  "presence_penalty":0.5})").memo_key);
  // Seeded sampling: a key per (parameters, seed); unseeded: none (not memoised).
  const char* seeded = R"({"messages":[{"role":"user","content":"a"}],"max_tokens":5,"temperature":0.5,"seed":1})";
  const auto s1 = accepted(Chat, seeded).memo_key;
  EXPECT_EQ(s1, accepted(Chat, seeded).memo_key);
  EXPECT_NE(s1, a);
  EXPECT_NE(s1, accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":5,"temperature":0.5,
                                   "seed":2})").memo_key);
  EXPECT_NE(s1, accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":5,"temperature":0.5,
                                   "seed":1,"top_k":4})").memo_key);
  const GenRequest u = accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"temperature":0.5})");
  EXPECT_TRUE(u.memo_key.empty());
  EXPECT_FALSE(u.seeded);
}

TEST(ServerRequest, ReadsLogprobsInBothForms) {
  const GenRequest c = accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"logprobs":true,
    "top_logprobs":5})");
  EXPECT_TRUE(c.logprobs);
  EXPECT_EQ(c.top_logprobs, 5);
  EXPECT_TRUE(c.memo_key.empty());  // not memoised
  const GenRequest p = accepted(Comp, R"({"prompt":"a","logprobs":2})");
  EXPECT_TRUE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 2);
  EXPECT_FALSE(accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"logprobs":false})").logprobs);
  EXPECT_FALSE(accepted(Comp, R"({"prompt":"a","logprobs":null})").logprobs);
}

TEST(ServerRequest, ReadsToolsAndToolChoice) {
  const char* tools = R"([{"type":"function","function":{"name":"get_weather","description":"d",
    "parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":false}}])";
  const GenRequest r = accepted(Chat, std::string(R"({"messages":[{"role":"user","content":"a"}],"tools":)") + tools +
                                          R"(,"tool_choice":"required","parallel_tool_calls":true})");
  ASSERT_TRUE(r.tools.is_array());
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.tool_choice, "required");
  const auto plain = accepted(Chat, R"({"messages":[{"role":"user","content":"a"}]})").memo_key;
  EXPECT_NE(r.memo_key, plain);
  EXPECT_TRUE(accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"tools":[]})").tools.is_null());
  struct Bad {
    std::string body;
    const char* param;
  };
  const std::string m = R"({"messages":[{"role":"user","content":"a"}],)";
  const std::string f = R"("tools":[{"type":"function","function":{"name":"f"}}])";
  for (const Bad& b : {Bad{m + R"("tools":{"a":1}})", "tools"},
                       Bad{m + R"("tools":[{"type":"retrieval"}]})", "tools[0].type"},
                       Bad{m + R"("tools":[{"type":"function","function":{"name":"a b"}}]})", "tools[0].function.name"},
                       Bad{m + R"("tools":[{"type":"function","function":{"name":""}}]})", "tools[0].function.name"},
                       Bad{m + R"("tools":[{"type":"function","function":{}}]})", "tools[0].function.name"},
                       Bad{m + R"("tools":[{"type":"function","function":{"name":"f","x":1}}]})", "tools[0].function.x"},
                       Bad{m + R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}]})",
                           "tools[0].function.parameters"},
                       Bad{m + R"("tool_choice":"required"})", "tool_choice"},
                       Bad{m + f + R"(,"tool_choice":"sometimes"})", "tool_choice"},
                       Bad{m + f + R"(,"tool_choice":{"type":"function","function":{"name":"f"}}})", "tool_choice"},
                       Bad{m + f + R"(,"parallel_tool_calls":false})", "parallel_tool_calls"}}) {
    const Validated v = validate_request(Chat, b.body, limits());
    ASSERT_TRUE(std::holds_alternative<ApiError>(v)) << b.body;
    EXPECT_EQ(std::get<ApiError>(v).param, b.param) << b.body << ": " << std::get<ApiError>(v).message;
    EXPECT_EQ(std::get<ApiError>(v).status, 400);
  }
}

TEST(ServerRequest, ReadsTheNumberOfChoices) {
  EXPECT_EQ(accepted(Chat, R"({"messages":[{"role":"user","content":"a"}]})").n, 1);
  const GenRequest r = accepted(Chat, R"({"messages":[{"role":"user","content":"a"}],"n":3,"seed":1,"temperature":1})");
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.memo_key.empty());  // several choices are not memoised
  EXPECT_EQ(accepted(Comp, R"({"prompt":"a","n":16})").n, 16);
}

TEST(ServerRequest, ReadsEverySamplingParameter) {
  const GenRequest r = accepted(Comp, R"({"prompt":"a","temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,
    "presence_penalty":-0.5,"frequency_penalty":1.25,"seed":-3})");
  EXPECT_EQ(r.sampling.temperature, 0.7);
  EXPECT_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.min_p, 0.05);
  EXPECT_EQ(r.sampling.presence_penalty, -0.5);
  EXPECT_EQ(r.sampling.frequency_penalty, 1.25);
  EXPECT_EQ(r.sampling.seed, uint64_t(int64_t(-3)));
  EXPECT_TRUE(r.seeded);
  EXPECT_EQ(accepted(Comp, R"({"prompt":"a","top_k":-1})").sampling.top_k, 0);
  const GenRequest d = accepted(Comp, R"({"prompt":"a","temperature":null,"top_p":null,"seed":null})");
  EXPECT_TRUE(d.sampling.greedy());
  EXPECT_EQ(d.sampling.top_p, 1.0);
}

TEST(ServerRequest, RefusesWhatItCannotHonour) {
  struct Case {
    RequestKind k;
    const char* body;
    const char* param;
    int status;
  };
  const Case cases[] = {
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"bogus":1})", "bogus", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"temperature":-0.1})", "temperature", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"top_p":"1"})", "top_p", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":101})", "max_tokens", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":-1})", "max_tokens", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":1.5})", "max_tokens", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"max_tokens":18446744073709551615})", "max_tokens", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"presence_penalty":2.5})", "presence_penalty", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"frequency_penalty":-2.1})", "frequency_penalty", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"top_k":-2})", "top_k", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"top_k":1.5})", "top_k", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"min_p":1.5})", "min_p", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"seed":1.5})", "seed", 400},
      {Chat, R"({"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]})",
       "messages[0].content[0].type", 400},
      {Chat, R"({"messages":[{"role":"user","content":[{"type":"text","text":"a","cache":1}]}]})",
       "messages[0].content[0].cache", 400},
      {Chat, R"({"messages":[{"role":"developer","content":"a"}]})", "messages[0].role", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a","weight":1}]})", "messages[0].weight", 400},
      {Chat, R"({"messages":[{"role":"user","content":null}]})", "messages[0].content", 400},
      {Chat, R"({"messages":"hi"})", "messages", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"model":"other"})", "model", 404},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"stream":false,"stream_options":{}})", "stream_options", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"stream":true,"stream_options":{"x":1}})",
       "stream_options.x", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"tool_choice":"required"})", "tool_choice", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"modalities":["text","audio"]})", "modalities", 400},
      {Chat, R"({"max_tokens":3})", "messages", 400},
      {Comp, R"({"prompt":["a"]})", "prompt", 400},
      {Comp, R"({"prompt":"a","messages":[]})", "messages", 400},
      {Comp, R"({"prompt":"a","logprobs":6})", "logprobs", 400},
      {Comp, R"({"prompt":"a","n":0})", "n", 400},
      {Comp, R"({"prompt":"a","n":17})", "n", 400},
      {Comp, R"({"prompt":"a","n":1.5})", "n", 400},
      {Comp, R"({"prompt":"a","best_of":2})", "best_of", 400},
      {Comp, R"({"prompt":"a","logprobs":true})", "logprobs", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"logprobs":1})", "logprobs", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"top_logprobs":2})", "top_logprobs", 400},
      {Chat, R"({"messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":21})", "top_logprobs", 400},
      {Comp, R"({})", "prompt", 400},
  };
  for (const Case& c : cases) {
    ApiError e = refused(c.k, c.body);
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param.value_or("<none>"), c.param) << c.body;
    auto j = nlohmann::json::parse(e.body());
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"].contains("type") && j["error"].contains("param") && j["error"].contains("code"));
  }
}

TEST(ServerRequest, MalformedBodiesAreRefusedNotThrown) {
  for (const char* b : {"", "{", "[]", "null", "\"x\"", "{\"messages\":[}", "{\"prompt\":\"\xff\"}"})
    EXPECT_EQ(refused(Comp, b).code, "invalid_json") << b;
  EXPECT_EQ(refused(Chat, std::string(10000, '[')).code, "invalid_json");
}

TEST(ServerHttp, ParsesHeadsStrictly) {
  auto ok = parse_head("POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length:  12 \r\n\r\n");
  ASSERT_TRUE(std::holds_alternative<HttpRequest>(ok));
  EXPECT_EQ(std::get<HttpRequest>(ok).path, "/v1/completions");
  EXPECT_EQ(std::get<HttpRequest>(ok).content_length, 12u);
  EXPECT_EQ(*std::get<HttpRequest>(ok).header("host"), "a");
  auto chunked = parse_head("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_TRUE(std::holds_alternative<HttpRequest>(chunked));
  EXPECT_TRUE(std::get<HttpRequest>(chunked).chunked);
  struct Case {
    const char* head;
    int status;
  };
  for (const Case& c : {Case{"GET / HTTP/2.0\r\n\r\n", 505}, Case{"GET  / HTTP/1.1\r\n\r\n", 400},
                        Case{"GET http://x/ HTTP/1.1\r\n\r\n", 400}, Case{"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
                        Case{"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
                        Case{"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\n", 400}}) {
    auto r = parse_head(c.head);
    ASSERT_TRUE(std::holds_alternative<HeadFailure>(r)) << c.head;
    EXPECT_EQ(std::get<HeadFailure>(r).status, c.status) << c.head;
  }
}

TEST(ServerJsonBody, ScanCountsTopLevelMessagesAndDepth) {
  EXPECT_EQ(scan_body(R"({"messages":[{"role":"user","content":"a,b]"},{"x":[1,2]},"s"]})", 64, 0).messages, 3u);
  EXPECT_EQ(scan_body(R"({"model":"messages","messages":[], "n":1})", 64, 0).messages, 0u);
  EXPECT_EQ(scan_body(R"({"x":{"messages":[1,2,3]},"messages":[ 1 , 2 ]})", 64, 0).messages, 2u);
  EXPECT_EQ(scan_body(R"({"messages\"x":[1,2]})", 64, 0).messages, 0u);
  BodyShape over = scan_body(R"({"messages":[1,2,3,4]})", 64, 3);
  EXPECT_TRUE(over.too_many_messages);
  EXPECT_FALSE(scan_body(R"({"messages":[1,2,3]})", 64, 3).too_many_messages);
  EXPECT_TRUE(scan_body(std::string(65, '['), 64, 0).too_deep);
  EXPECT_FALSE(scan_body(std::string(64, '[') + std::string(64, ']'), 64, 0).too_deep);
  EXPECT_FALSE(scan_body(R"(["[[[[[[[[[[[[[[[[[[[[[[[["])", 3, 0).too_deep);  // brackets in strings do not count
}

TEST(ServerJsonBody, ScanBoundsTheTopLevelPromptsBytes) {
  EXPECT_EQ(scan_body(R"({"prompt":"hello"})", 64, 0).prompt_bytes, 5u);
  // Escapes count one byte each ("\u00e9" decodes to two, "\n" to one): a lower bound.
  EXPECT_EQ(scan_body(R"({"prompt": "a\n\u00e9\"b"})", 64, 0).prompt_bytes, 5u);
  EXPECT_EQ(scan_body(R"({"x":{"prompt":"nested, not counted"},"prompt":"ab"})", 64, 0).prompt_bytes, 2u);
  EXPECT_EQ(scan_body(R"({"prompt":"first","prompt":"xy"})", 64, 0).prompt_bytes, 2u);  // the last one wins
  EXPECT_EQ(scan_body(R"({"prompt":"long one","prompt":7})", 64, 0).prompt_bytes, 0u);
  EXPECT_EQ(scan_body(R"({"prompt":["a","bcd"]})", 64, 0).prompt_bytes, 0u);
  EXPECT_EQ(scan_body(R"({"model":"prompt","n":"abcdef"})", 64, 0).prompt_bytes, 0u);  // a value, not a key
  EXPECT_EQ(scan_body(R"({"prompts":"abc","promp":"abc","p\u0072ompt":"abc"})", 64, 0).prompt_bytes, 0u);
  EXPECT_EQ(scan_body(R"({"messages":[{"role":"user","content":"abc"}]})", 64, 0).messages, 1u);
}

// parse_body builds exactly nlohmann's tree (it only moves strings instead of copying).
TEST(ServerJsonBody, ParseEqualsNlohmannOnValidAndBrokenBodies) {
  std::mt19937 rng(7);
  const std::vector<std::string> seeds = {
      R"({"messages":[{"role":"user","content":"h\u00e9llo"}],"max_tokens":3,"x":[1,2.5,-3,true,null,{}]})",
      R"({"a":1,"a":2,"b":{"c":[[],[{}],"\ud83d\ude00"]}})", R"([1,2,3])", R"("just a string")", R"(12)", R"({})"};
  for (int i = 0; i < 3000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    for (int k = int(rng() % 3); k > 0 && !s.empty(); --k) {
      const size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[at] = "{}[],:\"x1 \xff"[rng() % 12]; break;
        case 1: s.erase(at, 1); break;
        default: s.insert(at, 1, "{}[],:\"x1"[rng() % 10]); break;
      }
    }
    const auto want = nlohmann::ordered_json::parse(s, nullptr, false);
    const auto got = parse_body(s);
    ASSERT_EQ(got.is_discarded(), want.is_discarded()) << s;
    if (!want.is_discarded()) {
      ASSERT_EQ(got, want) << s;
      ASSERT_EQ(got.dump(), want.dump()) << s;  // key order too
    }
  }
}

// A 10 MB body of 300,000 one-character messages is refused by its shape, at once.
TEST(ServerJsonBody, HugeMessageListsAreRefusedBeforeParsing) {
  std::string body = R"({"messages":[)";
  for (int i = 0; i < 300000; ++i) body += std::string(i ? "," : "") + R"({"role":"user","content":"a"})";
  body += "]}";
  ValidationLimits l = limits();
  l.max_messages = 8192;
  const auto t0 = std::chrono::steady_clock::now();
  ApiError e = std::get<ApiError>(validate_request(Chat, body, l));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.param, "messages");
  EXPECT_LT(s, 1.0);
}

// A prompt with more bytes than the context's tokens can hold is refused
// before any tree is built; one at the bound goes on to be parsed.
TEST(ServerRequest, PromptOverTheByteBoundIsRefusedBeforeParsing) {
  ValidationLimits l;
  l.model_name = "demo";
  l.max_context = 8;
  l.max_token_bytes = 4;
  l.max_prompt_bytes = 32;
  auto body = [](size_t n) { return R"({"prompt":")" + std::string(n, 'x') + R"(","max_tokens":1})"; };
  ApiError e = std::get<ApiError>(validate_request(Comp, body(33), l));
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("at least 9 tokens (33 bytes)"), std::string::npos) << e.message;
  EXPECT_EQ(std::get<GenRequest>(validate_request(Comp, body(32), l)).prompt, std::string(32, 'x'));
  // Broken JSON past the bound is refused for its length, within the bound for its syntax.
  EXPECT_EQ(std::get<ApiError>(validate_request(Comp, body(33) + "}", l)).code,
            "context_length_exceeded");
  EXPECT_EQ(std::get<ApiError>(validate_request(Comp, body(3) + "}", l)).code, "invalid_json");
}

}  // namespace
}  // namespace deltafin::server
