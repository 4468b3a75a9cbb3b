// Connections, limits and timeouts of the HTTP transport (http_transport.h).
// Each connection's state lives on its own strand; Exchange methods post
// onto it, so everything below that touches a socket runs on one thread at
// a time.
#include "server/http_transport.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "server/beast.h"
#include "server/http_head.h"

namespace deltafin::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kBufferLimit = 64 * 1024;   // the parse buffer (heads are at most 32 KiB)
constexpr size_t kMaxPipelined = 32 * 1024;  // bytes read ahead while a request is handled
constexpr size_t kMaxUnsent = 1 << 20;       // a streaming writer waits above this
constexpr int kLingerMs = 250;               // reading what a client still sends before closing
constexpr size_t kLingerBytes = 1 << 20;

bool is_http_error(const error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::need_more).category();
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

template <class Message>
void set_headers(Message& res, const HeaderList& headers) {
  for (const auto& [k, v] : headers) res.set(beast::string_view(k.data(), k.size()), v);
}

}  // namespace

enum class ConnState : int { Head, Body, Handling, Closing };

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpTransport::Impl& t, tcp::socket sock, std::string client);
  ~Connection();

  void start();
  void refuse();   // over every limit with nobody to reclaim: 503, close
  void reclaim();  // any thread: close if still reading a head or body
  void on_stop();  // any thread: the transport is stopping
  void force_close();  // any thread

  // From Exchange (any thread): posted onto the strand.
  void post(std::function<void(Connection&)> f) {
    net::post(sock_.get_executor(), [self = shared_from_this(), f = std::move(f)] { f(*self); });
  }
  void send_response(Exchange* who, HttpResponse r);
  void send_stream_head(Exchange* who, int status, const std::string& content_type, const HeaderList& headers);
  void schedule_send(Exchange* who, Clock::time_point due);  // sends who's pending pieces at `due`
  void send_pending(Exchange* who);
  void send_chunk(Exchange* who, std::string data, size_t counted);
  void send_stream_end(Exchange* who);

  HttpTransport::Impl& transport() { return t_; }
  const std::string& client() const { return client_; }
  ConnState state() const { return ConnState(state_.load()); }
  int64_t since() const { return since_.load(); }
  bool registered = false;  // guarded by the transport's registry mutex

 private:
  struct Out {
    std::string bytes;
    bool last;       // the reply's final piece
    size_t counted;  // bytes an Exchange::write is waiting on
    std::shared_ptr<Exchange> owner;  // of a final piece: delivered once it is written
  };
  void set_state(ConnState s) {
    state_.store(int(s));
    since_.store(now_ns());
  }
  void arm_read(int ms);
  void disarm_read() { ++read_gen_, read_timer_.cancel(); }
  void read_head();
  void on_head(const error_code& ec);
  void fail_head(const HeadFailure& f);
  void fail_request(const ApiError& e);
  void read_body();
  void on_body(const error_code& ec);
  void body_done();
  void start_watch();
  void on_watch(const error_code& ec, size_t n);
  void client_gone();
  void enqueue(std::string bytes, bool last, size_t counted = 0);
  void do_write();
  void on_write(const error_code& ec);
  void finish_reply();
  void graceful_close();
  void linger();
  void close_now();
  // The request's HTTP version (replies are always HTTP/1.1, as RFC 9110 asks).
  unsigned version() const { return ex_ ? ex_->request().version : 11; }
  void set_connection(http::fields& f, bool keep) {
    if (!keep) f.set(http::field::connection, "close");
    else if (version() == 10) f.set(http::field::connection, "keep-alive");
  }

  HttpTransport::Impl& t_;
  tcp::socket sock_;
  net::steady_timer read_timer_, write_timer_, send_timer_;
  uint64_t read_gen_ = 0, write_gen_ = 0;
  beast::flat_buffer buf_{kBufferLimit};
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string client_;
  std::atomic<int> state_{int(ConnState::Head)};
  std::atomic<int64_t> since_{now_ns()};
  bool timed_out_ = false;
  bool keep_alive_ = true;
  bool chunked_ = false;
  bool closed_ = false;
  bool watching_ = false;
  bool writing_ = false;
  std::function<void()> after_watch_;
  std::deque<Out> outbox_;
  std::shared_ptr<Exchange> ex_;  // the request being handled; reset once its reply is written
  size_t lingered_ = 0;
  char linger_buf_[4096];
};

