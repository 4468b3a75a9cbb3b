#include "core/files.h"

#include <fstream>
#include <sstream>

namespace deltafin {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error("{}: cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return error("{}: read error", path);
  return ss.str();
}

}  // namespace deltafin
