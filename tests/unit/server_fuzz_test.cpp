// Fuzzes a live in-process server over raw loopback sockets: random bytes,
// mutated requests, random and mutated JSON bodies. Every non-empty input
// must get exactly one well-formed HTTP response (a JSON error when >= 400)
// within the deadline, and the server must keep serving.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "http_test_client.h"
#include "server/server.h"
#include "test_models.h"

namespace deltafin::server {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kCases = 5000;

// Whether `bytes` look like one complete request (head plus a body of at
// least its Content-Length). The server treats a client that half-closes as
// gone (docs/guide/serving.md), so only incomplete inputs are half-closed: that end
// of input is what lets the server answer them at once.
bool looks_complete(const std::string& bytes) {
  const size_t end = bytes.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  const std::string head = bytes.substr(0, end + 2);
  const size_t cl = head.find("\r\nContent-Length: ");
  if (cl == std::string::npos) return true;
  const uint64_t n = std::strtoull(head.c_str() + cl + 18, nullptr, 10);
  return bytes.size() - end - 4 >= n;
}

// Sends `bytes` on a fresh connection and reads the first response (the
// connection may stay open: keep-alive). Returns false when nothing came
// within the deadline; `reply` empty with true: the server closed silently.
bool exchange(int port, const std::string& bytes, testing::RawResponse& reply, bool& answered, int timeout_ms = 15000) {
  testing::RawClient c(port);
  if (!c.connected()) return false;
  c.send(bytes);  // the server may answer (413, 431) and close before reading everything
  if (!looks_complete(bytes)) c.half_close();
  if (bytes.empty()) {
    answered = false;
    return c.closed_by_server(timeout_ms);
  }
  reply = c.read(timeout_ms);
  answered = true;
  return reply.ok();
}

// Empty string when `reply` is one valid HTTP response as the server must send; else why not.
std::string check_reply(const testing::RawResponse& r) {
  if (r.head.rfind("HTTP/1.1 ", 0) != 0) return "bad status line";
  if (r.status < 200 || r.status > 599) return "bad status code";
  if (r.fields.count("x-request-id") == 0) return "no x-request-id";
  const std::string& body = r.body;
  if (r.field("content-type").rfind("text/event-stream", 0) == 0) {
    if (r.status != 200) return "event stream with an error status";
    if (!r.chunked) return "event stream not chunked";
    if (body.size() < 14 || body.substr(body.size() - 14) != "data: [DONE]\n\n") return "event stream without [DONE]";
    size_t p = 0;
    while (p < body.size()) {
      const size_t e = body.find("\n\n", p);
      if (e == std::string::npos || body.compare(p, 6, "data: ") != 0) return "bad SSE frame";
      const std::string data = body.substr(p + 6, e - p - 6);
      if (data != "[DONE]" && ojson::parse(data, nullptr, false).is_discarded()) return "SSE frame is not JSON";
      p = e + 2;
    }
    return "";
  }
  if (r.chunked || r.fields.count("content-length") == 0) return "no Content-Length";
  const ojson j = ojson::parse(body, nullptr, false);
  if (j.is_discarded()) return "body is not JSON";
  if (r.status >= 400) {
    if (!j.is_object() || !j.contains("error")) return "error without an error object";
    const ojson& e = j["error"];
    if (!e.is_object() || !e["message"].is_string() || !e["type"].is_string() || !e.contains("param") ||
        !e.contains("code"))
      return "error object lacks message/type/param/code";
  }
  return "";
}

class Fuzzer {
 public:
  explicit Fuzzer(uint32_t seed) : rng_(seed) {}

  std::string next() {
    const int kind = pick(100);
    if (kind < 10) return random_bytes(pick(600));
    if (kind < 15) return valid_request();
    if (kind < 40) return mutate(valid_request());
    if (kind < 75) return post(pick(2) ? "/v1/chat/completions" : "/v1/completions", random_json(0).dump());
    return post(pick(2) ? "/v1/chat/completions" : "/v1/completions", mutate(valid_body()));
  }

 private:
  int pick(int n) { return int(rng_() % uint32_t(n)); }

  std::string random_bytes(int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += char(pick(256));
    return s;
  }

  static std::string post(const std::string& path, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }

