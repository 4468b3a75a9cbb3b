// The scalar statement of the reduction-order contract in matmul.h.
#include <cmath>

#include "core/dtype.h"
#include "kernels/matmul.h"

namespace deltafin::kernels::scalar {

namespace {

template <typename WeightAt>
float ordered_dot(size_t cols, const float* x, WeightAt w) {
  float acc[kLanes] = {};
  const size_t n = (cols + kLanes - 1) / kLanes * kLanes;
  for (size_t i = 0; i < n; ++i) {
    const float wi = i < cols ? w(i) : 0.0f;
    const float xi = i < cols ? x[i] : 0.0f;
    acc[i % kLanes] = std::fma(wi, xi, acc[i % kLanes]);
  }
  for (int h = kLanes / 2; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j) acc[j] = acc[j] + acc[j + h];
  return acc[0];
}

}  // namespace

float dot_f32(const float* a, const float* b, size_t n) {
  return ordered_dot(n, b, [a](size_t i) { return a[i]; });
}

void matmul_f32(const float* W, size_t rows, size_t cols, const float* X, size_t T, float* Y) {
  for (size_t t = 0; t < T; ++t)
    for (size_t o = 0; o < rows; ++o) Y[t * rows + o] = dot_f32(W + o * cols, X + t * cols, cols);
}

void matmul_bf16(const uint16_t* W, size_t rows, size_t cols, const float* X, size_t T, float* Y) {
  for (size_t t = 0; t < T; ++t)
    for (size_t o = 0; o < rows; ++o) {
      const uint16_t* w = W + o * cols;
      Y[t * rows + o] = ordered_dot(cols, X + t * cols, [w](size_t i) { return bf16_to_f32(w[i]); });
    }
}

void matmul_mxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const float* X,
                  size_t T, float* Y) {
  for (size_t t = 0; t < T; ++t)
    for (size_t o = 0; o < rows; ++o) {
      const uint8_t* p = packed + o * (cols / 2);
      const uint8_t* s = scales + o * (cols / kMxfp4Group);
      Y[t * rows + o] = ordered_dot(cols, X + t * cols, [p, s](size_t i) {
        const uint8_t byte = p[i / 2];
        const uint8_t code = (i & 1) ? (byte >> 4) : (byte & 0xF);
        return kE2M1[code] * e8m0_to_f32(s[i / kMxfp4Group]);
      });
    }
}

void matmul_i8(const int8_t* q, const uint16_t* scales, size_t rows, size_t cols, const float* X, size_t T,
               float* Y) {
  for (size_t t = 0; t < T; ++t)
    for (size_t o = 0; o < rows; ++o) {
      const int8_t* w = q + o * cols;
      const float s = f16_to_f32(scales[o]);
      Y[t * rows + o] = ordered_dot(cols, X + t * cols, [w, s](size_t i) { return float(w[i]) * s; });
    }
}

void matmul_fp8_block(const uint8_t* codes, const float* scales, size_t rows, size_t cols, const float* X, size_t T,
                      float* Y) {
  const size_t scale_cols = (cols + kFp8Block - 1) / kFp8Block;
  for (size_t t = 0; t < T; ++t)
    for (size_t o = 0; o < rows; ++o) {
      const uint8_t* w = codes + o * cols;
      const float* s = scales + (o / kFp8Block) * scale_cols;
      Y[t * rows + o] = ordered_dot(cols, X + t * cols, [w, s](size_t i) { return e4m3_to_f32(w[i]) * s[i / kFp8Block]; });
    }
}

}  // namespace deltafin::kernels::scalar
