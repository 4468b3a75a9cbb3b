// `deltafin serve`: an OpenAI-compatible HTTP front end on one Engine.
// Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models
// (and /v1/models/{id}), GET /metrics, GET /health; the /v1 prefix is
// optional. See docs/guide/serving.md.
//
// A generation request goes: head (routing, auth, 411/413, on a transport
// thread) -> body read -> validation, memo lookup and tokenisation (on the
// "prepare" thread) -> the bounded FIFO queue -> the one generation thread,
// which owns the Engine. So the slot is only ever taken by a request that is
// fully read, parsed and validated, and /health, /v1/models and /metrics are
// answered from the transport threads whatever the queue holds. A client that
// leaves while queued leaves the queue; one that leaves while generating
// stops it before the next layer.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "server/engine.h"
#include "server/fifo.h"
#include "server/http_transport.h"
#include "server/memo.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/responses.h"

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
  size_t queue = 16;  // requests that may wait for the slot; more get 429
  int max_connections = 256;
  int max_client_connections = 64;
  int head_timeout_ms = 10000;
  int body_idle_timeout_ms = 30000;
  int send_timeout_ms = 30000;
  int stream_interval_ms = 5;  // streamed tokens closer than this are sent together
  int io_threads = 2;
  // Receives the request log (one line per request, one more per 5xx); stderr when empty.
  std::function<void(const std::string&)> log;
};

// True when every address `host` resolves to is a loopback address.
Result<bool> is_loopback_host(const std::string& host);

struct GenerationJob;

class Server : private HttpHandler {
 public:
  Server(Engine& engine, ServerOptions opt);
  ~Server() override;
  // Refuses a non-loopback host without an API key, then binds and listens.
  Status bind();
  int port() const { return transport_->port(); }
  // Serves until stop(); then answers or cancels what is queued and running
  // and returns once the connections have closed.
  Status serve();
  // Async-signal-safe: a flag and a pipe write.
  void stop() { transport_->stop(); }
  std::string metrics_text() const;

 private:
  std::optional<HttpResponse> on_head(const HttpRequest& req) override;
  void on_request(std::shared_ptr<Exchange> ex) override;
  void on_done(const RequestRecord& r) override;
  void on_stopping() override;

  void prepare(const std::shared_ptr<Exchange>& ex, RequestKind kind);
  void replay_memo(Exchange& ex, const GenRequest& r, const ResponseMeta& meta, const MemoEntry& hit);
  void generation_loop();
  void run_job(GenerationJob& job);
  void run_anthropic(GenerationJob& job);  // POST /v1/messages (server/anthropic.h)
  HeaderList start_job(const GenerationJob& job, double waited);
  void record(const GenerationOutcome& o);
  ApiError generation_error(const Result<GenerationOutcome>& result, const std::string& id);
  bool authorized(const HttpRequest& req) const;
  std::string next_id(RequestKind kind);
  void log(const std::string& line) const;

  // The prepare thread: validation and tokenisation off the transport threads.
  void prepare_loop();
  void post_prepare(std::function<void()> task);

  Engine& engine_;
  uint64_t generations_served_ = 0;  // the generation thread's count: x-deltafin-generation
  ServerOptions opt_;
  ValidationLimits limits_;
  ResponseMemo memo_;
  ServerMetrics metrics_;
  BoundedFifo<GenerationJob> queue_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> seq_{0};

  mutable std::mutex running_mu_;
  GenerationJob* running_ = nullptr;  // the job holding the slot (guarded by running_mu_)

  std::mutex prep_mu_;
  std::condition_variable prep_cv_;
  std::deque<std::function<void()>> prep_tasks_;
  bool prep_closed_ = false;

  std::thread generation_thread_, prepare_thread_;
  // Last: destroyed first, while the members its callbacks use still live.
  std::unique_ptr<HttpTransport> transport_;
};

}  // namespace deltafin::server
