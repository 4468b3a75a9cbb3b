// SiTU's own exp and tanh (kernels/activation.h): within one ulp of the
// correctly rounded value everywhere sampled, exact at the special values,
// and SiTU gives an element the same bits wherever it sits in a batch.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/activation.h"
#include "kernels/ulp.h"

namespace deltafin::kernels {
namespace {

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

float exp1(float x) {
  float y;
  exp_f32(&x, &y, 1);
  return y;
}

float tanh1(float x) {
  float y;
  tanh_f32(&x, &y, 1);
  return y;
}

TEST(KernelsActivation, UlpDistanceCountsRepresentableFloats) {
  EXPECT_EQ(ulp_distance(1.0f, 1.0f), 0);
  EXPECT_EQ(ulp_distance(0.0f, -0.0f), 0);
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)), 1);
  EXPECT_EQ(ulp_distance(from_bits(1), from_bits(0x80000001u)), 2);  // smallest subnormals either side of 0
}

// Every 65,521st bit pattern (about 65,500 floats of every sign and exponent):
// each result equals the double-precision libm value rounded to fp32 (glibc's
// own expf and tanhf differ from it on 0.004% and 2.8% of all inputs).
TEST(KernelsActivation, ExpAndTanhAreWithinOneUlpOfTheRoundedDoubleValue) {
  std::vector<float> x, e(0), t(0);
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 65521) {
    const float f = from_bits(uint32_t(b));
    if (!std::isnan(f)) x.push_back(f);
  }
  e.resize(x.size());
  t.resize(x.size());
  exp_f32(x.data(), e.data(), x.size());
  tanh_f32(x.data(), t.data(), x.size());
  size_t exp_off = 0, tanh_off = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float we = float(std::exp(double(x[i]))), wt = float(std::tanh(double(x[i])));
    const int64_t de = ulp_distance(e[i], we), dt = ulp_distance(t[i], wt);
    ASSERT_LE(de, 1) << "exp(" << x[i] << ") = " << e[i] << ", want " << we;
    ASSERT_LE(dt, 1) << "tanh(" << x[i] << ") = " << t[i] << ", want " << wt;
    // (A double-rounding boundary case could differ by one ulp; the full sweep
    // over all 2^32 inputs found none, docs/design/kernels.md.)
    exp_off += de != 0;
    tanh_off += dt != 0;
  }
  EXPECT_EQ(exp_off, 0u) << "of " << x.size();
  EXPECT_EQ(tanh_off, 0u) << "of " << x.size();
}

TEST(KernelsActivation, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp1(0.0f), 1.0f);
  EXPECT_EQ(exp1(-0.0f), 1.0f);
  EXPECT_EQ(exp1(-inf), 0.0f);
  EXPECT_EQ(exp1(inf), inf);
  EXPECT_EQ(exp1(89.0f), inf);      // past FLT_MAX: overflows as fp32 does
  EXPECT_EQ(exp1(-104.0f), 0.0f);   // below the smallest subnormal
  EXPECT_EQ(exp1(-100.0f), float(std::exp(-100.0)));  // a subnormal, rounded once
  EXPECT_GT(exp1(-100.0f), 0.0f);
  EXPECT_EQ(exp1(1.0f), float(M_E));
  EXPECT_TRUE(std::isnan(exp1(std::nanf(""))));
  EXPECT_EQ(tanh1(0.0f), 0.0f);
  EXPECT_EQ(bits(tanh1(-0.0f)), bits(-0.0f));
  EXPECT_EQ(tanh1(inf), 1.0f);
  EXPECT_EQ(tanh1(-inf), -1.0f);
  EXPECT_EQ(tanh1(20.0f), 1.0f);
  EXPECT_EQ(tanh1(-20.0f), -1.0f);
  EXPECT_EQ(tanh1(1e-20f), 1e-20f);
  EXPECT_EQ(tanh1(from_bits(1)), from_bits(1));  // smallest subnormal
  EXPECT_TRUE(std::isnan(tanh1(std::nanf(""))));
}

// SiTU of one element, from the kernels' exp and tanh, one fp32 step at a time.
float situ_steps(float g, float u, float beta, float lbeta) {
  float t = tanh1(g / beta) * beta;
  t = t * (1.0f / (1.0f + exp1(-g)));
  return t * (tanh1(u / lbeta) * lbeta);
}

TEST(KernelsActivation, SituIsTheElementwiseStepsAtAnyBatchSizeAndOffset) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 6.0f);
  const float beta = 4.0f, lbeta = 25.0f;
  std::vector<float> g(300), u(300);
  for (size_t i = 0; i < g.size(); ++i) g[i] = normal(rng), u[i] = 20.0f * normal(rng);
  g[3] = -200.0f;  // exp(-g) overflows: sigmoid 0
  g[4] = 200.0f;
  u[5] = 0.0f;
  std::vector<float> want(g.size());
  for (size_t i = 0; i < g.size(); ++i) want[i] = situ_steps(g[i], u[i], beta, lbeta);
  for (size_t off : {0, 1, 3, 5, 8}) {
    for (size_t n : {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 100, 257}) {
      std::vector<float> out(n);
      situ_rows(g.data() + off, u.data() + off, n, beta, lbeta, out.data());
      ASSERT_EQ(std::memcmp(out.data(), want.data() + off, n * 4), 0) << "offset " << off << ", n " << n;
    }
  }
  // In place, as the MoE calls it (out aliases g).
  std::vector<float> inplace = g;
  situ_rows(inplace.data(), u.data(), g.size(), beta, lbeta, inplace.data());
  EXPECT_EQ(std::memcmp(inplace.data(), want.data(), want.size() * 4), 0);
}

TEST(KernelsActivation, SituIsCloseToTheRealFunction) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 5.0f);
  const float beta = 4.0f, lbeta = 25.0f;
  for (int i = 0; i < 2000; ++i) {
    const float g = normal(rng), u = 10.0f * normal(rng);
    float out;
    situ_rows(&g, &u, 1, beta, lbeta, &out);
    const double want = (beta * std::tanh(double(g) / beta) / (1.0 + std::exp(-double(g)))) *
                        (lbeta * std::tanh(double(u) / lbeta));
    // Seven fp32 roundings, each within half an ulp, and two functions within one.
    EXPECT_NEAR(out, want, 8e-7 * std::fabs(want) + 1e-30) << "g " << g << ", u " << u;
  }
  // The shape: ~ g·sigmoid(g)·u near 0, saturating at beta·lbeta.
  float g = 60.0f, u = 1000.0f, out;
  situ_rows(&g, &u, 1, beta, lbeta, &out);
  EXPECT_EQ(out, 100.0f);
}

}  // namespace
}  // namespace deltafin::kernels
