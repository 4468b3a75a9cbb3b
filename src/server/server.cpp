#include "server/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

#include "server/responses.h"

namespace deltafin::server {

namespace {

using ojson = nlohmann::ordered_json;

ApiError make_error(int status, std::string message, std::string type, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

bool ends_with_route(const std::string& path, const char* route) {
  return path == route || path == std::string("/v1") + route;
}

// The generation permit, released before a request's last write: a client
// that has read its whole reply may send the next request at once without
// meeting a 429 (the engine mutex still orders the two).
struct Permit {
  std::atomic<bool>& busy;
  bool held = true;
  void release() {
    if (held) busy.store(false);
    held = false;
  }
  ~Permit() { release(); }
};

}  // namespace

Result<bool> is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), "0", &hints, &res);
  if (rc != 0) return error("--host {}: {}", host, gai_strerror(rc));
  bool all = res != nullptr;
  for (addrinfo* a = res; a; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      all = all && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      all = all && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    } else {
      all = false;
    }
  }
  freeaddrinfo(res);
  return all;
}

Server::Server(Engine& engine, ServerOptions opt)
    : engine_(engine), opt_(std::move(opt)), memo_(opt_.memo_entries, opt_.memo_bytes) {
  limits_.model_name = opt_.model_name;
  limits_.max_tokens = opt_.max_tokens;
}

Server::~Server() {
  if (listen_fd_ >= 0) close(listen_fd_);
  for (int fd : wake_)
    if (fd >= 0) close(fd);
}

