#include "server/api_error.h"

namespace deltafin::server {

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

nlohmann::ordered_json ApiError::to_json() const {
  nlohmann::ordered_json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param ? nlohmann::ordered_json(*param) : nlohmann::ordered_json(nullptr);
  e["code"] = code ? nlohmann::ordered_json(*code) : nlohmann::ordered_json(nullptr);
  return {{"error", e}};
}

std::string ApiError::body() const { return dump_json(to_json()); }

ApiError bad_request(std::string message, std::optional<std::string> param, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

}  // namespace deltafin::server