struct HttpTransport::Impl {
  Impl(TransportOptions o, HttpHandler& h) : opt(std::move(o)), handler(h) {}

  void accept();
  void admit(tcp::socket s);
  std::shared_ptr<Connection> pick_victim(const std::string* client, std::vector<std::shared_ptr<Connection>>& seen);
  void unregister(Connection* c);
  void begin_stop();
  void end_stop();
  void watch_wake();
  std::string next_request_id() { return fmt::format("req-{:010x}", next_id.fetch_add(1) + 1); }

  TransportOptions opt;
  HttpHandler& handler;
  // The registry (every connection that counts toward the limits). Declared
  // before the io_context: connections still owned by its handlers
  // unregister while it is destroyed.
  mutable std::mutex mu;
  std::map<Connection*, std::weak_ptr<Connection>> conns;
  std::map<std::string, int> per_client;

  net::io_context ioc;
  // Keeps the I/O threads running while stopping, until every connection
  // has closed: a reply may still be posted from a handler's thread.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc}, grace{ioc};
  int wake[2] = {-1, -1};
  std::optional<net::posix::stream_descriptor> wake_reader;
  char wake_byte = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> stopping{false};
  std::atomic<bool> destroying{false};  // ~HttpTransport: connections die with the io_context, post nothing
  bool stop_begun = false;
  int port = 0;
  std::atomic<uint64_t> next_id{0}, accepted{0}, reclaimed{0}, refused{0};
};

// ---- Exchange -------------------------------------------------------------

Exchange::Exchange(std::shared_ptr<Connection> conn, HttpRequest req) : conn_(std::move(conn)), req_(std::move(req)) {}

Exchange::~Exchange() {
  RequestRecord r;
  r.id = req_.id;
  r.method = req_.method.empty() ? "-" : req_.method;
  r.path = req_.path.empty() ? "-" : req_.path;
  r.client = req_.client;
  r.detail = detail_;
  r.status = delivered_ ? status_ : 499;
  r.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  try {
    conn_->transport().handler.on_done(r);
  } catch (...) {
  }
}

void Exchange::respond(HttpResponse r) {
  conn_->post([self = shared_from_this(), r = std::move(r)](Connection& c) mutable {
    c.send_response(self.get(), std::move(r));
  });
}

void Exchange::begin_stream(int status, const std::string& content_type, HeaderList headers) {
  conn_->post([self = shared_from_this(), status, content_type, headers = std::move(headers)](Connection& c) {
    c.send_stream_head(self.get(), status, content_type, headers);
  });
}

bool Exchange::write(std::string data, bool now) {
  if (data.empty()) return !gone();
  const size_t n = data.size();
  Clock::time_point due;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return gone_.load() || unsent_ <= kMaxUnsent; });
    if (gone_.load()) return false;
    unsent_ += n;
    pending_ += data;
    pending_counted_ += n;
    if (send_scheduled_ && !now) return true;  // goes with the send already due
    send_scheduled_ = true;
    due = now ? Clock::time_point{} : last_send_ + std::chrono::milliseconds(conn_->transport().opt.stream_interval_ms);
  }
  conn_->post([self = shared_from_this(), due](Connection& c) { c.schedule_send(self.get(), due); });
  return true;
}

std::pair<std::string, size_t> Exchange::take_pending() {
  std::lock_guard lock(mu_);
  send_scheduled_ = false;
  if (pending_counted_ > 0) last_send_ = Clock::now();
  std::pair<std::string, size_t> out{std::move(pending_), pending_counted_};
  pending_.clear();
  pending_counted_ = 0;
  return out;
}

