// Whole-file reads for small files (configs, indexes, manifests, rank files).
#pragma once
#include <string>

#include "core/result.h"

namespace deltafin {

// The file's bytes, or "PATH: cannot open" / "PATH: read error".
Result<std::string> read_file(const std::string& path);

}  // namespace deltafin
