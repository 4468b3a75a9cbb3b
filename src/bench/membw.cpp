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

// XOR of every word. The slice is read as four streams (its quarters) at
// once, each asking L2 for the line 4 KiB ahead: on the machines measured
// this reads about 10% faster than one stream with four vector chains (which
// the GEMV kernels beat), and the probe is meant to be the machine's limit,
// not a figure the kernels can pass (docs/results/2026-12-kernels.md).
uint64_t ReadSlice(const uint64_t* p, size_t n) {
  const hn::ScalableTag<uint64_t> d;
  const size_t L = hn::Lanes(d);
  constexpr size_t kAhead = 4096 / sizeof(uint64_t);
  const size_t q = n / (2 * L * 4) * (2 * L);  // words per stream, whole steps
  const uint64_t* s[4] = {p, p + q, p + 2 * q, p + 3 * q};
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < q; i += 2 * L) {
    for (size_t k = 0; k < 4; ++k)
      for (size_t w = 0; w < 2 * L; w += 64 / sizeof(uint64_t)) __builtin_prefetch(s[k] + i + w + kAhead, 0, 2);
    a0 = hn::Xor(a0, hn::Xor(hn::LoadU(d, s[0] + i), hn::LoadU(d, s[0] + i + L)));
    a1 = hn::Xor(a1, hn::Xor(hn::LoadU(d, s[1] + i), hn::LoadU(d, s[1] + i + L)));
    a2 = hn::Xor(a2, hn::Xor(hn::LoadU(d, s[2] + i), hn::LoadU(d, s[2] + i + L)));
    a3 = hn::Xor(a3, hn::Xor(hn::LoadU(d, s[3] + i), hn::LoadU(d, s[3] + i + L)));
  }
  HWY_ALIGN uint64_t lanes[64];  // >= Lanes on every fixed-width target
  hn::StoreU(hn::Xor(hn::Xor(a0, a1), hn::Xor(a2, a3)), d, lanes);
  uint64_t r = 0;
  for (size_t k = 0; k < L && k < 64; ++k) r ^= lanes[k];
  for (size_t i = 4 * q; i < n; ++i) r ^= p[i];  // the words the four streams left over
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