void Exchange::end_stream() {
  conn_->post([self = shared_from_this()](Connection& c) {
    c.send_pending(self.get());
    c.send_stream_end(self.get());
  });
}

void Exchange::on_gone(std::function<void()> f) {
  {
    std::lock_guard lock(mu_);
    if (!gone_.load()) {
      on_gone_.push_back(std::move(f));
      return;
    }
  }
  f();
}

void Exchange::set_log_detail(std::string s) {
  std::lock_guard lock(mu_);
  detail_ = std::move(s);
}

void Exchange::mark_gone() {
  std::vector<std::function<void()>> fs;
  {
    std::lock_guard lock(mu_);
    if (gone_.exchange(true)) return;
    fs.swap(on_gone_);
  }
  cv_.notify_all();
  for (auto& f : fs) f();
}

void Exchange::sent(size_t bytes) {
  if (bytes == 0) return;
  {
    std::lock_guard lock(mu_);
    unsent_ -= std::min(bytes, unsent_);
  }
  cv_.notify_all();
}

// ---- Connection -----------------------------------------------------------

Connection::Connection(HttpTransport::Impl& t, tcp::socket sock, std::string client)
    : t_(t),
      sock_(std::move(sock)),
      read_timer_(sock_.get_executor()),
      write_timer_(sock_.get_executor()),
      send_timer_(sock_.get_executor()),
      client_(std::move(client)) {}

Connection::~Connection() { t_.unregister(this); }

void Connection::start() {
  post([](Connection& c) {
    error_code ig;
    c.sock_.set_option(tcp::no_delay(true), ig);
    c.sock_.non_blocking(true, ig);
    c.read_head();
  });
}

void Connection::refuse() {
  post([](Connection& c) {
    HttpRequest req;
    req.client = c.client_;
    req.id = c.t_.next_request_id();
    c.ex_ = std::make_shared<Exchange>(c.shared_from_this(), std::move(req));
    c.keep_alive_ = false;
    c.send_response(c.ex_.get(), error_response(transport_error(503, "too many open connections", "server_busy",
                                                                "server_busy"),
                                                {{"Retry-After", "1"}}));
  });
}

void Connection::reclaim() {
  post([](Connection& c) {
    if (c.state() == ConnState::Head || c.state() == ConnState::Body) c.close_now();
  });
}

void Connection::on_stop() {
  post([](Connection& c) {
    c.keep_alive_ = false;
    if (c.closed_) return;
    if (c.state() == ConnState::Head) {
      c.close_now();
    } else if (c.state() == ConnState::Body) {
      error_code ig;
      c.sock_.cancel(ig);  // on_body answers 503
    }
  });
}

void Connection::force_close() {
  post([](Connection& c) { c.close_now(); });
}

void Connection::arm_read(int ms) {
  const uint64_t gen = ++read_gen_;
  timed_out_ = false;
  read_timer_.expires_after(std::chrono::milliseconds(ms));
  read_timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) {
    if (ec || gen != self->read_gen_) return;
    self->timed_out_ = true;
    error_code ig;
    self->sock_.cancel(ig);
  });
}

void Connection::read_head() {
  if (closed_) return;
  if (t_.stopping.load()) return close_now();
  set_state(ConnState::Head);
  parser_.emplace();
  parser_->header_limit(uint32_t(kMaxHeadBytes));
  // No limit while the head is read (the real one is set once the handler wants the body). Not
  // boost::none: Boost 1.74 compares a Content-Length against an empty optional as larger.
  parser_->body_limit(std::numeric_limits<uint64_t>::max());
  arm_read(t_.opt.head_timeout_ms);
  http::async_read_header(sock_, buf_, *parser_,
                          [self = shared_from_this()](const error_code& ec, size_t) { self->on_head(ec); });
}

