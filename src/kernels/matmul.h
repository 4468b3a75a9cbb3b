// Matrix products over the checkpoint's weight formats, batch-invariant by
// construction.
//
// Layout: W is [rows, cols] row-major; X holds T input rows of `cols` floats
// (row t at X + t*cols); Y receives T output rows of `rows` floats (row t at
// Y + t*rows). Y[t][o] = sum_i W[o][i] * X[t][i].
//
// THE REDUCTION ORDER (the contract every implementation must meet bit for bit,
// whatever the SIMD target, T, or thread count):
//   w_i is the weight widened exactly to fp32 (BF16: top half; MXFP4:
//   e2m1(code) * 2^(scale-127), an exact fp32 product; row-int8:
//   float(q) * f16_to_f32(row scale), also exact: 7 x 11 significant bits;
//   FP8 block (the Hub's e4m3 weights with one fp32 weight_scale_inv per
//   128 x 128 block): e4m3_to_f32(code) * scale as ONE fp32 multiply, rounded
//   to nearest even -- 4 x 24 significant bits do not always fit, so this
//   rounded product is, by definition, the weight).
//   32 partial sums acc[0..31] start at +0.0f. For i = 0 .. roundup(cols,32)-1
//   (elements past cols are w=0, x=0): acc[i % 32] = fma(w_i, x_i, acc[i % 32]).
//   Then a fixed pairwise tree: for h in 16, 8, 4, 2, 1: acc[j] = acc[j] + acc[j+h]
//   for j < h. The result is acc[0].
// Threads split output rows only, so the thread count cannot change a value.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"

namespace deltafin::kernels {

inline constexpr int kLanes = 32;

void matmul_bf16(const uint16_t* W, size_t rows, size_t cols, const float* X, size_t T, float* Y,
                 ThreadPool* pool);
void matmul_f32(const float* W, size_t rows, size_t cols, const float* X, size_t T, float* Y,
                ThreadPool* pool);
// MXFP4: packed [rows, cols/2] (element 2j in the low nibble), scales
// [rows, cols/32] E8M0. cols must be a multiple of 32.
void matmul_mxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const float* X,
                  size_t T, float* Y, ThreadPool* pool);
// FP8 block: codes [rows, cols] e4m3, scales fp32 [ceil(rows/128), ceil(cols/128)].
void matmul_fp8_block(const uint8_t* codes, const float* scales, size_t rows, size_t cols, const float* X, size_t T,
                      float* Y, ThreadPool* pool);
// Row-int8 (core/row_int8.h): q [rows, cols] int8, one IEEE-half scale per row.
void matmul_i8(const int8_t* q, const uint16_t* scales_f16, size_t rows, size_t cols, const float* X, size_t T,
               float* Y, ThreadPool* pool);

// Several products of the same X (say q, k, v and g projections of one
// input): X is put in each order it is needed in once, and one dispatch
// splits the rows of all of them over the threads. Every output is what the
// single-matrix call gives.
enum class WeightFormat : uint8_t { kF32, kBf16, kMxfp4, kI8, kFp8Block };
struct MatmulJob {
  WeightFormat format = WeightFormat::kF32;
  const void* w = nullptr;       // F32, BF16, MXFP4 blocks [rows, cols/2] or int8 [rows, cols]
  const void* scales = nullptr;  // MXFP4: E8M0 [rows, cols/32]; row-int8: F16 [rows]; FP8: F32 blocks; else null
  size_t rows = 0;
  float* Y = nullptr;            // [T][rows]
};
void matmul_group(const MatmulJob* jobs, size_t n_jobs, size_t cols, const float* X, size_t T, ThreadPool* pool);

// A single dot product with the same order (used for attention and norms of
// small vectors where a matrix product does not fit).
float dot_f32(const float* a, const float* b, size_t n);

// The scalar statement of the contract, used by tests to check the fast paths.
namespace scalar {
void matmul_bf16(const uint16_t* W, size_t rows, size_t cols, const float* X, size_t T, float* Y);
void matmul_f32(const float* W, size_t rows, size_t cols, const float* X, size_t T, float* Y);
void matmul_mxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const float* X,
                  size_t T, float* Y);
void matmul_i8(const int8_t* q, const uint16_t* scales_f16, size_t rows, size_t cols, const float* X, size_t T,
               float* Y);
void matmul_fp8_block(const uint8_t* codes, const float* scales, size_t rows, size_t cols, const float* X, size_t T,
                      float* Y);
float dot_f32(const float* a, const float* b, size_t n);
}  // namespace scalar

}  // namespace deltafin::kernels
