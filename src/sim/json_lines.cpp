#include "sim/json_lines.h"

#include <fstream>

namespace deltafin::sim {

Status for_each_json_line(const std::string& path, const std::string& expected,
                          const std::function<Status(const nlohmann::json& j, int lineno)>& on_line) {
  std::ifstream in(path);
  if (!in) return error("{}: cannot open the route trace", path);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      return error("{}:{}: not valid JSON (expected {})", path, lineno, expected);
    }
    DF_TRY(on_line(j, lineno));
  }
  return {};
}

}  // namespace deltafin::sim
