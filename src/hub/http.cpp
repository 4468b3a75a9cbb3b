#include "hub/http.h"

#include "hub/retry.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace deltafin::hub {

namespace {

const char* kUserAgent = "deltafin-setup/1";

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string_view s) {
  std::string o(s);
  for (auto& c : o) c = char(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return std::string(s);
}

// Headers of the last response only: a redirect's headers are dropped when
// the next status line arrives.
struct HeaderSink {
  HttpReply* reply;
  static size_t on_header(char* data, size_t size, size_t n, void* p) {
    auto* self = static_cast<HeaderSink*>(p);
    const std::string_view line(data, size * n);
    if (line.starts_with("HTTP/")) {
      self->reply->link_next.clear(), self->reply->error_code.clear(), self->reply->error_message.clear();
      self->reply->retry_after_s = 0;
      return size * n;
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return size * n;
    const std::string name = lower(trim(line.substr(0, colon)));
    const std::string value = trim(line.substr(colon + 1));
    if (name == "link") self->reply->link_next = parse_link_next(value);
    if (name == "x-error-code") self->reply->error_code = value;
    if (name == "x-error-message") self->reply->error_message = value;
    if (name == "retry-after" && !value.empty() && value.size() < 9 &&
        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      self->reply->retry_after_s = std::stol(value);
    return size * n;
  }
};

struct BodySink {
  std::string* body;
  uint64_t max;
  bool too_big = false;
  static size_t on_data(char* data, size_t size, size_t n, void* p) {
    auto* self = static_cast<BodySink*>(p);
    if (self->body->size() + size * n > self->max) {
      self->too_big = true;
      return 0;  // aborts the transfer
    }
    self->body->append(data, size * n);
    return size * n;
  }
};

// Body bytes of a Range reply go to the file at their offsets (or to memory);
// an error body (status >= 300) is kept, short, for the message.
struct FileSink {
  CURL* curl;
  int fd;
  uint8_t* mem;  // when not null: the destination instead of fd
  uint64_t offset, length, *got;
  const std::function<void(uint64_t)>* on_bytes;
  long status = 0;
  bool whole_file_ok = false;
  std::string error_body{}, failure{};
  static size_t on_data(char* data, size_t size, size_t n, void* p) {
    auto* self = static_cast<FileSink*>(p);
    const size_t len = size * n;
    if (self->status == 0) curl_easy_getinfo(self->curl, CURLINFO_RESPONSE_CODE, &self->status);
    if (self->status != 206 && !(self->status == 200 && self->whole_file_ok)) {
      if (self->error_body.size() < 4096) self->error_body.append(data, std::min<size_t>(len, 4096));
      return len;
    }
    if (*self->got + len > self->length) {
      self->failure = self->status == 200 ? "HTTP 200 with more bytes than asked: the server ignored the Range request"
                                          : "the server sent more bytes than the range asked for";
      return 0;
    }
    size_t done = 0;
    if (self->mem) {
      std::memcpy(self->mem + *self->got, data, len);
      done = len;
    }
    while (done < len) {
      const ssize_t w = ::pwrite(self->fd, data + done, len - done, off_t(self->offset + *self->got + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        self->failure = fmt::format("write failed: {}", std::strerror(errno));
        return 0;
      }
      done += size_t(w);
    }
    *self->got += len;
    if (*self->on_bytes) (*self->on_bytes)(len);
    return len;
  }
};

void common_options(CURL* c, const std::string& url, curl_slist* headers, int stall_timeout_s) {
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, kUserAgent);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // A stalled connection is a failure (retried), never a hang: under 1 KB/s for the stall timeout.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, long(stall_timeout_s));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
}

// A transfer that receives nothing for the stall timeout is ended (libcurl
// calls this about once a second, bytes or not). The low-speed limit alone
// sees a stall late: it averages the speed over the last seconds, and a fast
// start keeps that average up long after the bytes stop.
struct StallWatch {
  std::chrono::steady_clock::duration timeout;
  curl_off_t seen = -1;
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
  bool stalled = false;
  static int on_progress(void* p, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t) {
    auto* self = static_cast<StallWatch*>(p);
    const auto now = std::chrono::steady_clock::now();
    if (dlnow != self->seen) {
      self->seen = dlnow, self->since = now;
      return 0;
    }
    if (now - self->since < self->timeout) return 0;
    self->stalled = true;
    return 1;  // aborts the transfer
  }
};

// One transfer: the last response's headers to `hs`, its body to `on_data`.
CURLcode perform(CURL* c, HeaderSink* hs, curl_write_callback on_data, void* data, char* err, StallWatch* watch) {
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &StallWatch::on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, watch);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &HeaderSink::on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, hs);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, data);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  return curl_easy_perform(c);
}

struct Headers {
  curl_slist* list = nullptr;
  Headers(const std::string& token, std::optional<std::pair<uint64_t, uint64_t>> range) {
    if (!token.empty()) list = curl_slist_append(list, ("Authorization: Bearer " + token).c_str());
    if (range) list = curl_slist_append(list, fmt::format("Range: bytes={}-{}", range->first, range->second).c_str());
  }
  ~Headers() { curl_slist_free_all(list); }
};

}  // namespace

