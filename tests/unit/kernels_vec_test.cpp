// The exact elementwise kernels (vec.h) and grouped products give the scalar
// loops' and the single products' bits.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/vec.h"

namespace deltafin::kernels {
namespace {

std::vector<float> randoms(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp must not see the null data() of an empty vector (UBSan).
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

TEST(KernelsVec, AxpyAndAddAreTheScalarLoops) {
  std::mt19937 rng(5);
  for (size_t n : {0, 1, 7, 16, 31, 64, 100, 1000}) {
    const auto x = randoms(n, rng);
    auto y = randoms(n, rng), want = y;
    const float a = 0.37f;
    axpy(a, x.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) want[i] = want[i] + a * x[i];
    ASSERT_TRUE(same(y, want)) << "axpy n=" << n;
    add(x.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) want[i] = want[i] + x[i];
    ASSERT_TRUE(same(y, want)) << "add n=" << n;
  }
}

TEST(KernelsVec, KdaStepIsTheScalarRecurrence) {
  std::mt19937 rng(9);
  for (size_t D : {1, 5, 16, 32, 33, 64, 128}) {
    auto S = randoms(D * D, rng), S_want = S;
    std::vector<float> decay(D);
    for (auto& d : decay) d = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
    const auto k = randoms(D, rng), v = randoms(D, rng), q = randoms(D, rng);
    std::vector<float> u(D), y(D), u2(D), y2(D);
    for (int step = 0; step < 3; ++step) {
      kda_step(S.data(), D, decay.data(), k.data(), v.data(), q.data(), 0.6f, u.data(), y.data());
      scalar::kda_step(S_want.data(), D, decay.data(), k.data(), v.data(), q.data(), 0.6f, u2.data(), y2.data());
      ASSERT_TRUE(same(S, S_want)) << "D=" << D;
      ASSERT_TRUE(same(y, y2)) << "D=" << D;
    }
  }
}

// A group of products of one X (mixed formats, rows not multiples of any
// tile) equals each product made alone, for any T and thread count.
TEST(KernelsVec, GroupedProductsEqualSingleProducts) {
  std::mt19937 rng(13);
  const size_t cols = 96;
  std::vector<float> Wf = randoms(37 * cols, rng);
  std::vector<uint16_t> Wb(21 * cols);
  for (auto& b : Wb) b = f32_to_bf16(std::normal_distribution<float>()(rng));
  std::vector<uint8_t> packed(10 * cols / 2), scales(10 * cols / 32);
  for (auto& b : packed) b = uint8_t(rng());
  for (auto& s : scales) s = uint8_t(120 + rng() % 15);
  std::vector<int8_t> q(9 * cols);
  std::vector<uint16_t> qs(9);
  for (auto& v : q) v = int8_t(rng());
  for (auto& s : qs) s = f32_to_f16(0.01f + float(rng() % 100) * 1e-3f);
  ThreadPool one(1), two(2), three(3);
  for (size_t T : {1, 2, 3, 5, 16, 40}) {
    const auto X = randoms(T * cols, rng);
    std::vector<float> yf(T * 37), yb(T * 21), ym(T * 10), yq(T * 9);
    matmul_f32(Wf.data(), 37, cols, X.data(), T, yf.data(), nullptr);
    matmul_bf16(Wb.data(), 21, cols, X.data(), T, yb.data(), nullptr);
    matmul_mxfp4(packed.data(), scales.data(), 10, cols, X.data(), T, ym.data(), nullptr);
    matmul_i8(q.data(), qs.data(), 9, cols, X.data(), T, yq.data(), nullptr);
    for (ThreadPool* pool : {(ThreadPool*)nullptr, &one, &two, &three}) {
      std::vector<float> gf(yf.size()), gb(yb.size()), gm(ym.size()), gq(yq.size());
      const MatmulJob jobs[] = {{WeightFormat::kBf16, Wb.data(), nullptr, 21, gb.data()},
                                {WeightFormat::kF32, Wf.data(), nullptr, 37, gf.data()},
                                {WeightFormat::kMxfp4, packed.data(), scales.data(), 10, gm.data()},
                                {WeightFormat::kI8, q.data(), qs.data(), 9, gq.data()}};
      matmul_group(jobs, 4, cols, X.data(), T, pool);
      EXPECT_TRUE(same(gf, yf) && same(gb, yb) && same(gm, ym) && same(gq, yq))
          << "T=" << T << " threads=" << (pool ? pool->size() : 0);
    }
  }
}

}  // namespace
}  // namespace deltafin::kernels