void Connection::on_head(const error_code& ec) {
  const bool timed_out = timed_out_;
  disarm_read();
  if (closed_) return;
  if (ec) {
    const bool some = parser_->got_some() || buf_.size() > 0;
    if (timed_out) {
      if (!some) return close_now();  // an idle keep-alive connection, or one that never spoke
      return fail_head({408, transport_error(408, "timed out reading the request head", "timeout")});
    }
    if (ec == net::error::operation_aborted) return close_now();  // reclaimed or stopping
    if (ec == http::error::end_of_stream) return close_now();    // closed between requests
    if (!is_http_error(ec)) return close_now();                  // reset
    const std::string raw = beast::buffers_to_string(buf_.data());
    return fail_head(head_error(ec, raw));
  }
  std::optional<uint64_t> length;
  if (parser_->content_length()) length = *parser_->content_length();
  auto converted = convert_head(parser_->get().base(), parser_->chunked(), length);
  if (auto* f = std::get_if<HeadFailure>(&converted)) return fail_head(*f);
  HttpRequest& req = std::get<HttpRequest>(converted);
  req.client = client_;
  req.id = t_.next_request_id();
  keep_alive_ = parser_->keep_alive();
  if (req.method == "HEAD") keep_alive_ = false;  // our replies always carry a body
  const bool has_body = req.has_body();
  const std::optional<uint64_t> content_length = req.content_length;
  const bool expect_continue = req.version == 11 && req.header("expect") && iequals(*req.header("expect"), "100-continue");
  ex_ = std::make_shared<Exchange>(shared_from_this(), std::move(req));
  set_state(ConnState::Handling);
  if (t_.stopping.load()) {
    keep_alive_ = false;
    return send_response(ex_.get(), error_response(transport_error(503, "the server is shutting down",
                                                                   "server_shutting_down", "server_error")));
  }
  std::optional<HttpResponse> early;
  try {
    early = t_.handler.on_head(ex_->request());
  } catch (const std::exception&) {
    early = error_response(transport_error(500, "internal error while routing the request", "server_error",
                                           "server_error"));
  }
  if (early) {
    if (has_body) keep_alive_ = false;  // the body is never read: the connection cannot carry another request
    return send_response(ex_.get(), std::move(*early));
  }
  if (content_length && *content_length > t_.opt.max_body_bytes) {
    keep_alive_ = false;
    return send_response(
        ex_.get(), error_response(transport_error(413, fmt::format("the request body is {} bytes, over this server's "
                                                                   "limit of {} (--max-request-bytes)",
                                                                   *content_length, t_.opt.max_body_bytes),
                                                  "request_too_large")));
  }
  parser_->body_limit(t_.opt.max_body_bytes);
  if (expect_continue && !parser_->is_done()) {
    // The client waits for this before sending the body.
    set_state(ConnState::Body);
    auto line = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    net::async_write(sock_, net::buffer(*line), [self = shared_from_this(), line](const error_code& e, size_t) {
      if (e) return self->client_gone();
      self->read_body();
    });
    return;
  }
  read_body();
}

void Connection::fail_head(const HeadFailure& f) {
  if (f.status == 0) return close_now();
  if (!ex_) {
    HttpRequest req;
    req.client = client_;
    req.id = t_.next_request_id();
    ex_ = std::make_shared<Exchange>(shared_from_this(), std::move(req));
  }
  fail_request(f.error);
}

void Connection::fail_request(const ApiError& e) {
  keep_alive_ = false;
  set_state(ConnState::Handling);
  send_response(ex_.get(), error_response(e));
}

void Connection::read_body() {
  if (closed_) return;
  if (parser_->is_done()) return body_done();
  set_state(ConnState::Body);
  arm_read(t_.opt.body_idle_timeout_ms);
  http::async_read_some(sock_, buf_, *parser_,
                        [self = shared_from_this()](const error_code& ec, size_t) { self->on_body(ec); });
}

