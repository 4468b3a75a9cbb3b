// The row-int8 codec (docs/design/store-and-read-engine.md, "Row-int8 spine") and the IEEE-half conversions its
// scales use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/row_int8.h"

namespace deltafin {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Half, EveryHalfWidensExactlyAndNarrowsBack) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << h;
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), uint16_t(h)) << "half 0x" << std::hex << h << " -> " << f;
  }
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
}

TEST(Half, NarrowingRoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): to even (1).
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3*2^-11 lies halfway between 1+2^-10 (odd) and 1+2^-9 (even).
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);  // past half: up
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // the tie above the largest half rounds to infinity
  EXPECT_EQ(f32_to_f16(-1e9f), 0xFC00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);                  // tie between 0 and 2^-24: even (0)
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);                  // tie between 1 and 2 ulps: even (2)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(bits(f16_to_f32(0x8000)), 0x80000000u);
}

// Quantizes one BF16 row given as floats (which must be BF16-exact).
struct Quantized {
  std::vector<int8_t> q;
  uint16_t scale = 0;
  Status status;
};
Quantized quantize(const std::vector<float>& row) {
  std::vector<uint16_t> b;
  for (float f : row) b.push_back(f32_to_bf16(f));
  Quantized out;
  out.q.resize(row.size());
  out.status = quantize_rows_int8(b.data(), 1, row.size(), out.q.data(), &out.scale, "test row");
  return out;
}

TEST(RowInt8, FollowsTheSpecRule) {
  // amax 127 gives scale exactly 1: q is the value rounded half to even.
  auto a = quantize({127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 1.5f, -127.0f, 0.0f});
  ASSERT_TRUE(a.status.ok()) << a.status.message();
  EXPECT_EQ(a.scale, 0x3C00);
  EXPECT_EQ(a.q, (std::vector<int8_t>{127, 2, 4, -2, 0, 2, -127, 0}));
  // An all-zero row takes scale 1 (not 0/127).
  auto z = quantize({0.0f, -0.0f, 0.0f});
  ASSERT_TRUE(z.status.ok());
  EXPECT_EQ(z.scale, 0x3C00);
  EXPECT_EQ(z.q, (std::vector<int8_t>{0, 0, 0}));
  // General row: q = clamp(rne(v / (amax/127))) with the fp32 scale; the stored
  // scale is that scale rounded to fp16.
  const std::vector<float> row = {0.75f, -0.3125f, 0.0078125f, -0.75f, 0.5f};
  auto g = quantize(row);
  ASSERT_TRUE(g.status.ok());
  const float scale = 0.75f / 127.0f;
  EXPECT_EQ(g.scale, f32_to_f16(scale));
  for (size_t j = 0; j < row.size(); ++j) EXPECT_EQ(g.q[j], int8_t(std::nearbyint(row[j] / scale))) << j;
  EXPECT_EQ(g.q[0], 127);
  EXPECT_EQ(g.q[3], -127);
  // The dequantized weight is within half a step (plus the fp16 scale error).
  for (size_t j = 0; j < row.size(); ++j)
    EXPECT_NEAR(float(g.q[j]) * f16_to_f32(g.scale), row[j], 0.5f * scale + 127 * std::abs(f16_to_f32(g.scale) - scale));
}

TEST(RowInt8, RefusesWhatItCannotHold) {
  auto inf = quantize({1.0f, std::numeric_limits<float>::infinity()});
  EXPECT_FALSE(inf.status.ok());
  EXPECT_NE(inf.status.message().find("test row"), std::string::npos) << inf.status.message();
  EXPECT_NE(inf.status.message().find("non-finite"), std::string::npos) << inf.status.message();
  EXPECT_FALSE(quantize({1.0f, std::nanf("")}).status.ok());
  auto huge = quantize({1e9f, 1.0f});  // scale 7.9e6 overflows fp16
  EXPECT_FALSE(huge.status.ok());
  EXPECT_NE(huge.status.message().find("fp16"), std::string::npos) << huge.status.message();
  EXPECT_FALSE(quantize({1e-7f, 0.0f}).status.ok());  // scale 7.9e-10 underflows to 0
}

}  // namespace
}  // namespace deltafin
