// A raw loopback HTTP/1.1 client for server tests: sends bytes as given and
// reads exactly one response at a time by its framing (Content-Length,
// chunked, or until close), keeping what follows for the next one, so tests
// can speak keep-alive, pipelining and malformed input precisely.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

namespace deltafin::testing {

struct RawResponse {
  int status = 0;
  std::string head;                           // status line and fields, without the blank line
  std::map<std::string, std::string> fields;  // lower-cased names (last wins)
  std::string body;                           // de-chunked
  bool chunked = false;
  int chunks = 0;  // data chunks of a chunked body (the last, empty one not counted)
  std::string error;  // why no complete response was read (empty: complete)
  bool ok() const { return error.empty(); }
  std::string field(const std::string& name) const {
    auto it = fields.find(name);
    return it == fields.end() ? "" : it->second;
  }
};

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~RawClient() { close_now(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close_now() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void half_close() { shutdown(fd_, SHUT_WR); }

  // False if the server closed before taking everything (it may answer first).
  bool send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += size_t(n);
    }
    return true;
  }

  // Reads one response (or fails: timeout, close before it was complete).
  RawResponse read(int timeout_ms = 15000) {
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    RawResponse r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return fail(r, "no complete head");
    r.head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    if (r.head.rfind("HTTP/1.", 0) != 0 || r.head.size() < 12) return fail(r, "bad status line: " + r.head.substr(0, 40));
    r.status = std::atoi(r.head.substr(9, 3).c_str());
    size_t pos = r.head.find("\r\n");
    while (pos != std::string::npos) {
      const size_t next = r.head.find("\r\n", pos + 2);
      const std::string line = r.head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      const size_t colon = line.find(':');
      if (colon == std::string::npos || colon == 0) return fail(r, "bad header line: " + line);
      std::string name = line.substr(0, colon);
      for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      r.fields[name] = line.substr(v);
      pos = next;
    }
    if (r.status == 100) return r;  // an interim response: no body
    const std::string te = r.field("transfer-encoding");
    if (te == "chunked") {
      r.chunked = true;
      for (;;) {
        size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos)
          if (!fill()) return fail(r, "chunk size line incomplete");
        const size_t size = std::strtoul(buf_.substr(0, eol).c_str(), nullptr, 16);
        while (buf_.size() < eol + 2 + size + 2)
          if (!fill()) return fail(r, "chunk incomplete");
        if (buf_.compare(eol + 2 + size, 2, "\r\n") != 0) return fail(r, "chunk not followed by CRLF");
        r.body += buf_.substr(eol + 2, size);
        buf_.erase(0, eol + 2 + size + 2);
        if (size == 0) return r;
        ++r.chunks;
      }
    }
    if (r.fields.count("content-length")) {
      const size_t n = std::strtoul(r.field("content-length").c_str(), nullptr, 10);
      while (buf_.size() < n)
        if (!fill()) return fail(r, "body shorter than Content-Length");
      r.body = buf_.substr(0, n);
      buf_.erase(0, n);
      return r;
    }
    while (fill()) {
    }
    if (!closed_) return fail(r, "no framing and no close");
    r.body = std::move(buf_);
    buf_.clear();
    return r;
  }

  // True while the server has sent nothing on this connection and not closed
  // it: what "others were served while this one was still held" checks,
  // without a wall-clock bound.
  bool unanswered() const {
    if (fd_ < 0 || !buf_.empty()) return false;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

  // True if the server closes the connection (EOF) within the time, with no more bytes.
  bool closed_by_server(int timeout_ms = 3000) {
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (fill()) {
    }
    return closed_ && buf_.empty();
  }
  const std::string& pending() const { return buf_; }

 private:
  RawResponse& fail(RawResponse& r, std::string why) {
    r.error = std::move(why);
    return r;
  }
  bool fill() {
    if (closed_ || fd_ < 0) return false;
    const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now()).count());
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) return false;
    char tmp[16384];
    const ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    buf_.append(tmp, size_t(n));
    return true;
  }

  int fd_ = -1;
  std::string buf_;
  bool closed_ = false;
  std::chrono::steady_clock::time_point deadline_;
};

inline std::string post_request(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

}  // namespace deltafin::testing
