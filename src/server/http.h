// A deliberately small HTTP/1.1 server side: one request per connection
// (every response says `Connection: close`), Content-Length bodies only, and
// hard limits on everything read. Owning the socket lets the server answer
// 413/429 before reading a body and notice a client that went away.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "server/api_error.h"

namespace deltafin::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method, target, path, version;
  HeaderList headers;  // names lower-cased
  std::optional<uint64_t> content_length;
  const std::string* header(std::string_view lower_name) const;
};

// A head that could not be read: `status` 0 means send nothing (the client
// left or sent nothing), otherwise answer with `error`.
struct HeadFailure {
  int status = 0;
  ApiError error;
};

constexpr size_t kMaxHeadBytes = 32 * 1024;

// Parses a complete head (request line + headers, ending "\r\n\r\n").
std::variant<HttpRequest, HeadFailure> parse_head(std::string_view head);

const char* status_reason(int status);

class HttpConnection {
 public:
  HttpConnection(int fd, const std::atomic<bool>* stopping);
  ~HttpConnection();  // half-closes, drains briefly (so replies are not lost to a reset), closes
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  std::variant<HttpRequest, HeadFailure> read_head(int timeout_ms);
  enum class BodyRead { Ok, Truncated, Timeout, Stopped };
  // Reads exactly n body bytes. Truncated: the client ended its side first.
  BodyRead read_body(uint64_t n, std::string& body, int idle_timeout_ms);
  bool write_all(std::string_view data);
  // The peer closed or reset its side (checked without blocking).
  bool peer_closed();

  bool send_response(int status, std::string_view content_type, std::string_view body, const HeaderList& extra = {});
  bool send_error(const ApiError& e, const HeaderList& extra = {});

 private:
  int fd_;
  const std::atomic<bool>* stopping_;
  std::string buf_;  // bytes read past the head
};

}  // namespace deltafin::server
