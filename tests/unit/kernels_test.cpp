// The dispatched kernels must equal the scalar contract bit for bit on every
// compiled Highway target, for every T and thread count (matmul.h).
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_detail.h"

namespace deltafin::kernels {
namespace {

// Inputs that separate a fused multiply-add from mul+add and expose any
// change of order: ordinary values, signed zeros, huge, tiny and subnormal.
float wild_float(std::mt19937& rng) {
  std::uniform_int_distribution<int> kind(0, 19);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-1.0f, 1.0f);
  switch (kind(rng)) {
    case 0: return -0.0f;
    case 1: return 0.0f;
    case 2: return normal(rng) * std::pow(10.0f, 15.0f * (1.0f + exponent(rng)) / 2.0f);   // up to 1e15
    case 3: return normal(rng) * std::pow(10.0f, -20.0f + 18.0f * exponent(rng));          // 1e-38 .. 1e-2
    case 4: return normal(rng) * 1e-40f;                                                 // subnormal
    default: return normal(rng);
  }
}

std::vector<float> wild_floats(size_t n, std::mt19937& rng) {
  std::vector<float> v(n);
  for (auto& f : v) f = wild_float(rng);
  return v;
}

std::vector<uint16_t> wild_bf16(size_t n, std::mt19937& rng) {
  std::vector<uint16_t> v(n);
  std::uniform_int_distribution<int> raw(0, 0xFFFF);
  for (size_t i = 0; i < n; ++i) {
    if (i % 7 == 3) {
      uint16_t b = uint16_t(raw(rng));
      if ((b & 0x7F80) == 0x7F80) b &= 0xBFFF;  // no inf / NaN patterns
      v[i] = b;
    } else {
      v[i] = f32_to_bf16(wild_float(rng));
    }
  }
  return v;
}

struct Mxfp4Matrix {
  std::vector<uint8_t> packed, scales;
};

// Every nibble code; scale bytes spread over the whole valid range 0..254,
// with most groups near 127 so results are not all overflow or zero.
Mxfp4Matrix wild_mxfp4(size_t rows, size_t cols, std::mt19937& rng) {
  Mxfp4Matrix m;
  m.packed.resize(rows * cols / 2);
  m.scales.resize(rows * cols / kMxfp4Group);
  std::uniform_int_distribution<int> byte(0, 255), any_scale(0, 254), near(112, 142), pick(0, 3);
  for (auto& b : m.packed) b = uint8_t(byte(rng));
  for (auto& s : m.scales) s = uint8_t(pick(rng) == 0 ? any_scale(rng) : near(rng));
  if (!m.scales.empty()) m.scales.front() = 0, m.scales.back() = 254;
  return m;
}

struct I8Matrix {
  std::vector<int8_t> q;
  std::vector<uint16_t> scales;  // F16
};

// Every int8 value (including -128, which the quantizer never writes but the
// kernel must still treat as the contract says); scales over the whole normal
// and subnormal half range, most near 1.
I8Matrix wild_i8(size_t rows, size_t cols, std::mt19937& rng) {
  I8Matrix m;
  m.q.resize(rows * cols);
  m.scales.resize(rows);
  std::uniform_int_distribution<int> byte(-128, 127), any_half(1, 0x7BFF), pick(0, 3);
  std::normal_distribution<float> near(0.0f, 0.5f);
  for (auto& q : m.q) q = int8_t(byte(rng));
  for (auto& s : m.scales) s = uint16_t(pick(rng) == 0 ? any_half(rng) : f32_to_f16(std::exp(near(rng)))) | uint16_t(pick(rng) == 1 ? 0x8000 : 0);
  return m;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Pins the dispatched kernels to one Highway target for its lifetime.
class PinTarget {
 public:
  explicit PinTarget(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
  ~PinTarget() { hwy::SetSupportedTargetsForTest(0); }
};

const std::vector<size_t> kTs = {1, 2, 3, 7, 16, 33, 70};  // 70: two blocks of the panel path

struct Pools {
  ThreadPool one{1}, two{2}, three{3};
  std::vector<ThreadPool*> all() { return {nullptr, &one, &two, &three}; }
};

// Runs `fast(T, Y, pool)` for every T and pool and compares with `ref(T, Y)`;
// also checks that row t of a T-row call equals the same row alone (T = 1).
template <typename Fast, typename Ref>
void check_all(const std::string& what, size_t rows, size_t cols, const std::vector<float>& X, Pools& pools,
               Fast fast, Ref ref) {
  for (size_t T : kTs) {
    std::vector<float> want(T * rows);
    ref(X.data(), T, want.data());
    for (ThreadPool* pool : pools.all()) {
      std::vector<float> got(T * rows, 12345.0f);
      fast(X.data(), T, got.data(), pool);
      ASSERT_TRUE(same_bits(got, want)) << what << " rows=" << rows << " cols=" << cols << " T=" << T
                                        << " threads=" << (pool ? pool->size() : 0);
    }
    for (size_t t = 0; t < T; t += 5) {
      std::vector<float> alone(rows), row(want.begin() + t * rows, want.begin() + (t + 1) * rows);
      fast(X.data() + t * cols, 1, alone.data(), &pools.two);
      ASSERT_TRUE(same_bits(alone, row)) << what << " row " << t << " of T=" << T << " differs from T=1";
    }
  }
}

void check_current_target(Pools& pools, std::mt19937& rng) {
  // The last two span several column chunks of the many-row panel path
  // (kPanelK groups each) with a partial last group and row counts that
  // leave every tail tile height.
  const std::vector<std::pair<size_t, size_t>> shapes = {{1, 1},   {5, 31},   {17, 32}, {33, 33},
                                                         {40, 100}, {19, 257}, {23, 801}, {11, 1600}};
  for (auto [rows, cols] : shapes) {
    const auto X = wild_floats(70 * cols, rng);
    const auto Wf = wild_floats(rows * cols, rng);
    check_all("f32", rows, cols, X, pools,
              [&](const float* x, size_t T, float* y, ThreadPool* p) { matmul_f32(Wf.data(), rows, cols, x, T, y, p); },
              [&](const float* x, size_t T, float* y) { scalar::matmul_f32(Wf.data(), rows, cols, x, T, y); });
    const auto Wb = wild_bf16(rows * cols, rng);
    check_all("bf16", rows, cols, X, pools,
              [&](const float* x, size_t T, float* y, ThreadPool* p) { matmul_bf16(Wb.data(), rows, cols, x, T, y, p); },
              [&](const float* x, size_t T, float* y) { scalar::matmul_bf16(Wb.data(), rows, cols, x, T, y); });
    const auto Wq = wild_i8(rows, cols, rng);
    check_all(
        "i8", rows, cols, X, pools,
        [&](const float* x, size_t T, float* y, ThreadPool* p) {
          matmul_i8(Wq.q.data(), Wq.scales.data(), rows, cols, x, T, y, p);
        },
        [&](const float* x, size_t T, float* y) { scalar::matmul_i8(Wq.q.data(), Wq.scales.data(), rows, cols, x, T, y); });
  }
  const std::vector<std::pair<size_t, size_t>> mx_shapes = {{1, 32}, {7, 64}, {18, 96}, {37, 320}, {29, 1600}};
  for (auto [rows, cols] : mx_shapes) {
    const auto X = wild_floats(70 * cols, rng);
    const auto m = wild_mxfp4(rows, cols, rng);
    check_all(
        "mxfp4", rows, cols, X, pools,
        [&](const float* x, size_t T, float* y, ThreadPool* p) {
          matmul_mxfp4(m.packed.data(), m.scales.data(), rows, cols, x, T, y, p);
        },
        [&](const float* x, size_t T, float* y) {
          scalar::matmul_mxfp4(m.packed.data(), m.scales.data(), rows, cols, x, T, y);
        });
  }
  for (size_t n = 0; n <= 130; ++n) {
    const auto a = wild_floats(n, rng), b = wild_floats(n, rng);
    const float got = dot_f32(a.data(), b.data(), n), want = scalar::dot_f32(a.data(), b.data(), n);
    ASSERT_EQ(0, std::memcmp(&got, &want, sizeof(float))) << "dot_f32 n=" << n;
  }
}

TEST(Kernels, EveryCompiledTargetMatchesTheScalarContractBitForBit) {
  Pools pools;
  const auto targets = kernel_targets();
  ASSERT_FALSE(targets.empty());
  int simd_targets = 0;
  for (int64_t target : targets) {
    SCOPED_TRACE(hwy::TargetName(target));
    PinTarget pin(target);
    ASSERT_STREQ(hwy::TargetName(target), kernel_target_name());  // dispatch really switched
    simd_targets += kernel_target_is_simd();
    std::mt19937 rng{uint32_t(target & 0xFFFFFFFF) ^ uint32_t(target >> 32)};
    check_current_target(pools, rng);
  }
#if defined(__x86_64__)
  // On an AVX2 machine the SIMD code must actually have been exercised.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_GE(simd_targets, 1);
  }
#endif
}

TEST(Kernels, DefaultDispatchMatchesTheScalarContract) {
  Pools pools;
  std::mt19937 rng(7);
  check_current_target(pools, rng);
}

// The contract computes a matrix product: compare with a double-precision
// sum on tame inputs (guards against both paths agreeing on nonsense).
TEST(Kernels, ResultsAreTheMatrixProduct) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t rows = 9, cols = 96, T = 3;
  std::vector<float> X(T * cols), W(rows * cols), Y(T * rows), Yb(T * rows), Ym(T * rows);
  std::vector<uint16_t> Wb(rows * cols);
  for (auto& x : X) x = u(rng);
  for (size_t i = 0; i < W.size(); ++i) W[i] = bf16_to_f32(Wb[i] = f32_to_bf16(u(rng)));
  auto m = wild_mxfp4(rows, cols, rng);
  for (auto& s : m.scales) s = uint8_t(120 + s % 10);
  auto q = wild_i8(rows, cols, rng);
  std::vector<float> Yq(T * rows);
  ThreadPool pool(2);
  matmul_i8(q.q.data(), q.scales.data(), rows, cols, X.data(), T, Yq.data(), &pool);
  matmul_f32(W.data(), rows, cols, X.data(), T, Y.data(), &pool);
  matmul_bf16(Wb.data(), rows, cols, X.data(), T, Yb.data(), &pool);
  matmul_mxfp4(m.packed.data(), m.scales.data(), rows, cols, X.data(), T, Ym.data(), &pool);
  for (size_t t = 0; t < T; ++t)
    for (size_t o = 0; o < rows; ++o) {
      double want = 0, want_mx = 0, want_q = 0, mag_q = 0;
      for (size_t i = 0; i < cols; ++i) {
        want += double(W[o * cols + i]) * X[t * cols + i];
        const double wq = double(q.q[o * cols + i]) * double(f16_to_f32(q.scales[o]));
        want_q += wq * X[t * cols + i];
        mag_q += std::abs(wq * X[t * cols + i]);
        const uint8_t byte = m.packed[o * cols / 2 + i / 2];
        const double w = kE2M1[(i & 1) ? byte >> 4 : byte & 15] * std::ldexp(1.0, m.scales[o * cols / 32 + i / 32] - 127);
        want_mx += w * X[t * cols + i];
      }
      EXPECT_NEAR(Y[t * rows + o], want, 1e-4);
      EXPECT_NEAR(Yb[t * rows + o], want, 1e-4);
      EXPECT_NEAR(Ym[t * rows + o], want_mx, 1e-4 * std::max(1.0, std::abs(want_mx)));
      EXPECT_NEAR(Yq[t * rows + o], want_q, 1e-5 * std::max(1.0, mag_q));
    }
}

}  // namespace
}  // namespace deltafin::kernels