std::string parse_link_next(std::string_view link) {
  // Link: <https://host/api/...&cursor=abc>; rel="next", <...>; rel="prev"
  size_t pos = 0;
  while (pos < link.size()) {
    const size_t lt = link.find('<', pos);
    if (lt == std::string_view::npos) break;
    const size_t gt = link.find('>', lt);
    if (gt == std::string_view::npos) break;
    const size_t next = link.find(',', gt);
    const std::string_view params = link.substr(gt + 1, next == std::string_view::npos ? std::string_view::npos : next - gt - 1);
    const std::string p = lower(params);
    if (p.find("rel=\"next\"") != std::string::npos || p.find("rel=next") != std::string::npos)
      return std::string(link.substr(lt + 1, gt - lt - 1));
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  return "";
}

std::string url_escape(std::string_view s, bool keep_slash) {
  std::string o;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/'))
      o += char(c);
    else
      o += fmt::format("%{:02X}", c);
  }
  return o;
}

std::string describe_http_failure(const std::string& url, const HttpReply& r) {
  std::string why;
  if (!r.error_code.empty()) why = r.error_code;
  if (!r.error_message.empty()) why += (why.empty() ? "" : ": ") + r.error_message;
  if (why.empty() && !r.body.empty() && r.body.size() < 300) why = trim(r.body);
  return fmt::format("GET {}: HTTP {}{}", url, r.status, why.empty() ? "" : " (" + why + ")");
}

HttpClient::HttpClient(std::string bearer_token) : token_(std::move(bearer_token)) {
  global_init();
  curl_ = curl_easy_init();
}

HttpClient::~HttpClient() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<HttpReply> HttpClient::get(const std::string& url, std::optional<std::pair<uint64_t, uint64_t>> range,
                                  uint64_t max_body) {
  last_status_ = 0, last_retryable_ = false, last_retry_after_ = 0;
  if (!curl_) return error("GET {}: libcurl could not start", url);
  CURL* c = static_cast<CURL*>(curl_);
  HttpReply reply;
  Headers headers(token_, range);
  common_options(c, url, headers.list, stall_timeout_s_);
  HeaderSink hs{&reply};
  BodySink bs{&reply.body, max_body};
  char err[CURL_ERROR_SIZE] = {0};
  StallWatch watch{std::chrono::seconds(stall_timeout_s_)};
  const CURLcode rc = perform(c, &hs, &BodySink::on_data, &bs, err, &watch);
  if (watch.stalled) std::snprintf(err, sizeof err, "stalled: no data for %d s", stall_timeout_s_);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  last_status_ = reply.status, last_retry_after_ = reply.retry_after_s;
  if (bs.too_big) return error("GET {}: the reply is larger than {} bytes", url, max_body);
  if (rc != CURLE_OK) {
    last_retryable_ = true;  // no reply, or one cut short
    return error("GET {}: {}", url, err[0] ? err : curl_easy_strerror(rc));
  }
  char* eff = nullptr;
  curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff);
  reply.url = eff ? eff : url;
  return reply;
}

Status HttpClient::get_range(const std::string& url, uint64_t offset, uint64_t length, int fd, uint64_t* got,
                             const std::function<void(uint64_t)>& on_bytes) {
  return range_into(url, offset, length, fd, nullptr, got, on_bytes);
}

Status HttpClient::get_range(const std::string& url, uint64_t offset, uint64_t length, uint8_t* dest, uint64_t* got) {
  static const std::function<void(uint64_t)> kNone;
  return range_into(url, offset, length, -1, dest, got, kNone);
}

Status HttpClient::range_into(const std::string& url, uint64_t offset, uint64_t length, int fd, uint8_t* mem,
                              uint64_t* got, const std::function<void(uint64_t)>& on_bytes) {
  last_status_ = 0, last_retryable_ = false, last_retry_after_ = 0;
  if (!curl_) return error("GET {}: libcurl could not start", url);
  if (*got >= length) return {};
  CURL* c = static_cast<CURL*>(curl_);
  const uint64_t from = offset + *got, to = offset + length - 1;
  Headers headers(token_, std::make_pair(from, to));
  common_options(c, url, headers.list, stall_timeout_s_);
  HttpReply reply;
  HeaderSink hs{&reply};
  FileSink fsink{c, fd, mem, offset, length, got, &on_bytes};
  fsink.whole_file_ok = from == 0;  // a server that ignores Range still serves bytes 0.. correctly
  char err[CURL_ERROR_SIZE] = {0};
  StallWatch watch{std::chrono::seconds(stall_timeout_s_)};
  const CURLcode rc = perform(c, &hs, &FileSink::on_data, &fsink, err, &watch);
  if (watch.stalled) std::snprintf(err, sizeof err, "stalled: no data for %d s", stall_timeout_s_);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &last_status_);
  last_retry_after_ = reply.retry_after_s;
  const std::string range = fmt::format("bytes {}-{}", from, to);
  if (!fsink.failure.empty()) return error("GET {} ({}): {}", url, range, fsink.failure);
  if (last_status_ >= 300) {
    reply.status = last_status_;
    reply.body = fsink.error_body;
    last_retryable_ = retryable_status(last_status_);
    return Status::error(describe_http_failure(url, reply) + " for " + range);
  }
  if (rc != CURLE_OK) {
    last_retryable_ = true;  // no reply, or a body cut short: the bytes written stay, the rest is asked again
    return error("GET {} ({}): {} after {} of {} bytes", url, range, err[0] ? err : curl_easy_strerror(rc),
                 *got, length);
  }
  if (last_status_ != 206 && !(last_status_ == 200 && fsink.whole_file_ok))
    return error("GET {} ({}): HTTP {} instead of 206 Partial Content: the server ignored the Range request", url,
                 range, last_status_);
  if (*got < length) {
    last_retryable_ = true;
    return error("GET {} ({}): the connection ended after {} of {} bytes", url, range, *got, length);
  }
  return {};
}

}  // namespace deltafin::hub
