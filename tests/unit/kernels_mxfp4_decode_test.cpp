// The MXFP4 fast path decodes each weight by looking it up in a table of
// precomputed products per scale byte: all 16 codes (AVX-512), or the 8
// non-negative ones with the sign xor-ed in (AVX2). Every byte of nibble
// pairs, and every code at every lane position, under every kind of scale
// must decode to the scalar contract's value on every compiled target, and
// the tiled T > 1 paths must agree with it for T that are not a multiple of
// the tile height.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_detail.h"

namespace deltafin::kernels {
namespace {

class PinTarget {
 public:
  explicit PinTarget(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
  ~PinTarget() { hwy::SetSupportedTargetsForTest(0); }
};

// Both ends of the valid range (253 and 254 overflow the large codes to
// inf), subnormal products (0, 1) and ordinary scales.
const std::vector<uint8_t> kScales = {0, 1, 2, 3, 100, 126, 127, 128, 200, 251, 252, 253, 254};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool any_nan(const std::vector<float>& v) {
  for (float f : v)
    if (std::isnan(f)) return true;
  return false;
}

// Row (s, b) holds byte b (both nibbles) at byte 0 and the zero code
// elsewhere, scale s. X row 2j+p is the unit vector e_p times `unit`
// (j = 0, 1 for two signs), so each output is one decoded weight on its own,
// not a sum where an error could cancel. Scales up to 252 only: an inf
// weight times a zero of X would make every output NaN.
TEST(KernelsMxfp4Decode, EveryByteUnderFiniteScalesMatchesTheScalarContract) {
  const size_t cols = 64, T = 4;
  std::vector<uint8_t> packed, scales;
  for (uint8_t s : kScales) {
    if (s > 252) continue;
    for (int b = 0; b < 256; ++b) {
      for (size_t i = 0; i < cols / 2; ++i) packed.push_back(i == 0 ? uint8_t(b) : 0);
      for (size_t g = 0; g < cols / kMxfp4Group; ++g) scales.push_back(s);
    }
  }
  const size_t rows = scales.size() / (cols / kMxfp4Group);
  std::vector<float> X(T * cols, 0.0f);
  X[0 * cols + 0] = 1.0f, X[1 * cols + 1] = 1.0f, X[2 * cols + 0] = -3.0f, X[3 * cols + 1] = -3.0f;
  std::vector<float> want(T * rows);
  scalar::matmul_mxfp4(packed.data(), scales.data(), rows, cols, X.data(), T, want.data());
  ASSERT_FALSE(any_nan(want));
  ASSERT_EQ(want[0 * rows + (6 * 256 + 0x71)], 0.5f);    // low nibble 1 (0.5), scale 127 (6th)
  ASSERT_EQ(want[3 * rows + (7 * 256 + 0x71)], -36.0f);  // high nibble 7 (6.0), scale 128, x = -3
  ThreadPool pool(2);
  for (int64_t target : kernel_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    PinTarget pin(target);
    for (size_t t = 0; t < T; ++t) {
      std::vector<float> got(rows, 12345.0f), row(want.begin() + t * rows, want.begin() + (t + 1) * rows);
      matmul_mxfp4(packed.data(), scales.data(), rows, cols, X.data() + t * cols, 1, got.data(), &pool);
      for (size_t o = 0; o < rows; ++o)
        ASSERT_EQ(0, std::memcmp(&got[o], &row[o], sizeof(float)))
            << "byte " << o % 256 << " scale " << int(scales[o * 2]) << " x row " << t << ": got " << got[o]
            << " want " << row[o];
    }
    std::vector<float> got(T * rows, 12345.0f);
    matmul_mxfp4(packed.data(), scales.data(), rows, cols, X.data(), T, got.data(), &pool);
    ASSERT_TRUE(same_bits(got, want)) << "T = " << T;
  }
}

// Every code at every one of the 32 positions of a group, alone in its row
// (the other codes are +0), under every scale including the overflowing ones:
// X is all ones (no zero meets an inf), so each output is that weight alone.
TEST(KernelsMxfp4Decode, EveryCodeAtEveryPositionUnderEveryScale) {
  const size_t cols = 32;
  std::vector<uint8_t> packed, scales;
  for (uint8_t s : kScales)
    for (int code = 0; code < 16; ++code)
      for (size_t pos = 0; pos < cols; ++pos) {
        for (size_t i = 0; i < cols / 2; ++i) packed.push_back(i == pos / 2 ? uint8_t(code << (4 * (pos % 2))) : 0);
        scales.push_back(s);
      }
  const size_t rows = scales.size(), T = 3;
  std::vector<float> X(T * cols);
  for (size_t i = 0; i < cols; ++i) X[i] = 1.0f, X[cols + i] = -0.5f, X[2 * cols + i] = 3.0f;
  std::vector<float> want(T * rows);
  scalar::matmul_mxfp4(packed.data(), scales.data(), rows, cols, X.data(), T, want.data());
  ASSERT_FALSE(any_nan(want));
  ThreadPool pool(2);
  for (int64_t target : kernel_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    PinTarget pin(target);
    std::vector<float> got(T * rows, 12345.0f), alone(rows, 12345.0f);
    matmul_mxfp4(packed.data(), scales.data(), rows, cols, X.data(), T, got.data(), &pool);
    matmul_mxfp4(packed.data(), scales.data(), rows, cols, X.data(), 1, alone.data(), &pool);
    for (size_t t = 0; t < T; ++t)
      for (size_t o = 0; o < rows; ++o) {
        const size_t k = t * rows + o;
        ASSERT_EQ(0, std::memcmp(&got[k], &want[k], sizeof(float)))
            << "scale " << int(scales[o]) << " code " << (o / cols) % 16 << " position " << o % cols << " x row "
            << t << ": got " << got[k] << " want " << want[k];
      }
    ASSERT_EQ(0, std::memcmp(alone.data(), want.data(), rows * sizeof(float)));
  }
}

// Wide-range inputs, T around the tile heights, rows around the row tiles,
// with and without threads: every output equals the scalar contract and each
// row of a T-row call equals that row computed alone.
TEST(KernelsMxfp4Decode, TiledPathsMatchForAnyTAndRowCount) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255), scale_pick(0, 8);  // scales 0..200: sums stay finite
  ThreadPool one(1), three(3);
  for (int64_t target : kernel_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    PinTarget pin(target);
    for (size_t rows : {1, 3, 6, 9}) {
      const size_t cols = 96;
      std::vector<uint8_t> packed(rows * cols / 2), scales(rows * cols / kMxfp4Group);
      for (auto& b : packed) b = uint8_t(byte(rng));
      for (auto& s : scales) s = kScales[size_t(scale_pick(rng))];
      std::vector<float> X(17 * cols);
      for (auto& x : X) x = std::ldexp(normal(rng), byte(rng) % 20 - 10);
      for (size_t T : {1, 2, 3, 4, 5, 6, 8, 9, 13, 17}) {
        std::vector<float> want(T * rows);
        scalar::matmul_mxfp4(packed.data(), scales.data(), rows, cols, X.data(), T, want.data());
        ASSERT_FALSE(any_nan(want));
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &one, &three}) {
          std::vector<float> got(T * rows, 12345.0f);
          matmul_mxfp4(packed.data(), scales.data(), rows, cols, X.data(), T, got.data(), pool);
          ASSERT_TRUE(same_bits(got, want)) << "rows=" << rows << " T=" << T;
        }
        for (size_t t = 0; t < T; ++t) {
          std::vector<float> alone(rows), row(want.begin() + t * rows, want.begin() + (t + 1) * rows);
          matmul_mxfp4(packed.data(), scales.data(), rows, cols, X.data() + t * cols, 1, alone.data(), &three);
          ASSERT_TRUE(same_bits(alone, row)) << "row " << t << " of T=" << T << " rows=" << rows;
        }
      }
    }
  }
}

}  // namespace
}  // namespace deltafin::kernels
