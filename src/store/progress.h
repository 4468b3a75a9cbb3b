// Progress for long passes: a bar with rate and ETA redrawn in place on a
// terminal, plain lines (every ~5 s) otherwise.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace deltafin {

class Progress {
 public:
  Progress(std::string what, uint64_t total_bytes, bool quiet = false);
  void set_total(uint64_t total) { total_ = total; }
  void add(uint64_t bytes);
  void finish();

 private:
  void draw(bool final);
  std::string what_;
  uint64_t total_ = 0, done_ = 0;
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace deltafin
