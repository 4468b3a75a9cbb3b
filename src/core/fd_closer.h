// Closes a file descriptor when the scope ends (every return path of a
// function that opened it).
#pragma once
#include <unistd.h>

namespace deltafin {

struct FdCloser {
  int fd = -1;
  explicit FdCloser(int f) : fd(f) {}
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
};

}  // namespace deltafin
