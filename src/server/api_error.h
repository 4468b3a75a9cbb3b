// OpenAI-shaped errors: {"error": {"message", "type", "param", "code"}} with
// the HTTP status that carries them. Client mistakes are values, not crashes.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace deltafin::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;  // the offending field, e.g. "messages[1].content"
  std::optional<std::string> code;

  nlohmann::ordered_json to_json() const;
  // Never throws: invalid UTF-8 echoed from a request becomes U+FFFD.
  std::string body() const;
};

// Compact JSON; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::ordered_json& j);

// 400 invalid_request_error naming `param`.
ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt,
                     std::string code = "invalid_value");

}  // namespace deltafin::server
