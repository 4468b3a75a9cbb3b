// Reading a JSON-lines file (route traces): each non-blank line parsed and
// handed on with its line number; a line that is not JSON is an error naming
// file:line and what was expected.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"

namespace deltafin::sim {

Status for_each_json_line(const std::string& path, const std::string& expected,
                          const std::function<Status(const nlohmann::json& j, int lineno)>& on_line);

}  // namespace deltafin::sim
