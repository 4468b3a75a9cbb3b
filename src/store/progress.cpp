#include "store/progress.h"

#include <unistd.h>

#include <fmt/format.h>

namespace deltafin {

Progress::Progress(std::string what, uint64_t total, bool quiet)
    : what_(std::move(what)), total_(total), quiet_(quiet), tty_(::isatty(2) != 0) {
  start_ = last_ = std::chrono::steady_clock::now();
}

void Progress::add(uint64_t bytes) {
  done_ += bytes;
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (since >= (tty_ ? 0.1 : 5.0)) {
    last_ = now;
    draw(false);
  }
}

void Progress::finish() {
  if (!quiet_) draw(true);
}

void Progress::draw(bool final) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = secs > 0 ? double(done_) / secs : 0;
  const double frac = total_ ? std::min(1.0, double(done_) / double(total_)) : 1.0;
  const double eta = rate > 0 && total_ > done_ ? double(total_ - done_) / rate : 0;
  std::string line = fmt::format("{}: {:.1f}/{:.1f} MB ({:.0f}%) {:.1f} MB/s ETA {:.0f} s", what_, done_ / 1e6,
                                 total_ / 1e6, 100 * frac, rate / 1e6, eta);
  if (tty_) {
    const int width = 30, filled = int(frac * width);
    std::fprintf(stderr, "\r[%s%s] %s\033[K%s", std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), '.').c_str(), line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace deltafin
