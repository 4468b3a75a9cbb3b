#include "bench/kernel_bench.h"

#include <algorithm>
#include <atomic>
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
  rep.fma = measure_fma_peak(pool, opt.reps);
  auto remeasure = [&] {
    // Keep the best seen, so a busy moment during the first measurement
    // cannot flatter the ratios.
    const ReadBandwidth again = measure_read_bandwidth(bytes, pool, 2);
    if (again.bytes_per_s > rep.membw.bytes_per_s) {
      rep.membw.bytes_per_s = again.bytes_per_s;
      rep.membw.cpu_share = again.cpu_share;
    }
    rep.membw.reps += again.reps;
    const FmaPeak fma = measure_fma_peak(pool, 2);
    if (fma.flops_per_s > rep.fma.flops_per_s) rep.fma = fma;
  };

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
      remeasure();
    }
  }

  // Routed experts: as many distinct experts as fill the weight buffer (so
  // they stream from DRAM, as experts just read from a drive do), each
  // thread taking whole experts in turn, W1 and W3 then W2 on T rows.
  const size_t LT = opt.expert_latent, I = opt.expert_inter;
  if (LT % 32 == 0 && I % 32 == 0 && LT > 0 && I > 0) {
    const size_t mat_bytes = I * LT / 2 + I * LT / 32;
    const size_t n_experts = std::max<size_t>(size_t(pool.size()) * 2, bytes / (3 * mat_bytes));
    if (n_experts * 3 * mat_bytes <= bytes) {
      const size_t maxTe = *std::max_element(opt.expert_Ts.begin(), opt.expert_Ts.end());
      // W2's input is a normal-valued stand-in for the SiTU output: the
      // buffer's tiny scales would make W1's outputs x W2 subnormal, which
      // runs at another speed than real activations.
      std::vector<float> Xe(maxTe * LT), Xi(maxTe * I), H1(size_t(pool.size()) * maxTe * I), H3(H1.size()),
          Out(size_t(pool.size()) * maxTe * LT);
      for (size_t i = 0; i < Xe.size(); ++i) Xe[i] = X[i % X.size()];
      for (size_t i = 0; i < Xi.size(); ++i) Xi[i] = X[(i * 7) % X.size()];
      for (size_t T : opt.expert_Ts) {
        auto call = [&] {
          std::atomic<size_t> next{0};
          pool.parallel_for(size_t(pool.size()), 1, [&](size_t th, size_t) {
            float* h1 = H1.data() + th * maxTe * I;
            float* h3 = H3.data() + th * maxTe * I;
            float* out = Out.data() + th * maxTe * LT;
            for (size_t e = next++; e < n_experts; e = next++) {
              const uint8_t* base = w.get() + e * 3 * mat_bytes;
              auto mat = [&](int k) { return base + size_t(k) * mat_bytes; };
              kernels::matmul_mxfp4(mat(0), mat(0) + I * LT / 2, I, LT, Xe.data(), T, h1, nullptr);
              kernels::matmul_mxfp4(mat(1), mat(1) + I * LT / 2, I, LT, Xe.data(), T, h3, nullptr);
              kernels::matmul_mxfp4(mat(2), mat(2) + I * LT / 2, LT, I, Xi.data(), T, out, nullptr);
            }
          });
        };
        KernelBenchRow r;
        r.kernel = "expert";
        r.T = T;
        r.rows = I;
        r.cols = LT;
        r.weight_bytes = n_experts * 3 * mat_bytes;
        const Timing tm = best_of(std::max(2, opt.reps / 2), opt.threads, call);
        r.seconds = tm.seconds;
        r.cpu_share = tm.cpu_share;
        r.weight_bytes_per_s = double(r.weight_bytes) / r.seconds;
        r.gflops = 3 * 2.0 * double(I) * double(LT) * double(T) * double(n_experts) / r.seconds * 1e-9;
        rep.experts.push_back(r);
        remeasure();
      }
    }
  }
  for (auto* list : {&rep.rows, &rep.experts})
    for (auto& r : *list) {
      r.ratio_to_membw = r.weight_bytes_per_s / rep.membw.bytes_per_s;
      r.ratio_to_fma_peak = r.gflops * 1e9 / rep.fma.flops_per_s;
    }
  return rep;
}

}  // namespace deltafin::bench
