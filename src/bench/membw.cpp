// The read loop is compiled per Highway target so the yardstick uses the
// widest loads the CPU has, as the kernels do.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/membw.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace deltafin::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// XOR of every word, four independent vector chains so loads, not latency,
// bound the loop. n is a multiple of 4 vectors (the caller's slices are).
uint64_t ReadSlice(const uint64_t* p, size_t n) {
  const hn::ScalableTag<uint64_t> d;
  const size_t L = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    a0 = hn::Xor(a0, hn::LoadU(d, p + i));
    a1 = hn::Xor(a1, hn::LoadU(d, p + i + L));
    a2 = hn::Xor(a2, hn::LoadU(d, p + i + 2 * L));
    a3 = hn::Xor(a3, hn::LoadU(d, p + i + 3 * L));
  }
  HWY_ALIGN uint64_t lanes[64];  // >= Lanes on every fixed-width target
  hn::StoreU(hn::Xor(hn::Xor(a0, a1), hn::Xor(a2, a3)), d, lanes);
  uint64_t r = 0;
  for (size_t k = 0; k < L && k < 64; ++k) r ^= lanes[k];
  for (; i < n; ++i) r ^= p[i];
  return r;
}

}  // namespace HWY_NAMESPACE
}  // namespace deltafin::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <time.h>

#include "bench/membw.h"

namespace deltafin::bench {

HWY_EXPORT(ReadSlice);

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

ReadBandwidth measure_read_bandwidth(size_t bytes, ThreadPool& pool, int reps) {
  const size_t words = std::max<size_t>(bytes / 8, 1024) / 1024 * 1024;
  std::unique_ptr<uint64_t[]> buf(new uint64_t[words]);
  // Write every page first, each slice by the thread that will read it.
  pool.parallel_for(words, 1024, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  });
  std::atomic<uint64_t> sink{0};
  ReadBandwidth r;
  r.bytes = words * 8;
  r.reps = reps;
  for (int rep = 0; rep < reps; ++rep) {
    const double c0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(words, 1024, [&](size_t b, size_t e) {
      sink ^= HWY_DYNAMIC_DISPATCH(ReadSlice)(buf.get() + b, e - b);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (double(r.bytes) / s > r.bytes_per_s) {
      r.bytes_per_s = double(r.bytes) / s;
      r.cpu_share = (process_cpu_seconds() - c0) / (s * pool.size());
    }
  }
  r.checksum = sink.load();  // keeps the reads observable
  return r;
}

}  // namespace deltafin::bench
#endif  // HWY_ONCE
