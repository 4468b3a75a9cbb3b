// FP8 e4m3 with 128 x 128 block scales (the Hub's -FP8 checkpoints): the
// conversions are exact where they must be, and the kernel equals the scalar
// statement of the contract (matmul.h) bit for bit for every T and thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace deltafin::kernels {
namespace {

TEST(Fp8E4m3, EveryCodeRoundTrips) {
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = uint8_t(c);
    const float f = e4m3_to_f32(code);
    if (e4m3_is_nan(code)) {
      EXPECT_TRUE(std::isnan(f)) << c;
      continue;
    }
    ++finite;
    EXPECT_EQ(f32_to_e4m3(f), code) << "code " << c << " value " << f;
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);                 // largest finite
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));   // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));   // smallest normal
  EXPECT_EQ(e4m3_to_f32(0xB8), -1.0f);
}

TEST(Fp8E4m3, RoundsToNearestEvenAndSaturates) {
  // 1.0625 lies halfway between 1.0 (mantissa 0, even) and 1.125: ties to even.
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1.0625f)), 1.0f);
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1.1875f)), 1.25f);  // halfway 1.125 / 1.25: to 1.25 (even)
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1.07f)), 1.125f);
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1000.0f)), 448.0f);
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(-1000.0f)), -448.0f);
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(std::ldexp(1.0f, -11))), 0.0f);  // below half the smallest subnormal
  EXPECT_TRUE(e4m3_is_nan(f32_to_e4m3(std::nanf(""))));
  // Every finite value in range lands on one of its two neighbours.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-448.0f, 448.0f);
  for (int i = 0; i < 100000; ++i) {
    const float f = u(rng) * (i % 3 == 0 ? 1e-3f : 1.0f);
    const float q = e4m3_to_f32(f32_to_e4m3(f));
    EXPECT_LE(std::fabs(q - f), std::fabs(f) / 16 + std::ldexp(1.0f, -10)) << f;
  }
}

struct Fp8Matrix {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

Fp8Matrix random_fp8(size_t rows, size_t cols, std::mt19937& rng) {
  Fp8Matrix m;
  std::uniform_int_distribution<int> code(0, 255);
  std::uniform_real_distribution<float> scale(1e-4f, 3.0f);
  m.codes.resize(rows * cols);
  for (auto& c : m.codes) {
    c = uint8_t(code(rng));
    if (e4m3_is_nan(c)) c = 0x00;
  }
  m.scales.resize(((rows + kFp8Block - 1) / kFp8Block) * ((cols + kFp8Block - 1) / kFp8Block));
  for (auto& s : m.scales) s = scale(rng);
  return m;
}

TEST(KernelsFp8, EqualsTheScalarContractForEveryShapeTAndThreadCount) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ThreadPool two(2);
  for (const auto& [rows, cols] : std::vector<std::pair<size_t, size_t>>{{1, 1}, {7, 33}, {130, 200}, {300, 129}, {256, 256}}) {
    const Fp8Matrix m = random_fp8(rows, cols, rng);
    for (size_t T : {1, 2, 5, 16}) {
      std::vector<float> X(T * cols);
      for (auto& x : X) x = normal(rng);
      std::vector<float> want(T * rows), got(T * rows, -1.0f), got2(T * rows, -2.0f);
      scalar::matmul_fp8_block(m.codes.data(), m.scales.data(), rows, cols, X.data(), T, want.data());
      matmul_fp8_block(m.codes.data(), m.scales.data(), rows, cols, X.data(), T, got.data(), nullptr);
      const MatmulJob job{WeightFormat::kFp8Block, m.codes.data(), m.scales.data(), rows, got2.data()};
      matmul_group(&job, 1, cols, X.data(), T, &two);
      ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << rows << "x" << cols << " T=" << T;
      ASSERT_EQ(std::memcmp(want.data(), got2.data(), want.size() * 4), 0) << rows << "x" << cols << " T=" << T;
    }
  }
}

TEST(KernelsFp8, TheWeightIsTheRoundedProductOfCodeAndBlockScale) {
  // One row, one column: y = w * x with w = fp32(e4m3 * scale) exactly.
  const uint8_t code = 0x3B;  // 1.375
  const float scale = 0.1f, x = 3.0f;
  float y = 0;
  matmul_fp8_block(&code, &scale, 1, 1, &x, 1, &y, nullptr);
  EXPECT_EQ(y, (e4m3_to_f32(code) * scale) * x);
}

}  // namespace
}  // namespace deltafin::kernels
