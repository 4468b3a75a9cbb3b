// The HTTP/1.1 transport of `deltafin serve`, on Boost.Beast and Boost.Asio
// (Debian's libboost-dev, header-only). It owns sockets, parsing, limits and
// timeouts; what a request means is the HttpHandler's business.
//
// Per connection: keep-alive (HTTP/1.1 by default, 1.0 on request), one
// request at a time (pipelined bytes wait in the buffer); the head must
// arrive within the head timeout (also the keep-alive idle timeout); the
// handler decides from the head alone whether to read the body (so 401, 404,
// 411 and 413 are answered before a body byte is read); `Expect:
// 100-continue` is answered just before the body is read; a body may stall
// at most the body idle timeout between bytes; every write at most the send
// timeout. While a request is being handled the socket is watched: the
// client closing, resetting or half-closing its side marks the request gone
// (Exchange::gone), which is how a queued or running generation learns that
// nobody waits for it. Streaming replies use chunked transfer encoding
// (HTTP/1.0: the stream ends with the connection).
//
// Connection limits: a total and a per-client-address limit. A connection
// over a limit takes the place of the longest-waiting connection that is
// still reading a head or body (of the same address when that address is at
// its limit); only when none is reading is it refused with 503. So sockets
// that never finish a head cannot keep /health or anyone else out.
//
// Threads: a few I/O threads run all connections (no thread per socket);
// handler calls arrive on them and must not block. Exchange methods are
// thread-safe.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.h"
#include "server/api_error.h"

namespace deltafin::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method, target, path;  // path: target without the query
  unsigned version = 11;             // 10 or 11
  HeaderList headers;                // names lower-cased, in order
  std::optional<uint64_t> content_length;
  bool chunked = false;              // Transfer-Encoding: chunked
  std::string body;                  // filled once read
  std::string client;                // peer address
  std::string id;                    // request id, sent back as x-request-id
  const std::string* header(std::string_view lower_name) const;
  bool has_body() const { return chunked || content_length.value_or(0) > 0; }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;
};

HttpResponse error_response(const ApiError& e, HeaderList headers = {});
ApiError transport_error(int status, std::string message, std::string code,
                         std::string type = "invalid_request_error");

// A head that could not be accepted: `status` 0 means answer nothing.
struct HeadFailure {
  int status = 0;
  ApiError error;
};

constexpr size_t kMaxHeadBytes = 32 * 1024;

// Parses one complete head ("...\r\n\r\n") with the transport's parser and
// rules; for tests and tools.
std::variant<HttpRequest, HeadFailure> parse_head(std::string_view head);

class Connection;

// One request and its reply. Reply with respond() once, or with
// begin_stream(), write()..., end_stream().
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<Connection> conn, HttpRequest req);
  ~Exchange();  // reports the finished request to the handler (HttpHandler::on_done)
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const HttpRequest& request() const { return req_; }
  std::string take_body() { return std::move(req_.body); }  // frees it for large bodies

  void respond(HttpResponse r);
  void begin_stream(int status, const std::string& content_type, HeaderList headers);
  // Blocks while more than a bounded amount is still unsent (the send timeout
  // bounds the wait); false once the client is gone. Pieces written within
  // TransportOptions::stream_interval_ms of the last send are sent together
  // when that interval is up (one chunk, one wake of an I/O thread, one read
  // for the client); `now` sends at once (what the client waits for: the
  // first token). end_stream() sends what is pending first.
  bool write(std::string data, bool now = false);
  void end_stream();

  bool gone() const { return gone_.load(); }
  // Runs f once when the client goes (at once if it has); on a transport thread.
  void on_gone(std::function<void()> f);
  // Appended to the request's log line (tokens, queue wait).
  void set_log_detail(std::string s);

 private:
  friend class Connection;
  void mark_gone();
  void sent(size_t bytes);
  // The pieces written since the last send, and the bytes they count.
  std::pair<std::string, size_t> take_pending();

  std::shared_ptr<Connection> conn_;
  HttpRequest req_;
  std::atomic<bool> gone_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  size_t unsent_ = 0;
  std::string pending_;           // written, not yet handed to the connection
  size_t pending_counted_ = 0;
  bool send_scheduled_ = false;   // a send of pending_ is posted or timed
  std::chrono::steady_clock::time_point last_send_{};
  std::vector<std::function<void()>> on_gone_;
  std::string detail_;
  int status_ = 0;          // what the handler answered
  bool delivered_ = false;  // the whole reply was written
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// One finished request, for the log and the metrics.
struct RequestRecord {
  std::string id, method, path, client, detail;
  int status = 0;       // 499: the client left before its reply was written
  double seconds = 0;   // head read to reply written
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // After the head: a reply decided without the body (which is then never
  // read; the connection closes if one was announced), or nullopt to read
  // the body (up to TransportOptions::max_body_bytes, else 413) and call
  // on_request. Must not block.
  virtual std::optional<HttpResponse> on_head(const HttpRequest& req) = 0;
  // The body has been read. Answer through `ex`, now or later, from any thread.
  virtual void on_request(std::shared_ptr<Exchange> ex) = 0;
  // Every finished request (also ones refused by the transport). Any thread.
  virtual void on_done(const RequestRecord& r) = 0;
  // The transport began to stop (stop() was called): stop queued and running work.
  virtual void on_stopping() = 0;
};

struct TransportOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  uint64_t max_body_bytes = 128ull << 20;
  int max_connections = 256;
  int max_client_connections = 64;  // per peer address
  int head_timeout_ms = 10000;      // a whole head; also how long an idle keep-alive connection stays
  int body_idle_timeout_ms = 30000;
  int send_timeout_ms = 30000;
  int stop_grace_ms = 1000;         // after stop(): how long replies in flight may take
  int stream_interval_ms = 5;       // streamed pieces closer than this go out together (0: each at once)
  int io_threads = 2;
};

struct TransportStats {
  uint64_t accepted = 0, reclaimed = 0, refused = 0;
  int64_t open = 0;
};

class HttpTransport {
 public:
  HttpTransport(TransportOptions opt, HttpHandler& handler);
  ~HttpTransport();
  Status bind();
  int port() const;
  // Serves until stop(); returns once every connection has closed (or the
  // stop grace has run out and the rest were closed).
  Status run();
  // Async-signal-safe: a flag and a pipe write.
  void stop();
  TransportStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace deltafin::server