Status Server::bind() {
  DF_ASSIGN(const bool loopback, is_loopback_host(opt_.host));
  if (!loopback && opt_.api_key.empty())
    return error("--host {} is not a loopback address: refusing to serve it without --api-key", opt_.host);
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return error("pipe: {}", std::strerror(errno));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(opt_.port);
  if (int rc = getaddrinfo(opt_.host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return error("--host {}: {}", opt_.host, gai_strerror(rc));
  std::string last = "no address";
  for (addrinfo* a = res; a && listen_fd_ < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      listen_fd_ = fd;
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    } else {
      last = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0) return error("cannot listen on {}:{}: {}", opt_.host, opt_.port, last);
  return {};
}

void Server::stop() {
  stopping_.store(true);
  if (wake_[1] >= 0) {
    const char c = 1;
    [[maybe_unused]] ssize_t n = write(wake_[1], &c, 1);
  }
}

Status Server::serve() {
  if (listen_fd_ < 0) return error("serve() before bind()");
  while (!stopping_.load()) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int pr = poll(p, 2, 1000);
    if (pr < 0 && errno != EINTR) return error("poll: {}", std::strerror(errno));
    if (pr <= 0 || !(p[0].revents & POLLIN)) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    {
      std::lock_guard lock(conn_mu_);
      if (active_ >= opt_.max_connections) {
        HttpConnection conn(fd, &stopping_);
        conn.send_error(make_error(503, "too many open connections", "server_busy", "server_busy"),
                        {{"Retry-After", "1"}});
        continue;
      }
      ++active_;
    }
    std::thread([this, fd] {
      handle(fd);
      std::lock_guard lock(conn_mu_);
      --active_;
      conn_cv_.notify_all();
    }).detach();
  }
  // Graceful shutdown: stop accepting; the running request sees the flag
  // within one token and answers; idle readers give up within 100 ms and a
  // stuck writer within its 30 s send timeout. Connection threads use `this`,
  // so wait for all of them.
  close(listen_fd_);
  listen_fd_ = -1;
  std::unique_lock lock(conn_mu_);
  conn_cv_.wait(lock, [this] { return active_ == 0; });
  return {};
}

bool Server::authorized(const HttpRequest& req) const {
  if (opt_.api_key.empty()) return true;
  const std::string* h = req.header("authorization");
  if (!h || h->size() < 7 || h->substr(0, 7) != "Bearer ") return false;
  // Compare digests in constant time: neither the length nor the content leaks.
  unsigned char a[SHA256_DIGEST_LENGTH], b[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(h->data() + 7), h->size() - 7, a);
  SHA256(reinterpret_cast<const unsigned char*>(opt_.api_key.data()), opt_.api_key.size(), b);
  return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

std::string Server::next_id(RequestKind kind) {
  return fmt::format("{}-{:08x}{:012x}", kind == RequestKind::Chat ? "chatcmpl" : "cmpl",
                     uint32_t(std::time(nullptr)), seq_.fetch_add(1) & 0xffffffffffffull);
}

void Server::handle(int fd) {
  HttpConnection conn(fd, &stopping_);
  auto head = conn.read_head(opt_.head_timeout_ms);
  if (auto* f = std::get_if<HeadFailure>(&head)) {
    if (f->status != 0) conn.send_error(f->error);
    return;
  }
  const HttpRequest& req = std::get<HttpRequest>(head);
  const std::string& path = req.path;
  const bool models = ends_with_route(path, "/models");
  const bool model_item = path.starts_with("/v1/models/") || path.starts_with("/models/");
  const bool chat = ends_with_route(path, "/chat/completions");
  const bool completions = ends_with_route(path, "/completions");
  const bool health = path == "/health";
  if (!models && !model_item && !chat && !completions && !health) {
    conn.send_error(make_error(404, fmt::format("unknown URL: {} {}", req.method, path), "invalid_request_error",
                               "not_found"));
    return;
  }
  const bool post = chat || completions;
  const char* allowed = post ? "POST" : "GET";
  if (req.method != allowed) {
    conn.send_error(make_error(405, fmt::format("{} is not allowed on {}; use {}", req.method, path, allowed),
                               "invalid_request_error", "method_not_allowed"),
                    {{"Allow", allowed}});
    return;
  }
  if (health) {
    conn.send_response(200, "application/json", R"({"status":"ok"})");
    return;
  }
  if (!authorized(req)) {
    const bool given = req.header("authorization") != nullptr;
    conn.send_error(make_error(401, given ? "incorrect API key provided" : "missing API key: send Authorization: Bearer KEY",
                               "invalid_request_error", "invalid_api_key"),
                    {{"WWW-Authenticate", "Bearer"}});
    return;
  }
  if (models || model_item) {
    ojson card = {{"id", opt_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "deltafin"}};
    if (models) {
      conn.send_response(200, "application/json", dump_json({{"object", "list"}, {"data", ojson::array({card})}}));
    } else if (path.substr(path.find("/models/") + 8) == opt_.model_name) {
      conn.send_response(200, "application/json", dump_json(card));
    } else {
      ApiError e = make_error(404, fmt::format("the model '{}' does not exist", path.substr(path.find("/models/") + 8)),
                              "invalid_request_error", "model_not_found");
      e.param = "model";
      conn.send_error(e);
    }
    return;
  }
  handle_generation(conn, req, chat ? RequestKind::Chat : RequestKind::Completion);
}

void Server::handle_generation(HttpConnection& conn, const HttpRequest& req, RequestKind kind) {
  // Everything here is decided before a byte of the body is read.
  if (!req.content_length) {
    conn.send_error(make_error(411, "a request body with Content-Length is required", "invalid_request_error",
                               "length_required"));
    return;
  }
  if (*req.content_length > opt_.max_request_bytes) {
    conn.send_error(make_error(413, fmt::format("the request body is {} bytes, over this server's limit of {} "
                                                "(--max-request-bytes)", *req.content_length, opt_.max_request_bytes),
                               "invalid_request_error", "request_too_large"));
    return;
  }
  bool expected = false;
  if (!busy_.compare_exchange_strong(expected, true)) {
    conn.send_error(make_error(429, "another generation is running; this server runs one at a time", "server_busy",
                               "server_busy"),
                    {{"Retry-After", "1"}});
    return;
  }
  Permit permit{busy_};
  std::string body;
  switch (conn.read_body(*req.content_length, body, opt_.body_idle_timeout_ms)) {
    case HttpConnection::BodyRead::Ok: break;
    case HttpConnection::BodyRead::Truncated:
      permit.release();
      conn.send_error(bad_request(fmt::format("the request body ended before its Content-Length of {} bytes",
                                              *req.content_length), std::nullopt, "truncated_body"));
      return;
    case HttpConnection::BodyRead::Timeout:
      permit.release();
      conn.send_error(make_error(408, "timed out reading the request body", "invalid_request_error", "timeout"));
      return;
    case HttpConnection::BodyRead::Stopped:
      permit.release();
      conn.send_error(make_error(503, "the server is shutting down", "server_error", "server_shutting_down"));
      return;
  }
  Validated v = validate_request(kind, body, limits_);
  if (auto* e = std::get_if<ApiError>(&v)) {
    permit.release();
    conn.send_error(*e);
    return;
  }
  const GenRequest& r = std::get<GenRequest>(v);
  ResponseMeta meta{kind, next_id(kind), opt_.model_name, int64_t(std::time(nullptr))};
  const bool chat = kind == RequestKind::Chat;

  auto sse_head = [&](int64_t prefill, int64_t cached, bool memo_hit) {
    return fmt::format(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\n"
        "Connection: close\r\nX-Accel-Buffering: no\r\nX-Content-Type-Options: nosniff\r\n"
        "x-deltafin-prefill-tokens: {}\r\nx-deltafin-cached-tokens: {}\r\nx-deltafin-memo: {}\r\n\r\n",
        prefill, cached, memo_hit ? "hit" : "miss");
  };

  // Exact response memo: replay without entering the model or touching reuse state.
  if (auto hit = memo_.find(r.memo_key)) {
    permit.release();
    const Usage usage{hit->prompt_tokens, hit->completion_tokens, hit->prompt_tokens};
    if (r.stream) {
      std::string out = sse_head(0, hit->prompt_tokens, true) + sse_opening(meta, r.include_usage);
      for (const Delta& d : hit->deltas) out += sse_delta(meta, d, r.include_usage);
      out += sse_finish(meta, hit->finish_reason, r.include_usage);
      if (r.include_usage) out += sse_usage(meta, usage);
      out += sse_done();
      conn.write_all(out);
    } else {
      conn.send_response(200, "application/json", dump_json(full_response(meta, hit->deltas, hit->finish_reason, usage)),
                         {{"x-deltafin-prefill-tokens", "0"},
                          {"x-deltafin-cached-tokens", std::to_string(hit->prompt_tokens)},
                          {"x-deltafin-memo", "hit"}});
    }
    return;
  }

  auto ids = engine_.encode(r);
  if (auto* e = std::get_if<ApiError>(&ids)) {
    permit.release();
    conn.send_error(*e);
    return;
  }
  bool write_failed = false;
  auto on_start = [&](int64_t prefill, int64_t cached) {
    if (r.stream) write_failed = !conn.write_all(sse_head(prefill, cached, false) + sse_opening(meta, r.include_usage));
  };
  auto sink = [&](const std::vector<Delta>& step) {
    if (write_failed || stopping_.load() || conn.peer_closed()) return false;
    if (!r.stream) return true;
    std::string out;
    for (const Delta& d : step) out += sse_delta(meta, d, r.include_usage);
    if (!out.empty() && !conn.write_all(out)) write_failed = true;
    return !write_failed;
  };
  std::lock_guard engine_lock(engine_mu_);  // waits for the previous request's publish
  auto result = engine_.generate(r, std::get<std::vector<int32_t>>(ids), on_start, sink);
  permit.release();
  if (!result.ok() || result->cancelled) {
    engine_.discard();
    if (write_failed || conn.peer_closed()) return;  // the client left: no response
    const bool shutting = result.ok();  // cancelled without a client leaving: shutdown
    const std::string msg = shutting ? "the server is shutting down" : "generation failed: " + result.message();
    const std::string code = shutting ? "server_shutting_down" : "server_error";
    if (r.stream) {
      conn.write_all(sse_error(msg, "server_error", code) + sse_done());
    } else {
      conn.send_error(make_error(shutting ? 503 : 500, msg, "server_error", code));
    }
    return;
  }
  const GenerationOutcome& o = *result;
  const Usage usage{o.prompt_tokens, o.completion_tokens, o.cached_tokens};
  bool delivered;
  if (r.stream) {
    std::string out = sse_finish(meta, o.finish_reason, r.include_usage);
    if (r.include_usage) out += sse_usage(meta, usage);
    out += sse_done();
    delivered = !write_failed && conn.write_all(out);
  } else {
    delivered = conn.send_response(200, "application/json", dump_json(full_response(meta, o.deltas, o.finish_reason, usage)),
                                   {{"x-deltafin-prefill-tokens", std::to_string(o.prefill_tokens)},
                                    {"x-deltafin-cached-tokens", std::to_string(o.cached_tokens)},
                                    {"x-deltafin-memo", "miss"}});
  }
  if (!delivered) {
    engine_.discard();
    return;
  }
  if (chat) engine_.publish();
  else engine_.discard();
  memo_.insert(r.memo_key, MemoEntry{o.deltas, o.finish_reason, o.prompt_tokens, o.completion_tokens});
}

}  // namespace deltafin::server
