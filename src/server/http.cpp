#include "server/http.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fmt/format.h>

namespace deltafin::server {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxHeaders = 100;
constexpr size_t kMaxTarget = 8 * 1024;
constexpr int kPollSliceMs = 100;  // how often blocked reads look at the shutdown flag

HeadFailure fail(int status, std::string message, std::string code = "invalid_http") {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.code = std::move(code);
  return {status, e};
}

bool is_tchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return &v;
  return nullptr;
}

std::variant<HttpRequest, HeadFailure> parse_head(std::string_view head) {
  HttpRequest r;
  size_t eol = head.find("\r\n");
  if (eol == std::string_view::npos) return fail(400, "malformed request line");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "malformed request line");
  r.method = std::string(line.substr(0, sp1));
  r.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  r.version = std::string(line.substr(sp2 + 1));
  if (r.method.empty() || r.method.size() > 16) return fail(400, "malformed request method");
  for (unsigned char c : r.method)
    if (!is_tchar(c)) return fail(400, "malformed request method");
  if (r.target.empty() || r.target.size() > kMaxTarget) return fail(r.target.empty() ? 400 : 414, "bad request target");
  if (r.target[0] != '/') return fail(400, "the request target must be an absolute path");
  for (unsigned char c : r.target)
    if (c <= 0x20 || c >= 0x7f) return fail(400, "the request target has a character that is not allowed");
  if (r.version != "HTTP/1.1" && r.version != "HTTP/1.0") {
    if (r.version.size() == 8 && r.version.starts_with("HTTP/") && std::isdigit(static_cast<unsigned char>(r.version[5])) &&
        r.version[6] == '.' && std::isdigit(static_cast<unsigned char>(r.version[7])))
      return fail(505, "only HTTP/1.1 and HTTP/1.0 are supported", "http_version_not_supported");
    return fail(400, "malformed HTTP version");
  }
  r.path = r.target.substr(0, r.target.find('?'));

  size_t pos = eol + 2;
  while (pos < head.size()) {
    eol = head.find("\r\n", pos);
    if (eol == std::string_view::npos) return fail(400, "malformed header block");
    const std::string_view h = head.substr(pos, eol - pos);
    pos = eol + 2;
    if (h.empty()) break;  // end of head
    if (r.headers.size() >= kMaxHeaders) return fail(431, "too many headers", "headers_too_large");
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) return fail(400, "malformed header line");
    for (size_t i = 0; i < colon; ++i)
      if (!is_tchar(static_cast<unsigned char>(h[i]))) return fail(400, "malformed header name");
    const std::string_view value = trim_ows(h.substr(colon + 1));
    for (unsigned char c : value)
      if ((c < 0x20 && c != '\t') || c == 0x7f) return fail(400, "a header value has a control character");
    r.headers.emplace_back(lower(h.substr(0, colon)), std::string(value));
  }
  for (const auto& [k, v] : r.headers) {
    if (k == "transfer-encoding")
      return fail(501, "Transfer-Encoding request bodies are not supported; send Content-Length", "not_implemented");
    if (k == "content-length") {
      if (v.empty() || v.size() > 18) return fail(400, "bad Content-Length");
      uint64_t n = 0;
      for (unsigned char c : v) {
        if (!std::isdigit(c)) return fail(400, "bad Content-Length");
        n = n * 10 + (c - '0');
      }
      if (r.content_length && *r.content_length != n) return fail(400, "conflicting Content-Length headers");
      r.content_length = n;
    }
  }
  return r;
}

const char* status_reason(int s) {
  switch (s) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

HttpConnection::HttpConnection(int fd, const std::atomic<bool>* stopping) : fd_(fd), stopping_(stopping) {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{30, 0};  // a client that stops reading cannot hold a writer forever
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

HttpConnection::~HttpConnection() {
  shutdown(fd_, SHUT_WR);
  // Lingering close: read (and drop) what the client still sends for a short
  // while, so that closing with unread bytes does not reset the connection
  // before the client has read our reply.
  const auto deadline = Clock::now() + std::chrono::milliseconds(250);
  size_t drained = 0;
  char tmp[4096];
  while (drained < (1u << 20)) {
    const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) break;
    const ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) break;
    drained += size_t(n);
  }
  close(fd_);
}

std::variant<HttpRequest, HeadFailure> HttpConnection::read_head(int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string head;
  size_t scan = 0;
  char tmp[4096];
  for (;;) {
    const size_t end = head.find("\r\n\r\n", scan);
    if (end != std::string::npos) {
      buf_ = head.substr(end + 4);
      head.resize(end + 4);
      return parse_head(head);
    }
    scan = head.size() >= 3 ? head.size() - 3 : 0;
    if (head.size() > kMaxHeadBytes) return fail(431, "the request head is too large", "headers_too_large");
    if (stopping_ && stopping_->load()) return HeadFailure{};
    const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) return head.empty() ? HeadFailure{} : fail(408, "timed out reading the request head", "timeout");
    pollfd p{fd_, POLLIN, 0};
    const int pr = poll(&p, 1, std::min(left, kPollSliceMs));
    if (pr < 0 && errno != EINTR) return HeadFailure{};
    if (pr <= 0) continue;
    const ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return head.empty() ? HeadFailure{} : fail(400, "the connection closed inside the request head");
    head.append(tmp, size_t(n));
  }
}

HttpConnection::BodyRead HttpConnection::read_body(uint64_t n, std::string& body, int idle_timeout_ms) {
  body = std::move(buf_);
  buf_.clear();
  if (body.size() > n) body.resize(n);  // pipelined bytes after the body are ignored (one request per connection)
  body.reserve(n);
  auto last = Clock::now();
  std::string tmp(64 * 1024, '\0');
  while (body.size() < n) {
    if (stopping_ && stopping_->load()) return BodyRead::Stopped;
    const int idle = int(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last).count());
    if (idle >= idle_timeout_ms) return BodyRead::Timeout;
    pollfd p{fd_, POLLIN, 0};
    const int pr = poll(&p, 1, std::min(idle_timeout_ms - idle, kPollSliceMs));
    if (pr < 0 && errno != EINTR) return BodyRead::Truncated;
    if (pr <= 0) continue;
    const size_t want = size_t(std::min<uint64_t>(n - body.size(), tmp.size()));
    const ssize_t got = recv(fd_, tmp.data(), want, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return BodyRead::Truncated;
    body.append(tmp.data(), size_t(got));
    last = Clock::now();
  }
  return BodyRead::Ok;
}

bool HttpConnection::write_all(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(size_t(n));
  }
  return true;
}

bool HttpConnection::peer_closed() {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
  }
  return false;
}

bool HttpConnection::send_response(int status, std::string_view content_type, std::string_view body,
                                   const HeaderList& extra) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
                                status, status_reason(status), content_type, body.size());
  for (const auto& [k, v] : extra) out += fmt::format("{}: {}\r\n", k, v);
  out += "\r\n";
  out += body;
  return write_all(out);
}

bool HttpConnection::send_error(const ApiError& e, const HeaderList& extra) {
  return send_response(e.status, "application/json", e.body(), extra);
}

}  // namespace deltafin::server
