// Inside the transport: Beast's parsed request head turned into an
// HttpRequest under our rules, and parser errors turned into HTTP statuses.
// Included only by the transport's .cpp files (it pulls in Beast).
#pragma once
#include <variant>

#include "server/beast.h"

#include "server/http_transport.h"

namespace deltafin::server {

using BeastHead = boost::beast::http::request_header<>;

// HTTP/1.0 and 1.1 only, origin-form targets up to 8 KiB, at most 100 header
// fields, methods up to 16 characters; names lower-cased.
std::variant<HttpRequest, HeadFailure> convert_head(const BeastHead& head, bool chunked,
                                                    std::optional<uint64_t> content_length);

// A parser error while reading a head: the status and message to answer.
// `raw`: the unparsed bytes (tells a well-formed other HTTP version, 505, from garbage).
HeadFailure head_error(const boost::system::error_code& ec, std::string_view raw);

}  // namespace deltafin::server
