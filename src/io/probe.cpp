#include "io/probe.h"

#include "io/io_buffer.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

namespace deltafin::io {

namespace {
using Clock = std::chrono::steady_clock;

struct Target {
  int fd;
  uint64_t blocks;
};

struct Fds {
  std::vector<Target> t;
  ~Fds() {
    for (auto& x : t) ::close(x.fd);
  }
};
}  // namespace

std::string ProbeResult::mode() const {
  return fmt::format("{}+{}", uring ? "io_uring" : "pread", direct ? "O_DIRECT" : "buffered");
}

Result<ProbeResult> probe_files(const std::vector<std::string>& files, uint64_t block, int qd, uint64_t max_bytes,
                                double max_seconds, uint64_t seed, uint64_t footprint) {
  if (block == 0 || block % 4096 || qd < 1) return error("probe: block must be a multiple of 4096 and qd >= 1");
  ProbeResult r;
  r.direct = true;
  Fds fds;
  for (const auto& f : files) {
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0 && errno == EINVAL) fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC), r.direct = false;
    if (fd < 0) return error("{}: cannot open for the probe: {}", f, std::strerror(errno));
    struct stat st {};
    ::fstat(fd, &st);
    if (uint64_t(st.st_size) < block) {
      ::close(fd);
      continue;
    }
    fds.t.push_back({fd, uint64_t(st.st_size) / block});
  }
  if (fds.t.empty()) return error("probe: no file of at least {} bytes", block);
  // One region of slots (the engine's kind of buffer, io_buffer.h), written
  // once before the clock starts so that page faults are not timed; the
  // reads take the slots in turn (see probe.h for why not just qd buffers).
  const size_t slots = size_t(std::max<uint64_t>(uint64_t(qd), (footprint + block - 1) / block));
  uint8_t* region = alloc_io_buffer(slots * block);
  if (!region) return error("probe: cannot allocate {} bytes for its reads", slots * block);
  std::memset(region, 0, slots * block);
  r.footprint = slots * block;
  struct FreeRegion {
    uint8_t* p;
    ~FreeRegion() { free_io_buffer(p); }
  } free_region{region};
  auto slot_at = [&](size_t i) { return region + i * block; };
  std::mt19937_64 rng(seed);
  auto pick = [&](Target*& t, uint64_t& off) {
    t = &fds.t[rng() % fds.t.size()];
    off = (rng() % t->blocks) * block;
  };
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  Status failure;
  io_uring ring{};
  if (io_uring_queue_init(unsigned(qd), &ring, 0) == 0) {
    r.uring = true;
    uint64_t issued = 0;
    int in_flight = 0;
    std::deque<size_t> free_slots;  // oldest first, so the reads go round the whole region
    for (size_t i = 0; i < slots; ++i) free_slots.push_back(i);
    auto issue = [&] {
      Target* t;
      uint64_t off;
      pick(t, off);
      const size_t slot = free_slots.front();
      free_slots.pop_front();
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_read(sqe, t->fd, slot_at(slot), unsigned(block), off);
      io_uring_sqe_set_data(sqe, reinterpret_cast<void*>(uintptr_t(slot)));
      issued += block;
      in_flight++;
    };
    for (int s = 0; s < qd && issued < max_bytes; ++s) issue();
    while (in_flight > 0) {
      io_uring_submit_and_wait(&ring, 1);
      io_uring_cqe* cqe;
      while (io_uring_peek_cqe(&ring, &cqe) == 0) {
        free_slots.push_back(size_t(uintptr_t(io_uring_cqe_get_data(cqe))));
        const int res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        in_flight--;
        if (res < 0 && failure.ok()) failure = error("probe: read failed: {}", std::strerror(-res));
        if (res > 0) r.bytes += uint64_t(res);
        if (failure.ok() && issued < max_bytes && elapsed() < max_seconds) issue();
      }
    }
    io_uring_queue_exit(&ring);
  } else {
    std::atomic<uint64_t> issued{0}, done{0};
    std::mutex mu;
    std::vector<std::thread> th;
    for (int s = 0; s < qd; ++s)
      th.emplace_back([&, s] {
        // Thread s goes round the slots s, s + qd, s + 2 qd, ...
        for (size_t slot = size_t(s); issued.fetch_add(block) < max_bytes && elapsed() < max_seconds;) {
          Target* t;
          uint64_t off;
          {
            std::lock_guard<std::mutex> lock(mu);
            pick(t, off);
          }
          ssize_t n = ::pread(t->fd, slot_at(slot), block, off_t(off));
          if (n <= 0) break;
          done += uint64_t(n);
          slot = slot + size_t(qd) < slots ? slot + size_t(qd) : size_t(s);
        }
      });
    for (auto& t : th) t.join();
    r.bytes = done;
  }
  r.seconds = elapsed();
  if (!failure.ok()) return failure;
  r.mb_s = r.seconds > 0 ? double(r.bytes) / r.seconds / 1e6 : 0;
  return r;
}

Result<ProbeResult> probe_directory(const std::string& dir, uint64_t bytes, uint64_t block, int qd, double max_seconds) {
  const std::string path = (std::filesystem::path(dir) / fmt::format(".deltafin-probe-{}", ::getpid())).string();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error("{}: cannot write the probe file: {}", path, std::strerror(errno));
  std::vector<uint8_t> buf(4 << 20);
  std::mt19937_64 rng(42);
  for (auto& b : buf) b = uint8_t(rng());
  Status st;
  for (uint64_t done = 0; done < bytes && st.ok();) {
    const size_t n = size_t(std::min<uint64_t>(buf.size(), bytes - done));
    if (::write(fd, buf.data(), n) != ssize_t(n)) st = error("{}: write failed: {}", path, std::strerror(errno));
    done += n;
  }
  if (st.ok() && ::fsync(fd) != 0) st = error("{}: fsync failed: {}", path, std::strerror(errno));
  ::close(fd);
  Result<ProbeResult> r = st.ok() ? probe_files({path}, block, qd, bytes * 4, max_seconds) : Result<ProbeResult>(st);
  ::unlink(path.c_str());
  return r;
}

bool io_uring_available() {
  io_uring ring{};
  if (io_uring_queue_init(2, &ring, 0) != 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

Result<bool> direct_io_supported(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / fmt::format(".deltafin-odirect-{}", ::getpid())).string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error("{}: cannot create a file: {}", dir, std::strerror(errno));
  ::close(fd);
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  const bool ok = fd >= 0;
  if (fd >= 0) ::close(fd);
  ::unlink(path.c_str());
  return ok;
}

}  // namespace deltafin::io
