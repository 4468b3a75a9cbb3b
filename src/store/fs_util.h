// Durable file steps for prepare: write to a temp name, fsync, rename, fsync
// the directory, so a file either has its final name and full contents or is
// absent, whatever point the process is killed at.
#pragma once
#include <string>

#include "core/files.h"
#include "core/result.h"

namespace deltafin {

Status write_file_atomic(const std::string& path, const std::string& contents);
Status fsync_path(const std::string& path);  // a file or a directory
Status rename_durable(const std::string& from, const std::string& to);

}  // namespace deltafin