void Connection::on_body(const error_code& ec) {
  const bool timed_out = timed_out_;
  disarm_read();
  if (closed_) return;
  if (!ec && !t_.stopping.load()) return read_body();
  if (timed_out) return fail_request(transport_error(408, "timed out reading the request body", "timeout"));
  if (t_.stopping.load())
    return fail_request(transport_error(503, "the server is shutting down", "server_shutting_down", "server_error"));
  if (ec == net::error::operation_aborted) return close_now();  // reclaimed
  if (ec == http::error::body_limit)
    return fail_request(transport_error(413, fmt::format("the request body is over this server's limit of {} bytes "
                                                         "(--max-request-bytes)", t_.opt.max_body_bytes),
                                        "request_too_large"));
  if (ec == http::error::partial_message || ec == http::error::end_of_stream) {
    const auto& r = ex_->request();
    return fail_request(bad_request(r.content_length ? fmt::format("the request body ended before its Content-Length "
                                                                   "of {} bytes", *r.content_length)
                                                     : std::string("the request body ended before its last chunk"),
                                    std::nullopt, "truncated_body"));
  }
  if (is_http_error(ec))
    return fail_request(transport_error(400, fmt::format("malformed request body ({})", ec.message()), "invalid_http"));
  client_gone();
}

void Connection::body_done() {
  ex_->req_.body = std::move(parser_->get().body());
  parser_.reset();
  set_state(ConnState::Handling);
  start_watch();
  try {
    t_.handler.on_request(ex_);
  } catch (const std::exception&) {
    send_response(ex_.get(), error_response(transport_error(500, "internal error while handling the request",
                                                            "server_error", "server_error")));
  }
}

// While a request is handled, a read stays pending on the socket: bytes are
// pipelined requests (kept in the parse buffer for the next one), the end of
// stream or an error means the client is gone.
void Connection::start_watch() {
  if (watching_ || closed_ || buf_.size() >= kMaxPipelined) return;
  watching_ = true;
  sock_.async_read_some(buf_.prepare(std::min<size_t>(4096, kBufferLimit - buf_.size())),
                        [self = shared_from_this()](const error_code& ec, size_t n) { self->on_watch(ec, n); });
}

void Connection::on_watch(const error_code& ec, size_t n) {
  watching_ = false;
  if (closed_) return;
  if (!ec) buf_.commit(n);
  if (state() == ConnState::Handling) {
    if (ec) return client_gone();  // end of stream, reset, or aborted by a close
    return start_watch();
  }
  // The reply is out (finish_reply cancelled this read): carry on. An end of
  // stream or error seen here shows again to the next read.
  if (after_watch_) {
    auto f = std::move(after_watch_);
    after_watch_ = nullptr;
    f();
  }
}

void Connection::client_gone() {
  if (ex_) ex_->mark_gone();
  close_now();
}

void Connection::send_response(Exchange* who, HttpResponse r) {
  if (closed_ || !ex_ || ex_.get() != who || ex_->status_ != 0) return;
  ex_->status_ = r.status;
  http::response<http::string_body> res;
  res.result(unsigned(r.status));
  res.version(11);
  res.set(http::field::content_type, r.content_type);
  set_headers(res, r.headers);
  res.set("x-request-id", ex_->request().id);
  set_connection(res, keep_alive_ && !t_.stopping.load());
  res.body() = std::move(r.body);
  res.prepare_payload();
  std::ostringstream os;
  os << res;
  enqueue(os.str(), true);
}

void Connection::send_stream_head(Exchange* who, int status, const std::string& content_type,
                                  const HeaderList& headers) {
  if (closed_ || !ex_ || ex_.get() != who || ex_->status_ != 0) return;
  ex_->status_ = status;
  http::response<http::empty_body> res;
  res.result(unsigned(status));
  res.version(11);
  res.set(http::field::content_type, content_type);
  set_headers(res, headers);
  res.set("x-request-id", ex_->request().id);
  chunked_ = version() == 11;
  if (chunked_) res.chunked(true);
  else keep_alive_ = false;  // HTTP/1.0: the stream ends with the connection
  set_connection(res, keep_alive_ && !t_.stopping.load());
  std::ostringstream os;
  os << res.base();
  enqueue(os.str(), false);
}

