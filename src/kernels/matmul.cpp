// Dispatching entry points. (Placeholder: row-parallel scalar; the Highway
// implementation replaces the bodies with the same reduction order.)
#include "kernels/matmul.h"

namespace deltafin::kernels {

namespace {
constexpr size_t kGrain = 16;
}

float dot_f32(const float* a, const float* b, size_t n) { return scalar::dot_f32(a, b, n); }

void matmul_f32(const float* W, size_t rows, size_t cols, const float* X, size_t T, float* Y, ThreadPool* pool) {
  if (!pool) return scalar::matmul_f32(W, rows, cols, X, T, Y);
  pool->parallel_for(rows, kGrain, [&](size_t b, size_t e) {
    for (size_t t = 0; t < T; ++t)
      for (size_t o = b; o < e; ++o) Y[t * rows + o] = scalar::dot_f32(W + o * cols, X + t * cols, cols);
  });
}

void matmul_bf16(const uint16_t* W, size_t rows, size_t cols, const float* X, size_t T, float* Y,
                 ThreadPool* pool) {
  if (!pool) return scalar::matmul_bf16(W, rows, cols, X, T, Y);
  pool->parallel_for(rows, kGrain, [&](size_t b, size_t e) {
    for (size_t t = 0; t < T; ++t) {
      // One output row at a time through the scalar contract.
      for (size_t o = b; o < e; ++o) scalar::matmul_bf16(W + o * cols, 1, cols, X + t * cols, 1, Y + t * rows + o);
    }
  });
}

void matmul_mxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const float* X,
                  size_t T, float* Y, ThreadPool* pool) {
  if (!pool) return scalar::matmul_mxfp4(packed, scales, rows, cols, X, T, Y);
  pool->parallel_for(rows, kGrain, [&](size_t b, size_t e) {
    for (size_t t = 0; t < T; ++t)
      for (size_t o = b; o < e; ++o)
        scalar::matmul_mxfp4(packed + o * (cols / 2), scales + o * (cols / 32), 1, cols, X + t * cols, 1,
                             Y + t * rows + o);
  });
}

}  // namespace deltafin::kernels
