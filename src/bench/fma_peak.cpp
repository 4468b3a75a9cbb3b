#include "bench/fma_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "bench/membw.h"
#include "kernels/fma_peak.h"

namespace deltafin::bench {

FmaPeak measure_fma_peak(ThreadPool& pool, int reps, double seconds) {
  using Clock = std::chrono::steady_clock;
  // Size one burst to about `seconds` from a short calibration run.
  float sink = 0;
  size_t iters = 1 << 14;
  for (;;) {
    const auto t0 = Clock::now();
    kernels::fma_burst(iters, &sink);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > seconds / 8 || iters > (size_t(1) << 34)) {
      iters = size_t(double(iters) * seconds / std::max(s, 1e-9));
      break;
    }
    iters *= 4;
  }
  FmaPeak best;
  best.threads = pool.size();
  std::vector<float> sinks(size_t(pool.size()), 0.0f);
  for (int r = 0; r < std::max(1, reps); ++r) {
    std::atomic<uint64_t> flops{0};
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    pool.parallel_for(size_t(pool.size()), 1, [&](size_t b, size_t) {
      flops += kernels::fma_burst(iters, &sinks[b]);
    });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double rate = double(flops.load()) / s;
    if (rate > best.flops_per_s) {
      best.flops_per_s = rate;
      best.cpu_share = (process_cpu_seconds() - c0) / (s * pool.size());
    }
  }
  // Keep the chains' results observable.
  for (float v : sinks) sink += v;
  if (sink == 12345.678f) best.cpu_share += 0;
  return best;
}

}  // namespace deltafin::bench
