// Microbenchmarks of the dispatched matrix kernels (not tests). Arguments:
// kernel weight MiB (2: cache-resident, 256: streamed from DRAM), T, threads.
// bytes_per_second counts weight bytes; `deltafin bench-kernels` relates it
// to the measured memory bandwidth.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/activation.h"
#include "kernels/matmul.h"

namespace {

using namespace deltafin;

constexpr size_t kCols = 7168;

enum class Fmt { kBf16, kMxfp4, kF32 };

size_t row_bytes(Fmt f) {
  return f == Fmt::kBf16 ? kCols * 2 : f == Fmt::kF32 ? kCols * 4 : kCols / 2 + kCols / 32;
}

void BM_matmul(benchmark::State& state, Fmt fmt) {
  const size_t bytes = size_t(state.range(0)) << 20;
  const size_t T = size_t(state.range(1));
  const int threads = int(state.range(2));
  const size_t rows = bytes / row_bytes(fmt);
  // Bytes 0x3C..0x3F are normal numbers as BF16, F32 and E8M0 scales.
  std::vector<uint8_t> w(bytes);
  uint64_t s = 88172645463325252ull;
  for (auto& b : w) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    b = uint8_t(0x3C | (s & 3));
  }
  std::vector<float> X(T * kCols), Y(T * rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (auto& x : X) x = normal(rng);
  ThreadPool pool(threads);
  for (auto _ : state) {
    switch (fmt) {
      case Fmt::kBf16:
        kernels::matmul_bf16(reinterpret_cast<const uint16_t*>(w.data()), rows, kCols, X.data(), T, Y.data(), &pool);
        break;
      case Fmt::kF32:
        kernels::matmul_f32(reinterpret_cast<const float*>(w.data()), rows, kCols, X.data(), T, Y.data(), &pool);
        break;
      case Fmt::kMxfp4:
        kernels::matmul_mxfp4(w.data(), w.data() + rows * kCols / 2, rows, kCols, X.data(), T, Y.data(), &pool);
        break;
    }
    benchmark::DoNotOptimize(Y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(rows * row_bytes(fmt)));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(rows) * kCols * double(T) * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t mib : {2, 256})
    for (int64_t T : {1, 16})
      for (int64_t threads : {1, 2}) b->Args({mib, T, threads});
  b->ArgNames({"MiB", "T", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

// One routed expert's products: W1/W3 are [inter, latent], W2 [latent,
// inter]; T rows routed to it. Shapes: K3's (latent 3584, inter 3072) and
// the k3-shaped preset's (latent 512). The weights stay in cache: this is
// the kernels' compute ceiling on one core (threads 1).
void BM_expert_mxfp4(benchmark::State& state) {
  const size_t rows = size_t(state.range(0)), cols = size_t(state.range(1)), T = size_t(state.range(2));
  const int threads = int(state.range(3));
  std::vector<uint8_t> w(rows * cols / 2 + rows * cols / 32);
  uint64_t s = 88172645463325252ull;
  for (auto& b : w) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    b = uint8_t(0x78 | (s & 3));
  }
  std::vector<float> X(T * cols, 0.5f), Y(T * rows);
  ThreadPool pool(threads);
  for (auto _ : state) {
    kernels::matmul_mxfp4(w.data(), w.data() + rows * cols / 2, rows, cols, X.data(), T, Y.data(), &pool);
    benchmark::DoNotOptimize(Y.data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(rows) * double(cols) * double(T) * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_expert_mxfp4)
    ->ArgsProduct({{3072}, {3584}, {1, 8, 16}, {1, 2}})
    ->ArgsProduct({{3584}, {3072}, {1, 8, 16}, {1, 2}})
    ->ArgsProduct({{2720}, {512}, {1, 9, 16}, {1, 2}})
    ->ArgsProduct({{512}, {2720}, {1, 9, 16}, {1, 2}})
    ->ArgNames({"rows", "cols", "T", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_CAPTURE(BM_matmul, bf16, Fmt::kBf16)->Apply(Args);
BENCHMARK_CAPTURE(BM_matmul, mxfp4, Fmt::kMxfp4)->Apply(Args);
BENCHMARK_CAPTURE(BM_matmul, f32, Fmt::kF32)->Apply(Args);

void BM_dot_f32(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  std::vector<float> a(n, 0.5f), b(n, 0.25f);
  for (auto _ : state) benchmark::DoNotOptimize(kernels::dot_f32(a.data(), b.data(), n));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * n * sizeof(float)));
}
BENCHMARK(BM_dot_f32)->Arg(128)->Arg(7168);

// SiTU over one routed expert's intermediate (K3: 3072 per row) for 16 rows:
// the kernel, and the libm loop it replaced (glibc's tanhf and expf), for the
// ratio quoted in docs/results/2026-12-kernels.md. items_per_second counts elements.
std::vector<float> situ_inputs(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

void BM_situ(benchmark::State& state) {
  const size_t n = 3072 * 16;
  const auto g = situ_inputs(n, 1, 3.0f), u = situ_inputs(n, 2, 3.0f);
  std::vector<float> out(n);
  for (auto _ : state) {
    kernels::situ_rows(g.data(), u.data(), n, 4.0f, 25.0f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(n));
}
BENCHMARK(BM_situ);

void BM_situ_libm(benchmark::State& state) {
  const size_t n = 3072 * 16;
  const auto g = situ_inputs(n, 1, 3.0f), u = situ_inputs(n, 2, 3.0f);
  std::vector<float> out(n);
  const float beta = 4.0f, lb = 25.0f;
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) {
      const float t = std::tanh(g[i] / beta) * beta * (1.0f / (1.0f + std::exp(-g[i])));
      out[i] = t * (std::tanh(u[i] / lb) * lb);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(n));
}
BENCHMARK(BM_situ_libm);

}  // namespace
