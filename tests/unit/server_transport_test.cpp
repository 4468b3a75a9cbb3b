// The HTTP transport against a live in-process server on the tiny model, over
// raw loopback sockets: keep-alive, pipelining, 100-continue, chunked bodies
// and streams, the abuse cases of slow and half-sent requests (others stay
// served within a second), limits, the queue, cancellation of a prefill by a
// disconnect, graceful stop, and the request log.
#include <gtest/gtest.h>

#include <dirent.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "http_test_client.h"
#include "live_server.h"

namespace deltafin::server {
namespace {

using testing::LiveServer;
using testing::RawClient;
using testing::RawResponse;
using testing::post_request;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

const std::string kHealth = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

std::string completion(const std::string& prompt, int max_tokens, bool stream = false) {
  return post_request("/v1/completions", nlohmann::json{{"prompt", prompt}, {"max_tokens", max_tokens},
                                                        {"stream", stream}}.dump());
}

// One request on a fresh connection, timed.
RawResponse fetch(int port, const std::string& req, double* ms = nullptr, int timeout_ms = 15000) {
  const auto t0 = Clock::now();
  RawClient c(port);
  c.send(req);
  RawResponse r = c.read(timeout_ms);
  if (ms) *ms = ms_since(t0);
  return r;
}

// Waits (up to `ms`) for a metric to reach a value.
bool wait_metric(LiveServer& s, const std::string& name, double value, int ms = 5000) {
  const auto t0 = Clock::now();
  while (ms_since(t0) < ms) {
    if (s.metric(name) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// CPU time (clock ticks) of each thread of this process.
std::map<int, long> thread_ticks() {
  std::map<int, long> out;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stol(field);
      if (i == 15) stime = std::stol(field);
    }
    out[std::atoi(e->d_name)] = utime + stime;
  }
  if (d) closedir(d);
  return out;
}

// Short enough to wait out, long enough that the other requests of a test are
// served before they expire even under the sanitizers: those tests check that
// the slow connection is still unanswered, not a time.
ServerOptions fast_timeouts() {
  ServerOptions so;
  so.head_timeout_ms = 2000;
  so.body_idle_timeout_ms = 2000;
  return so;
}

TEST(ServerTransport, KeepAliveCarriesFiftyRequestsOnOneConnection) {
  LiveServer s;
  RawClient c(s.port());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(c.send(i % 2 ? kHealth : completion("keep " + std::to_string(i), 2)));
    RawResponse r = c.read();
    ASSERT_TRUE(r.ok()) << i << ": " << r.error;
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.field("connection"), "close");
  }
  EXPECT_EQ(s.metric("deltafin_connections_accepted_total"), 1);
}

TEST(ServerTransport, PipelinedRequestsAreAnsweredInOrder) {
  LiveServer s;
  RawClient c(s.port());
  ASSERT_TRUE(c.send(kHealth + completion("pipe", 2) + "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
  RawResponse a = c.read(), b = c.read(), m = c.read();
  ASSERT_TRUE(a.ok() && b.ok() && m.ok());
  EXPECT_EQ(a.body, R"({"status":"ok"})");
  EXPECT_NE(b.body.find("text_completion"), std::string::npos);
  EXPECT_NE(m.body.find(R"("object":"list")"), std::string::npos);
}

TEST(ServerTransport, HttpOneZeroClosesUnlessAskedToKeepAlive) {
  LiveServer s;
  {
    RawClient c(s.port());
    c.send("GET /health HTTP/1.0\r\n\r\n");
    RawResponse r = c.read();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.field("connection"), "close");
    EXPECT_TRUE(c.closed_by_server());
  }
  RawClient c(s.port());
  c.send("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(c.read().field("connection"), "keep-alive");
  c.send("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(c.read().status, 200);
}

TEST(ServerTransport, ExpectContinueIsAnsweredBeforeTheBodyAndNotWhenRefused) {
  ServerOptions so;
  so.max_request_bytes = 4096;
  LiveServer s(so);
  const std::string body = R"({"prompt":"continue","max_tokens":2})";
  RawClient c(s.port());
  c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n");
  RawResponse interim = c.read(2000);
  ASSERT_TRUE(interim.ok()) << interim.error;
  EXPECT_EQ(interim.status, 100);
  c.send(body);
  RawResponse r = c.read();
  EXPECT_EQ(r.status, 200) << r.body;

  // Over the limit: 413 at once, no 100 first, and the body is never needed.
  RawClient big(s.port());
  big.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n");
  RawResponse refused = big.read(2000);
  EXPECT_EQ(refused.status, 413);
  EXPECT_NE(refused.body.find("request_too_large"), std::string::npos);
}

TEST(ServerTransport, ChunkedRequestBodiesAreReadWithinTheLimit) {
  ServerOptions so;
  so.max_request_bytes = 200;
  LiveServer s(so);
  auto chunked = [](const std::string& body) {
    std::string out = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (size_t i = 0; i < body.size(); i += 10) {
      const std::string part = body.substr(i, 10);
      out += fmt::format("{:x}\r\n{}\r\n", part.size(), part);
    }
    return out + "0\r\n\r\n";
  };
  EXPECT_EQ(fetch(s.port(), chunked(R"({"prompt":"chunks","max_tokens":2})")).status, 200);
  RawResponse big = fetch(s.port(), chunked(R"({"prompt":")" + std::string(300, 'x') + R"(","max_tokens":2})"));
  EXPECT_EQ(big.status, 413);
  EXPECT_NE(big.body.find("request_too_large"), std::string::npos);
}

TEST(ServerTransport, StreamsAreChunkedAndTheConnectionIsReused) {
  LiveServer s;
  RawClient c(s.port());
  c.send(completion("stream", 5, true));
  RawResponse r = c.read();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(r.chunked);
  EXPECT_EQ(r.field("content-type"), "text/event-stream; charset=utf-8");
  ASSERT_GE(r.body.size(), 14u);
  EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
  c.send(kHealth);
  EXPECT_EQ(c.read().status, 200);
}

// Tokens that come sooner than --stream-interval-ms after the last send go out
// together in one chunk; the first token and the end are never held. The
// tiny model decodes 40 tokens in far less than the 2 s interval, so one
// chunk carries the opening, one the first token, and one all the rest;
// every event is still there, in order, and the text is the same as when
// each token is sent as soon as the connection can take it.
TEST(ServerTransport, StreamedTokensWithinTheIntervalShareAChunk) {
  auto stream_of = [](int interval_ms, double* ms) {
    server::ServerOptions so;
    so.stream_interval_ms = interval_ms;
    LiveServer s(so);
    return fetch(s.port(), completion("batch these", 40, true), ms);
  };
  double held_ms = 0, each_ms = 0;
  const RawResponse held = stream_of(2000, &held_ms);
  const RawResponse each = stream_of(0, &each_ms);
  ASSERT_TRUE(held.ok() && each.ok()) << held.error << each.error;
  auto texts = [](const std::string& body) {
    std::string out;
    int events = 0;
    for (size_t pos = 0; (pos = body.find("data: {", pos)) != std::string::npos; ++pos, ++events) {
      const auto j = nlohmann::json::parse(body.substr(pos + 6, body.find('\n', pos) - pos - 6));
      out += j["choices"][0].value("text", "");
    }
    return std::make_pair(out, events);
  };
  const auto [held_text, held_events] = texts(held.body);
  const auto [each_text, each_events] = texts(each.body);
  EXPECT_EQ(held_text, each_text);
  EXPECT_EQ(held_events, each_events);
  ASSERT_GE(each_events, 20);
  // At interval 0 a token joins the one before only while that one's send is still queued.
  EXPECT_GT(each.chunks, held.chunks);
  EXPECT_LE(held.chunks, 3) << "events " << held_events;
  // Held for the interval, the held stream would end about 2 s after the other.
  EXPECT_LT(held_ms - each_ms, 1500) << "the end of the stream was held for the interval";
}

TEST(ServerTransport, SlowHeadTimesOutAndDoesNotBlockOthers) {
  LiveServer s(fast_timeouts());
  RawClient slow(s.port());
  slow.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n");  // and nothing more
  EXPECT_EQ(fetch(s.port(), kHealth).status, 200);
  EXPECT_TRUE(slow.unanswered()) << "health was answered only after the slow head timed out";
  EXPECT_EQ(fetch(s.port(), completion("others", 2)).status, 200);
  EXPECT_TRUE(slow.unanswered()) << "the completion was answered only after the slow head timed out";
  RawResponse r = slow.read(10000);
  EXPECT_EQ(r.status, 408);
  EXPECT_NE(r.body.find("timed out reading the request head"), std::string::npos);
}

TEST(ServerTransport, OversizedHeadsAre431) {
  LiveServer s;
  RawResponse big = fetch(s.port(), "GET /health HTTP/1.1\r\nX-Big: " + std::string(40 * 1024, 'a') + "\r\n\r\n");
  EXPECT_EQ(big.status, 431);
  EXPECT_NE(big.body.find("headers_too_large"), std::string::npos);
  std::string many = "GET /health HTTP/1.1\r\n";
  for (int i = 0; i < 150; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(fetch(s.port(), many + "\r\n").status, 431);
  RawResponse target = fetch(s.port(), "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(target.status, 414);
  EXPECT_EQ(fetch(s.port(), kHealth).status, 200);
}

// Content-Length 100 and 9 bytes sent: the slot is not taken, others are served.
TEST(ServerTransport, SlowBodyHoldsNoSlot) {
  LiveServer s(fast_timeouts());
  RawClient slow(s.port());
  slow.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(fetch(s.port(), completion("not blocked", 3)).status, 200);
  EXPECT_TRUE(slow.unanswered()) << "the completion waited for the slow body's timeout";
  EXPECT_EQ(fetch(s.port(), kHealth).status, 200);
  EXPECT_TRUE(slow.unanswered());
  EXPECT_TRUE(wait_metric(s, "deltafin_generation_running", 0, 1000));  // the slow request never took the slot
  EXPECT_EQ(s.metric("deltafin_generations_total"), 1);
  RawResponse r = slow.read(10000);
  EXPECT_EQ(r.status, 408);
}

// Sockets that send half a head: 64 and then 200 of them, from the same
// address as everyone else. Others and /health are still served.
TEST(ServerTransport, HalfHeadsDoNotLockOthersOut) {
  LiveServer s;  // default limits and timeouts
  std::vector<std::unique_ptr<RawClient>> half;
  for (int n : {64, 200}) {
    while (int(half.size()) < n) {
      half.push_back(std::make_unique<RawClient>(s.port()));
      ASSERT_TRUE(half.back()->connected());
      half.back()->send("GET /health HTTP/1.1\r\nHo");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Served, with the half heads sent and their 10 s timeout not yet run out
    // (the server reclaims the oldest of them to make room, counted below).
    EXPECT_EQ(fetch(s.port(), kHealth).status, 200) << n;
    EXPECT_EQ(fetch(s.port(), "GET /v1/models HTTP/1.1\r\n\r\n").status, 200) << n;
    EXPECT_EQ(fetch(s.port(), completion("served " + std::to_string(n), 2)).status, 200) << n;
  }
  EXPECT_GT(s.metric("deltafin_connections_reclaimed_total"), 100);
  EXPECT_LE(s.metric("deltafin_connections_open"), 64);
}

// A long prefill (about 4K tokens in blocks of 16) whose client disconnects
// frees the slot within about one block, long before the prefill could end.
TEST(ServerTransport, DisconnectDuringPrefillFreesTheSlot) {
  EngineOptions eo;
  eo.prefill_chunk = 16;
  LiveServer s(ServerOptions{}, eo);
  // The prefill rate, from a short prompt.
  double short_ms = 0;
  ASSERT_EQ(fetch(s.port(), completion(std::string(256, 'r'), 1), &short_ms).status, 200);
  const double full_ms = short_ms * 4000 / 256;  // what the whole prefill would take

  RawClient c(s.port());
  c.send(completion(std::string(4000, 'p'), 1));
  ASSERT_TRUE(wait_metric(s, "deltafin_generation_running", 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = Clock::now();
  c.close_now();
  ASSERT_TRUE(wait_metric(s, "deltafin_generation_running", 0, 3000));
  const double freed_ms = ms_since(t0);
  std::printf("slot freed %.1f ms after the disconnect; the whole prefill would take about %.0f ms\n", freed_ms,
              full_ms);
  EXPECT_LT(freed_ms, full_ms / 4) << "full prefill ~" << full_ms << " ms";
  EXPECT_EQ(s.metric("deltafin_generations_cancelled_total"), 1);
  EXPECT_EQ(fetch(s.port(), completion("next", 1)).status, 200);
  bool logged = false;
  for (const auto& line : s.log()) logged = logged || line.find("status=499") != std::string::npos;
  EXPECT_TRUE(logged);
}

// While a generation runs, watching its client for a disconnect costs no CPU:
// the other threads use a small fraction of the generating one's time.
TEST(ServerTransport, WatchingAClientCostsNoCpu) {
  ServerOptions so;
  so.max_tokens = 20000;
  EngineOptions eo;
  eo.max_context = 100000;
  LiveServer s(so, eo);
  RawClient c(s.port());
  c.send(completion("spin", 20000, true));  // streaming: the connection is watched and written to
  ASSERT_TRUE(wait_metric(s, "deltafin_generation_running", 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto a = thread_ticks();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto b = thread_ticks();
  long top = 0, sum = 0;
  for (const auto& [tid, t] : b) {
    const long d = t - (a.count(tid) ? a.at(tid) : 0);
    top = std::max(top, d);
    sum += d;
  }
  EXPECT_GT(top, 20);  // the generating thread ran
  EXPECT_LT(sum - top, top / 4) << "ticks: generating thread " << top << ", all others " << sum - top;
  c.close_now();
  ASSERT_TRUE(wait_metric(s, "deltafin_generation_running", 0));
}

TEST(ServerTransport, ClientLeavingTheQueueIsNeverGeneratedFor) {
  LiveServer s;
  RawClient holder(s.port());
  holder.send(completion("holder", 300));
  ASSERT_TRUE(wait_metric(s, "deltafin_generation_running", 1));
  {
    RawClient leaver(s.port());
    leaver.send(completion("leaver", 5));
    ASSERT_TRUE(wait_metric(s, "deltafin_queue_length", 1));
  }
  ASSERT_TRUE(wait_metric(s, "deltafin_queue_length", 0));
  EXPECT_EQ(s.metric("deltafin_queue_abandoned_total"), 1);
  RawResponse h = holder.read();
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(fetch(s.port(), completion("after", 2)).status, 200);
  EXPECT_EQ(s.metric("deltafin_generations_total"), 2);
}

TEST(ServerTransport, FullQueueIs429WithRetryAfter) {
  ServerOptions so;
  so.queue = 1;
  LiveServer s(so);
  RawClient a(s.port()), b(s.port());
  a.send(completion("a", 300));
  ASSERT_TRUE(wait_metric(s, "deltafin_generation_running", 1));
  b.send(completion("b", 2));
  ASSERT_TRUE(wait_metric(s, "deltafin_queue_length", 1));
  RawResponse c = fetch(s.port(), completion("c", 2));
  EXPECT_EQ(c.status, 429);  // refused at once: a queued request would have got 200
  EXPECT_GE(std::atoi(c.field("retry-after").c_str()), 1);
  EXPECT_EQ(a.read().status, 200);
  RawResponse rb = b.read();
  EXPECT_EQ(rb.status, 200);
  EXPECT_EQ(rb.field("x-deltafin-queue-length"), "0");
  EXPECT_GT(std::atof(rb.field("x-deltafin-queue-wait-ms").c_str()), 0);
}

// stop() during a long prefill: the generation stops between blocks, its
// client gets 503 (a prefill run to its end would have answered 200).
TEST(ServerTransport, StopDuringPrefillReturnsPromptly) {
  EngineOptions eo;
  eo.prefill_chunk = 16;
  auto s = std::make_unique<LiveServer>(ServerOptions{}, eo);
  RawClient c(s->port());
  c.send(completion(std::string(4000, 'q'), 1));
  ASSERT_TRUE(wait_metric(*s, "deltafin_generation_running", 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  s.reset();  // stop() and join
  RawResponse r = c.read(10000);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("server_shutting_down"), std::string::npos);
}

TEST(ServerTransport, EveryRequestIsLoggedAndMetricsNeedTheKey) {
  ServerOptions so;
  so.api_key = "k";
  LiveServer s(so);
  // A request's line is written once its reply is out and the server has let
  // go of it, just after it is counted: a client can read the reply before
  // that, so what a later request should see is awaited through the log.
  auto logged = [&](const std::vector<std::string>& parts) {
    for (int tries = 0; tries < 200; ++tries) {
      for (const auto& l : s.log()) {
        bool all = true;
        for (const auto& p : parts) all = all && l.find(p) != std::string::npos;
        if (all) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  EXPECT_EQ(fetch(s.port(), kHealth).status, 200);
  EXPECT_EQ(fetch(s.port(), "GET /metrics HTTP/1.1\r\n\r\n").status, 401);
  EXPECT_TRUE(logged({"method=GET path=/health status=200"}));
  EXPECT_TRUE(logged({"method=GET path=/metrics status=401"}));
  RawResponse m = fetch(s.port(), "GET /metrics HTTP/1.1\r\nAuthorization: Bearer k\r\n\r\n");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.field("content-type").rfind("text/plain", 0), 0u);
  EXPECT_NE(m.body.find("deltafin_requests_total{status=\"200\"} 1"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("deltafin_requests_total{status=\"401\"} 1"), std::string::npos) << m.body;
  RawResponse g = fetch(s.port(), post_request("/v1/completions", R"({"prompt":"log me","max_tokens":3})",
                                               "Authorization: Bearer k\r\n"));
  EXPECT_EQ(g.status, 200);
  EXPECT_TRUE(logged({"id=" + g.field("x-request-id") + " ", "path=/v1/completions status=200 prompt_tokens=6",
                      "completion_tokens=3", "decode_passes=2"}))
      << [&] {
           std::string all = "id " + g.field("x-request-id") + "; log:\n";
           for (const auto& l : s.log()) all += l + "\n";
           return all;
         }();
  // Tokens, passes and expert bytes of that generation (3 tokens: 2 decode passes without drafting).
  RawResponse m2 = fetch(s.port(), "GET /metrics HTTP/1.1\r\nAuthorization: Bearer k\r\n\r\n");
  EXPECT_NE(m2.body.find("deltafin_completion_tokens_total 3\n"), std::string::npos) << m2.body;
  EXPECT_NE(m2.body.find("deltafin_decode_passes_total 2\n"), std::string::npos) << m2.body;
  EXPECT_NE(m2.body.find("deltafin_draft_accepted_tokens_total 0\n"), std::string::npos) << m2.body;
  EXPECT_EQ(m2.body.find("deltafin_expert_bytes_total 0\n"), std::string::npos) << m2.body;  // experts were used
}

}  // namespace
}  // namespace deltafin::server
