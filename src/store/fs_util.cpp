#include "store/fs_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace deltafin {

Status fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error("{}: cannot open to sync: {}", path, std::strerror(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0 && e != EINVAL) return error("{}: fsync failed: {}", path, std::strerror(e));
  return {};
}

Status rename_durable(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    return error("{}: cannot rename to {}: {}", from, to, std::strerror(errno));
  // A bare file name lives in the working directory ("" is no path to open).
  const std::string dir = std::filesystem::path(to).parent_path().string();
  return fsync_path(dir.empty() ? "." : dir);
}

Status write_file_atomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error("{}: cannot create: {}", tmp, std::strerror(errno));
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return error("{}: write failed: {}", tmp, std::strerror(e));
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return error("{}: fsync failed: {}", tmp, std::strerror(e));
  }
  ::close(fd);
  return rename_durable(tmp, path);
}


}  // namespace deltafin
