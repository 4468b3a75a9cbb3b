// Internals shared by the matmul implementations and their tests.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace deltafin::kernels {

// The contract's final fold of the 32 partial sums (matmul.h): for h in 16, 8,
// 4, 2, 1: acc[j] += acc[j + h] for j < h. Clobbers acc.
inline float tree_sum(float* acc) {
  for (int h = kLanes / 2; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j) acc[j] = acc[j] + acc[j + h];
  return acc[0];
}

// The scalar contract split over output rows by `pool` (may be null): the
// fallback for targets without a fused vector multiply-add.
void scalar_rows_f32(const float* W, size_t rows, size_t cols, const float* X, size_t T, float* Y, ThreadPool* pool);
void scalar_rows_bf16(const uint16_t* W, size_t rows, size_t cols, const float* X, size_t T, float* Y,
                      ThreadPool* pool);
void scalar_rows_mxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const float* X,
                       size_t T, float* Y, ThreadPool* pool);
void scalar_rows_i8(const int8_t* q, const uint16_t* scales_f16, size_t rows, size_t cols, const float* X, size_t T,
                    float* Y, ThreadPool* pool);

// Highway targets compiled into the kernels and supported by this CPU (as
// HWY_* bits), best first. Tests pin each with hwy::SetSupportedTargetsForTest.
std::vector<int64_t> kernel_targets();
// The target the dispatched kernels use now, e.g. "AVX3", and whether it runs
// SIMD code (false: it forwards to the scalar contract).
const char* kernel_target_name();
bool kernel_target_is_simd();

}  // namespace deltafin::kernels
