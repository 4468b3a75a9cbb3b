#include "bench/kernel_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_detail.h"

namespace deltafin::bench {

namespace {

struct Timing {
  double seconds = 1e30;  // best rep, wall clock
  double cpu_share = 0;   // that rep's process CPU time / (wall * threads)
};

template <typename Fn>
Timing best_of(int reps, int threads, Fn fn) {
  fn();  // warm-up: page tables, dispatch, X buffers
  Timing best;
  for (int i = 0; i < reps; ++i) {
    const double c0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best.seconds) best = {s, (process_cpu_seconds() - c0) / (s * threads)};
  }
  return best;
}

}  // namespace

Result<KernelBenchReport> run_kernel_bench(const KernelBenchOptions& opt) {
  if (opt.threads < 1) return error("bench-kernels: --threads must be at least 1");
  if (opt.weight_mib < 1 || opt.weight_mib > (size_t(1) << 20)) return error("bench-kernels: --mib out of range");
  if (opt.cols == 0 || opt.cols % 32 != 0) return error("bench-kernels: cols must be a positive multiple of 32");
  const size_t bytes = opt.weight_mib << 20;
  ThreadPool pool(opt.threads);
  KernelBenchReport rep;
  rep.threads = opt.threads;
  rep.target = kernels::kernel_target_name();
  rep.membw = measure_read_bandwidth(bytes, pool, opt.reps);

  // One buffer serves every format. Bytes in 0x3C..0x3F read as normal
  // numbers whether taken as BF16, F32 or MXFP4 scales, so no kernel meets
  // subnormal or non-finite values that might run at a different speed.
  std::unique_ptr<uint8_t[]> w(new uint8_t[bytes]);
  pool.parallel_for(bytes, 1 << 16, [&](size_t b, size_t e) {
    uint64_t s = 0x9E3779B97F4A7C15ull ^ b;
    for (size_t i = b; i < e; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      w[i] = uint8_t(0x3C | (s & 3));
    }
  });
  const size_t maxT = *std::max_element(opt.Ts.begin(), opt.Ts.end());
  std::vector<float> X(maxT * opt.cols);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : X) x = normal(rng);

  const size_t cols = opt.cols;
  for (const char* kernel : {"bf16", "i8", "mxfp4", "f32"}) {
    const std::string k = kernel;
    // Bytes of one weight row (row-int8: cols bytes + its F16 scale); the
    // matrix takes as many rows as fit.
    const size_t row_bytes = k == "bf16" ? cols * 2 : k == "f32" ? cols * 4 : k == "i8" ? cols + 2 : cols / 2 + cols / 32;
    const size_t rows = bytes / row_bytes;
    const size_t packed_bytes = rows * cols / 2;
    const size_t i8_bytes = rows * cols;  // F16 scales follow (0x3C3C..0x3F3F: normal halves near 1)
    for (size_t T : opt.Ts) {
      std::vector<float> Y(T * rows);
      auto call = [&] {
        if (k == "bf16")
          kernels::matmul_bf16(reinterpret_cast<const uint16_t*>(w.get()), rows, cols, X.data(), T, Y.data(), &pool);
        else if (k == "f32")
          kernels::matmul_f32(reinterpret_cast<const float*>(w.get()), rows, cols, X.data(), T, Y.data(), &pool);
        else if (k == "i8")
          kernels::matmul_i8(reinterpret_cast<const int8_t*>(w.get()), reinterpret_cast<const uint16_t*>(w.get() + i8_bytes),
                             rows, cols, X.data(), T, Y.data(), &pool);
        else
          kernels::matmul_mxfp4(w.get(), w.get() + packed_bytes, rows, cols, X.data(), T, Y.data(), &pool);
      };
      KernelBenchRow r;
      r.kernel = k;
      r.T = T;
      r.rows = rows;
      r.cols = cols;
      r.weight_bytes = rows * row_bytes;
      const Timing tm = best_of(T == 1 ? opt.reps : std::max(2, opt.reps / 2), opt.threads, call);
      r.seconds = tm.seconds;
      r.cpu_share = tm.cpu_share;
      r.weight_bytes_per_s = double(r.weight_bytes) / r.seconds;
      r.gflops = 2.0 * double(rows) * double(cols) * double(T) / r.seconds * 1e-9;
      rep.rows.push_back(r);
      // Re-measure the bandwidth between kernels and keep the best seen, so
      // a busy moment during the first measurement cannot flatter the ratios.
      const ReadBandwidth again = measure_read_bandwidth(bytes, pool, 2);
      if (again.bytes_per_s > rep.membw.bytes_per_s) {
        rep.membw.bytes_per_s = again.bytes_per_s;
        rep.membw.cpu_share = again.cpu_share;
      }
      rep.membw.reps += again.reps;
    }
  }
  for (auto& r : rep.rows) r.ratio_to_membw = r.weight_bytes_per_s / rep.membw.bytes_per_s;
  return rep;
}

}  // namespace deltafin::bench