void Connection::schedule_send(Exchange* who, Clock::time_point due) {
  if (due <= Clock::now()) return send_pending(who);
  // One stream per connection at a time, so one timer: a send that is due
  // sooner (a `now` write) leaves this one nothing to send.
  send_timer_.expires_at(due);
  send_timer_.async_wait([self = shared_from_this(), who = who->shared_from_this()](const error_code& ec) {
    if (!ec) self->send_pending(who.get());
  });
}

void Connection::send_pending(Exchange* who) {
  auto [data, counted] = who->take_pending();
  if (counted > 0) send_chunk(who, std::move(data), counted);
}

void Connection::send_chunk(Exchange* who, std::string data, size_t counted) {
  if (closed_ || !ex_ || ex_.get() != who || ex_->status_ == 0) {
    who->sent(counted);
    return;
  }
  if (chunked_) data = beast::buffers_to_string(http::make_chunk(net::buffer(data)));
  enqueue(std::move(data), false, counted);
}

void Connection::send_stream_end(Exchange* who) {
  send_timer_.cancel();  // nothing is pending now; it would only hold the exchange
  if (closed_ || !ex_ || ex_.get() != who || ex_->status_ == 0) return;
  enqueue(chunked_ ? beast::buffers_to_string(http::make_chunk_last()) : std::string(), true);
}

void Connection::enqueue(std::string bytes, bool last, size_t counted) {
  outbox_.push_back({std::move(bytes), last, counted, last ? ex_ : nullptr});
  if (!writing_) do_write();
}

void Connection::do_write() {
  if (closed_ || outbox_.empty()) return;
  writing_ = true;
  const uint64_t gen = ++write_gen_;
  write_timer_.expires_after(std::chrono::milliseconds(t_.opt.send_timeout_ms));
  write_timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) {
    if (!ec && gen == self->write_gen_) self->client_gone();  // it stopped reading
  });
  net::async_write(sock_, net::buffer(outbox_.front().bytes),
                   [self = shared_from_this()](const error_code& ec, size_t) { self->on_write(ec); });
}

void Connection::on_write(const error_code& ec) {
  ++write_gen_;
  write_timer_.cancel();
  writing_ = false;
  if (outbox_.empty()) return;
  Out done = std::move(outbox_.front());
  outbox_.pop_front();
  // Written is delivered, even if the client's close was noticed first (it
  // may read the reply and close at once).
  if (!ec && done.owner) done.owner->delivered_ = true;
  if (ex_) ex_->sent(done.counted);
  if (closed_) return;
  if (ec) return client_gone();
  if (done.last) return finish_reply();
  do_write();
}

void Connection::finish_reply() {
  ex_->delivered_ = true;
  ex_.reset();
  set_state(ConnState::Closing);
  std::function<void()> next;
  if (keep_alive_ && !t_.stopping.load()) next = [self = shared_from_this()] { self->read_head(); };
  else next = [self = shared_from_this()] { self->graceful_close(); };
  if (watching_) {
    after_watch_ = std::move(next);
    error_code ig;
    sock_.cancel(ig);
  } else {
    next();
  }
}

// Half-close, then read (and drop) what the client still sends for a short
// while, so that unread bytes do not turn our close into a reset that loses
// the reply before the client has read it.
void Connection::graceful_close() {
  if (closed_) return;
  t_.unregister(this);
  error_code ig;
  sock_.shutdown(tcp::socket::shutdown_send, ig);
  arm_read(kLingerMs);
  linger();
}

void Connection::linger() {
  sock_.async_read_some(net::buffer(linger_buf_), [self = shared_from_this()](const error_code& ec, size_t n) {
    self->lingered_ += n;
    if (ec || self->lingered_ > kLingerBytes) return self->close_now();
    self->linger();
  });
}

