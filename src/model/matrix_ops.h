// Products of the spine's matrices (BF16 or row-int8 `Matrix` views) with
// fp32 rows, on the kernels of src/kernels/matmul.h.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <utility>

#include "core/thread_pool.h"
#include "model/weights.h"

namespace deltafin::ops {

// Y[T][rows] = X[T][cols] · Mᵀ.
void matmul(const Matrix& m, const float* X, size_t T, float* Y, ThreadPool* pool);
// Y[T][nrows] for rows [row0, row0+nrows) of m only.
void matmul_rows(const Matrix& m, size_t row0, size_t nrows, const float* X, size_t T, float* Y, ThreadPool* pool);
// Several matrices of the same input (same cols): one dispatch, the same values.
void matmul_group(std::initializer_list<std::pair<const Matrix*, float*>> mats, const float* X, size_t T,
                  ThreadPool* pool);

}  // namespace deltafin::ops
