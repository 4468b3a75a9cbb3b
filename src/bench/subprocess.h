// Child processes for the benchmark harness: every measured run is its own
// `deltafin run` process, so no state (arena, caches, allocator) carries over.
#pragma once
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin::bench {

// Runs argv[0] with argv, stdout and stderr redirected to the given files
// (created or truncated); returns its exit code (128 + signal if killed).
Result<int> run_process(const std::vector<std::string>& argv, const std::string& stdout_path,
                        const std::string& stderr_path);

// The path of the running binary (/proc/self/exe).
Result<std::string> self_executable();

}  // namespace deltafin::bench
