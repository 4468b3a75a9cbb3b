// `deltafin serve`: an OpenAI-compatible HTTP front end on one Engine.
// Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models
// (and /v1/models/{id}), GET /health; the /v1 prefix is optional. One
// generation at a time: the permit is taken before the body is read, and a
// second generation request gets 429 at once. See docs/SERVER.md.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "server/engine.h"
#include "server/http.h"
#include "server/memo.h"
#include "server/request.h"

namespace deltafin::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see Server::port())
  std::string api_key;
  uint64_t max_request_bytes = 128ull << 20;
  std::string model_name = "deltafin";
  int max_tokens = 4096;
  size_t memo_entries = 32;
  uint64_t memo_bytes = 64ull << 20;
  int max_connections = 64;
  int head_timeout_ms = 10000;
  int body_idle_timeout_ms = 30000;
};

// True when every address `host` resolves to is a loopback address.
Result<bool> is_loopback_host(const std::string& host);

class Server {
 public:
  Server(Engine& engine, ServerOptions opt);
  ~Server();
  // Refuses a non-loopback host without an API key, then binds and listens.
  Status bind();
  int port() const { return port_; }
  // Accepts until stop(); then waits for open connections to finish.
  Status serve();
  // Async-signal-safe: sets a flag and wakes the accept loop.
  void stop();

 private:
  void handle(int fd);
  void handle_generation(HttpConnection& conn, const HttpRequest& req, RequestKind kind);
  bool authorized(const HttpRequest& req) const;
  std::string next_id(RequestKind kind);

  Engine& engine_;
  ServerOptions opt_;
  ValidationLimits limits_;
  ResponseMemo memo_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> busy_{false};  // the single generation permit
  std::mutex engine_mu_;           // held from generate() until its result is published
  std::atomic<uint64_t> seq_{0};
  std::mutex conn_mu_;
  std::condition_variable conn_cv_;
  int active_ = 0;
};

}  // namespace deltafin::server
