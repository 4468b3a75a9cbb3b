#include "server/http_head.h"

#include <cctype>

#include <fmt/format.h>

namespace deltafin::server {

namespace http = boost::beast::http;

namespace {

constexpr size_t kMaxTarget = 8 * 1024;
constexpr size_t kMaxFields = 100;
constexpr size_t kMaxMethod = 16;

std::string str(boost::beast::string_view s) { return std::string(s.data(), s.size()); }

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

HeadFailure fail(int status, std::string message, std::string code = "invalid_http") {
  return {status, transport_error(status, std::move(message), std::move(code))};
}

}  // namespace

ApiError transport_error(int status, std::string message, std::string code, std::string type) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.code = std::move(code);
  e.type = std::move(type);
  return e;
}

HttpResponse error_response(const ApiError& e, HeaderList headers) {
  return HttpResponse{e.status, "application/json", e.body(), std::move(headers)};
}

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return &v;
  return nullptr;
}

std::variant<HttpRequest, HeadFailure> convert_head(const BeastHead& head, bool chunked,
                                                    std::optional<uint64_t> content_length) {
  HttpRequest r;
  r.method = str(head.method_string());
  r.target = str(head.target());
  r.version = head.version();
  if (r.version != 10 && r.version != 11)
    return fail(505, "only HTTP/1.1 and HTTP/1.0 are supported", "http_version_not_supported");
  if (r.method.size() > kMaxMethod) return fail(400, "malformed request method");
  if (r.target.size() > kMaxTarget) return fail(414, "the request target is over 8 KiB");
  if (r.target.empty() || r.target[0] != '/') return fail(400, "the request target must be an absolute path");
  r.path = r.target.substr(0, r.target.find('?'));
  for (const auto& f : head) {
    if (r.headers.size() >= kMaxFields) return fail(431, "too many headers (over 100)", "headers_too_large");
    r.headers.emplace_back(lower(str(f.name_string())), str(f.value()));
  }
  r.chunked = chunked;
  r.content_length = content_length;
  // Beast frames a request body only by Content-Length or a final chunked coding.
  if (!chunked && r.header("transfer-encoding"))
    return fail(501, "request bodies must use Content-Length or Transfer-Encoding: chunked", "not_implemented");
  return r;
}

HeadFailure head_error(const boost::system::error_code& ec, std::string_view raw) {
  using E = http::error;
  if (ec == E::header_limit || ec == E::buffer_overflow)
    return fail(431, "the request head is over 32 KiB", "headers_too_large");
  if (ec == E::partial_message) return fail(400, "the connection closed inside the request head");
  if (ec == E::bad_transfer_encoding)
    return fail(501, "request bodies must use Content-Length or Transfer-Encoding: chunked", "not_implemented");
  if (ec == E::bad_content_length) return fail(400, "bad Content-Length (malformed, or conflicting with another)");
  if (ec == E::bad_version) {
    // Beast parses "HTTP/d.d" and refuses versions other than 1.0 and 1.1 with the same error.
    const std::string_view line = raw.substr(0, raw.find("\r\n"));
    const bool well_formed = line.size() >= 8 && line.substr(line.size() - 8, 5) == "HTTP/" &&
                             std::isdigit(static_cast<unsigned char>(line[line.size() - 3])) &&
                             line[line.size() - 2] == '.' && std::isdigit(static_cast<unsigned char>(line.back()));
    if (well_formed) return fail(505, "only HTTP/1.1 and HTTP/1.0 are supported", "http_version_not_supported");
    return fail(400, "malformed HTTP version");
  }
  if (ec == E::bad_method) return fail(400, "malformed request method");
  if (ec == E::bad_target) return fail(400, "malformed request target");
  if (ec == E::bad_field) return fail(400, "malformed header name");
  if (ec == E::bad_value) return fail(400, "a header value has a character that is not allowed");
  if (ec == E::bad_obs_fold) return fail(400, "folded header lines are not allowed");
  if (ec == E::bad_line_ending) return fail(400, "malformed line ending in the request head");
  return fail(400, fmt::format("malformed request head ({})", ec.message()));
}

std::variant<HttpRequest, HeadFailure> parse_head(std::string_view bytes) {
  http::request_parser<http::empty_body> p;
  p.header_limit(uint32_t(kMaxHeadBytes));
  p.eager(false);
  boost::system::error_code ec;
  p.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (ec == http::error::need_more) ec = http::error::partial_message;
  if (ec) return head_error(ec, bytes);
  if (!p.is_header_done()) return head_error(http::error::partial_message, bytes);
  std::optional<uint64_t> length;
  if (p.content_length()) length = *p.content_length();
  return convert_head(p.get().base(), p.chunked(), length);
}

}  // namespace deltafin::server