  std::string valid_body() {
    static const char* bodies[] = {
        R"({"model":"deltafin","messages":[{"role":"user","content":"hi"}],"max_tokens":1})",
        R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]}],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}})",
        R"({"prompt":"ab","max_tokens":2})",
        R"({"prompt":"zz","max_tokens":1,"stream":true,"temperature":0})",
        R"({"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a","reasoning_content":"r"},{"role":"user","content":"q2"}],"max_tokens":1})",
    };
    return bodies[pick(5)];
  }

  std::string valid_request() {
    switch (pick(6)) {
      case 0: return "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
      case 1: return "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
      case 2: return "GET /v1/models/deltafin HTTP/1.0\r\n\r\n";
      case 3: return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n";
      default: return post(pick(2) ? "/v1/chat/completions" : "/v1/completions", valid_body());
    }
  }

  std::string mutate(std::string s) {
    const int n = 1 + pick(4);
    for (int i = 0; i < n && !s.empty(); ++i) {
      const size_t at = size_t(pick(int(s.size())));
      switch (pick(7)) {
        case 0: s[at] = char(pick(256)); break;
        case 1: s.insert(at, 1, char(pick(256))); break;
        case 2: s.erase(at, size_t(1 + pick(8))); break;
        case 3: s.insert(at, s.substr(at, size_t(pick(16)))); break;
        case 4: s.insert(at, pick(2) ? "\r\n" : "\n"); break;
        case 5: s.resize(at); break;
        default: s.insert(at, std::vector<const char*>{"{", "}", "[", "]", "\"", ",", ":", "\\u0000", "1e999", "-"}[size_t(pick(10))]); break;
      }
    }
    return s;
  }

  ojson random_value(int depth) {
    switch (pick(depth > 3 ? 6 : 8)) {
      case 0: return nullptr;
      case 1: return bool(pick(2));
      case 2: return std::vector<int64_t>{0, 1, 2, -1, 4, 5, 100000, INT64_MIN}[size_t(pick(8))];
      case 3: return std::vector<double>{0.5, -0.0, 2.0000001, 1e308, 3.5}[size_t(pick(5))];
      case 4: return std::vector<std::string>{"", "text", "user", "assistant", "system", "tool", "low", "max",
                                              "image_url", "deltafin", "\xF0\x9F\x98\x80", "<|open|>"}[size_t(pick(12))];
      case 5: return ojson::object();
      case 6: {
        ojson a = ojson::array();
        for (int i = pick(4); i > 0; --i) a.push_back(random_value(depth + 1));
        return a;
      }
      default: return random_json(depth + 1);
    }
  }

  ojson random_json(int depth) {
    static const char* keys[] = {"model", "messages", "prompt", "max_tokens", "max_completion_tokens", "stream",
                                 "stream_options", "include_usage", "n", "temperature", "top_p", "stop", "role",
                                 "content", "type", "text", "tools", "reasoning_effort", "seed", "logit_bias",
                                 "user", "name", "reasoning_content", "tool_calls", "echo", "zzz",
                                 "chat_template_kwargs", "thinking", "thinking_effort"};
    ojson o = ojson::object();
    for (int i = pick(6); i > 0; --i) o[keys[pick(int(std::size(keys)))]] = random_value(depth);
    if (depth == 0 && pick(3) == 0) {  // often a plausible message list
      ojson m = {{"role", std::vector<const char*>{"user", "system", "assistant", "tool", "x"}[size_t(pick(5))]},
                 {"content", random_value(depth + 1)}};
      o["messages"] = ojson::array({m});
    }
    return o;
  }

  std::mt19937 rng_;
};

TEST(ServerFuzz, EveryInputGetsOneValidResponseAndTheServerSurvives) {
  auto m = Model::open(testing::tiny_model(11), 1);
  ASSERT_TRUE(m.ok()) << m.message();
  auto e = Engine::create(std::move(m).value(), testing::tiny_model(11), EngineOptions{});
  ASSERT_TRUE(e.ok()) << e.message();
  ServerOptions so;
  so.port = 0;
  so.model_name = "deltafin";
  so.max_tokens = 3;  // every accepted generation stays short
  so.max_request_bytes = 1 << 20;
  so.head_timeout_ms = 500;  // inputs the client thinks complete but the server does not wait this long
  so.body_idle_timeout_ms = 500;
  so.log = [](const std::string&) {};
  Server srv(**e, so);
  ASSERT_TRUE(srv.bind().ok());
  std::thread t([&] { EXPECT_TRUE(srv.serve().ok()); });

  const uint32_t seed = 20261130;
  Fuzzer fz(seed);
  std::map<int, int> statuses;
  int failures = 0;
  for (int i = 0; i < kCases && failures < 5; ++i) {
    const std::string input = fz.next();
    testing::RawResponse reply;
    bool answered = false;
    if (!exchange(srv.port(), input, reply, answered)) {
      ADD_FAILURE() << "case " << i << " (seed " << seed << "): no reply within the deadline (" << reply.error
                    << ")\n--- sent ---\n" << input.substr(0, 400);
      ++failures;
      continue;
    }
    if (!answered) continue;  // nothing asked, nothing owed
    const std::string why = check_reply(reply);
    if (!why.empty()) {
      ADD_FAILURE() << "case " << i << " (seed " << seed << "): " << why << "\n--- sent ---\n"
                    << input.substr(0, 400) << "\n--- got ---\n" << reply.head << "\n\n" << reply.body.substr(0, 600);
      ++failures;
      continue;
    }
    statuses[reply.status]++;
  }
  // Still healthy afterwards, and the fuzz reached both refusals and real generations.
  testing::RawResponse reply;
  bool answered = false;
  ASSERT_TRUE(exchange(srv.port(), "GET /health HTTP/1.1\r\n\r\n", reply, answered));
  EXPECT_EQ(reply.status, 200);
  EXPECT_GT(statuses[200], 150);
  EXPECT_GT(statuses[400], 1000);
  std::string summary;
  for (auto [s, n] : statuses) summary += " " + std::to_string(s) + ":" + std::to_string(n);
  std::printf("fuzz statuses:%s\n", summary.c_str());
  srv.stop();
  t.join();
}

}  // namespace
}  // namespace deltafin::server