void Connection::close_now() {
  if (closed_) return;
  closed_ = true;
  disarm_read();
  ++write_gen_;
  write_timer_.cancel();
  send_timer_.cancel();
  error_code ig;
  sock_.shutdown(tcp::socket::shutdown_both, ig);
  sock_.close(ig);
  t_.unregister(this);
  // The piece being written stays until its completion says whether it got out.
  const size_t keep = writing_ && !outbox_.empty() ? 1 : 0;
  for (size_t i = keep; i < outbox_.size(); ++i)
    if (ex_) ex_->sent(outbox_[i].counted);
  outbox_.resize(keep);
  if (ex_) ex_->mark_gone();
  ex_.reset();
  after_watch_ = nullptr;
}

// ---- Transport ------------------------------------------------------------

void HttpTransport::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](const error_code& ec, tcp::socket s) {
    if (stopping.load()) return;
    if (ec) {
      // Out of descriptors or a transient error: try again shortly, without spinning.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](const error_code& e) {
        if (!e && !stopping.load()) accept();
      });
      return;
    }
    admit(std::move(s));
    accept();
  });
}

// Called with `mu` held. Every connection it looks at stays referenced in
// `seen` until the caller has released `mu`: a last reference dropped here
// would run ~Connection, which takes `mu`.
std::shared_ptr<Connection> HttpTransport::Impl::pick_victim(const std::string* client,
                                                             std::vector<std::shared_ptr<Connection>>& seen) {
  std::shared_ptr<Connection> best;
  for (auto& [raw, weak] : conns) {
    auto c = weak.lock();
    if (!c) continue;
    seen.push_back(c);
    if (client && c->client() != *client) continue;
    if (c->state() != ConnState::Head && c->state() != ConnState::Body) continue;
    if (!best || c->since() < best->since()) best = c;
  }
  return best;
}

void HttpTransport::Impl::admit(tcp::socket s) {
  error_code ec;
  const auto ep = s.remote_endpoint(ec);
  std::string client = ec ? std::string("?") : ep.address().to_string();
  auto c = std::make_shared<Connection>(*this, std::move(s), client);
  accepted.fetch_add(1);
  std::shared_ptr<Connection> victim;
  std::vector<std::shared_ptr<Connection>> seen;  // released after `mu` (see pick_victim)
  bool refuse = false;
  {
    std::lock_guard lock(mu);
    const bool over_client = per_client[client] >= opt.max_client_connections;
    const bool over_total = int(conns.size()) >= opt.max_connections;
    if (over_client || over_total) {
      victim = pick_victim(over_client ? &client : nullptr, seen);
      if (victim) {
        victim->registered = false;
        conns.erase(victim.get());
        if (--per_client[victim->client()] <= 0) per_client.erase(victim->client());
      } else {
        refuse = true;
      }
    }
    if (!refuse) {
      c->registered = true;
      conns[c.get()] = c;
      per_client[client]++;
    } else if (per_client[client] == 0) {
      per_client.erase(client);
    }
  }
  if (victim) {
    reclaimed.fetch_add(1);
    victim->reclaim();
  }
  if (refuse) {
    refused.fetch_add(1);
    c->refuse();
  } else {
    c->start();
  }
}

void HttpTransport::Impl::unregister(Connection* c) {
  std::lock_guard lock(mu);
  if (!c->registered) return;
  c->registered = false;
  conns.erase(c);
  if (--per_client[c->client()] <= 0) per_client.erase(c->client());
  if (stopping.load() && conns.empty() && !destroying.load()) net::post(ioc, [this] { end_stop(); });
}

void HttpTransport::Impl::end_stop() {
  grace.cancel();
  work.reset();
}

void HttpTransport::Impl::watch_wake() {
  wake_reader->async_read_some(net::buffer(&wake_byte, 1), [this](const error_code& ec, size_t) {
    if (ec == net::error::operation_aborted) return;
    if (stop_requested.load()) return begin_stop();
    watch_wake();
  });
}

