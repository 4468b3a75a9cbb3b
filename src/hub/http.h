// A small HTTP(S) client over libcurl for the Hub's interface: GETs of small
// documents (listings, safetensors headers) and Range GETs written straight
// into a file at their offsets. One HttpClient is one connection (reused
// across requests); use one per thread.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/result.h"

namespace deltafin::hub {

struct HttpReply {
  long status = 0;
  std::string body;
  std::string url;            // the last URL after redirects
  std::string link_next;      // the Link header's rel="next" target (listing pages)
  std::string error_code;     // X-Error-Code (the Hub's reason for a 4xx)
  std::string error_message;  // X-Error-Message
  long retry_after_s = 0;     // Retry-After in seconds (0: none, or an HTTP date)
};

// "GET URL: HTTP 404 Not Found (RevisionNotFound: ...)": a reply's failure in one line.
std::string describe_http_failure(const std::string& url, const HttpReply& r);
// The target of rel="next" in a Link header value, or "".
std::string parse_link_next(std::string_view link);
// Percent-encodes everything but unreserved characters (and '/' when keep_slash).
std::string url_escape(std::string_view s, bool keep_slash);

class HttpClient {
 public:
  // `bearer_token` (may be empty) goes out as "Authorization: Bearer ..." to
  // the host asked; libcurl drops it on a redirect to another host (a CDN).
  explicit HttpClient(std::string bearer_token);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // A transfer that receives no byte for this long fails ("stalled: no data
  // for S s"), as does one under 1 KiB/s for as long by libcurl's averaged
  // speed ("Operation too slow"); default 30 s.
  void set_stall_timeout(int seconds) { stall_timeout_s_ = seconds; }

  // GET with redirects; any HTTP status is a reply (the caller judges it),
  // a transport failure is an error. A body over `max_body` bytes is an error.
  Result<HttpReply> get(const std::string& url, std::optional<std::pair<uint64_t, uint64_t>> range = {},
                        uint64_t max_body = 256ull << 20);

  // GET bytes [offset, offset + length) of `url` and pwrite them into `fd` at
  // the same offsets. `*got` counts the bytes written, also on failure, so a
  // retry asks for the rest only. `on_bytes` is told of each piece written.
  // Fails on a transport error, a status other than 206 (or 200 for a whole
  // file from offset 0), more bytes than asked, or a short body.
  Status get_range(const std::string& url, uint64_t offset, uint64_t length, int fd, uint64_t* got,
                   const std::function<void(uint64_t)>& on_bytes);
  // The same into memory: bytes [offset, offset + length) to dest[0, length).
  Status get_range(const std::string& url, uint64_t offset, uint64_t length, uint8_t* dest, uint64_t* got);

  // Of the last request: its HTTP status (0: no reply), whether its failure
  // is worth a retry (no reply, a reply cut short, 408, 429, 5xx; never a
  // 4xx refusal, a server ignoring Range or a local write failure), and the
  // server's Retry-After in seconds.
  long last_status() const { return last_status_; }
  bool last_retryable() const { return last_retryable_; }
  long last_retry_after() const { return last_retry_after_; }

 private:
  Status range_into(const std::string& url, uint64_t offset, uint64_t length, int fd, uint8_t* mem, uint64_t* got,
                    const std::function<void(uint64_t)>& on_bytes);
  void* curl_ = nullptr;  // CURL*
  std::string token_;
  int stall_timeout_s_ = 30;
  long last_status_ = 0;
  bool last_retryable_ = false;
  long last_retry_after_ = 0;
};

}  // namespace deltafin::hub