void HttpTransport::Impl::begin_stop() {
  if (stop_begun) return;
  stop_begun = true;
  stopping.store(true);
  error_code ig;
  acceptor.close(ig);
  accept_retry.cancel();
  if (wake_reader) wake_reader->close(ig);
  handler.on_stopping();
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard lock(mu);
    for (auto& [raw, weak] : conns)
      if (auto c = weak.lock()) all.push_back(std::move(c));
  }
  for (auto& c : all) c->on_stop();
  if (all.empty()) return end_stop();
  grace.expires_after(std::chrono::milliseconds(opt.stop_grace_ms));
  grace.async_wait([this](const error_code& e) {
    if (e) return;
    std::vector<std::shared_ptr<Connection>> rest;
    {
      std::lock_guard lock(mu);
      for (auto& [raw, weak] : conns)
        if (auto c = weak.lock()) rest.push_back(std::move(c));
    }
    for (auto& c : rest) c->force_close();
    work.reset();
  });
}

HttpTransport::HttpTransport(TransportOptions opt, HttpHandler& handler)
    : impl_(std::make_unique<Impl>(std::move(opt), handler)) {}

HttpTransport::~HttpTransport() {
  Impl& t = *impl_;
  t.destroying.store(true);
  error_code ig;
  t.acceptor.close(ig);
  if (t.wake_reader) t.wake_reader->close(ig);
  else if (t.wake[0] >= 0) close(t.wake[0]);
  if (t.wake[1] >= 0) close(t.wake[1]);
}

Status HttpTransport::bind() {
  Impl& t = *impl_;
  if (pipe2(t.wake, O_CLOEXEC | O_NONBLOCK) != 0) return error("pipe: {}", std::strerror(errno));
  t.wake_reader.emplace(t.ioc, t.wake[0]);
  error_code ec;
  tcp::resolver resolver(t.ioc);
  const auto results = resolver.resolve(t.opt.host, std::to_string(t.opt.port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) return error("--host {}: {}", t.opt.host, ec.message());
  std::string last = "no address";
  for (const auto& entry : results) {
    error_code e;
    tcp::acceptor a(t.ioc);
    a.open(entry.endpoint().protocol(), e);
    if (!e) a.set_option(net::socket_base::reuse_address(true), e);
    if (!e) a.bind(entry.endpoint(), e);
    if (!e) a.listen(net::socket_base::max_listen_connections, e);
    if (e) {
      last = e.message();
      continue;
    }
    t.port = a.local_endpoint(e).port();
    t.acceptor = std::move(a);
    return {};
  }
  return error("cannot listen on {}:{}: {}", t.opt.host, t.opt.port, last);
}

int HttpTransport::port() const { return impl_->port; }

Status HttpTransport::run() {
  Impl& t = *impl_;
  if (!t.acceptor.is_open()) return error("run() before bind()");
  t.work.emplace(t.ioc.get_executor());
  t.accept();
  t.watch_wake();
  if (t.stop_requested.load()) net::post(t.ioc, [&t] { t.begin_stop(); });
  auto loop = [&t] {
    for (;;) {
      try {
        t.ioc.run();
        return;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "deltafin serve: error in the HTTP transport: %s\n", e.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < t.opt.io_threads; ++i) threads.emplace_back(loop);
  loop();
  for (auto& th : threads) th.join();
  return {};
}

void HttpTransport::stop() {
  Impl& t = *impl_;
  t.stop_requested.store(true);
  if (t.wake[1] >= 0) {
    const char c = 1;
    [[maybe_unused]] ssize_t n = write(t.wake[1], &c, 1);
  }
}

TransportStats HttpTransport::stats() const {
  const Impl& t = *impl_;
  TransportStats s;
  s.accepted = t.accepted.load();
  s.reclaimed = t.reclaimed.load();
  s.refused = t.refused.load();
  std::lock_guard lock(t.mu);
  s.open = int64_t(t.conns.size());
  return s;
}

}  // namespace deltafin::server
