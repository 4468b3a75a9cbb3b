// The scalar contract, split over output rows by the thread pool.
#include "core/dtype.h"
#include "kernels/matmul_detail.h"

namespace deltafin::kernels {

namespace {
constexpr size_t kGrain = 16;

template <typename RowFn>
void for_rows(size_t rows, size_t T, float* Y, ThreadPool* pool, RowFn row_fn) {
  auto body = [&](size_t b, size_t e) {
    for (size_t t = 0; t < T; ++t)
      for (size_t o = b; o < e; ++o) Y[t * rows + o] = row_fn(t, o);
  };
  if (pool)
    pool->parallel_for(rows, kGrain, body);
  else
    body(0, rows);
}
}  // namespace

void scalar_rows_f32(const float* W, size_t rows, size_t cols, const float* X, size_t T, float* Y, ThreadPool* pool) {
  for_rows(rows, T, Y, pool, [&](size_t t, size_t o) { return scalar::dot_f32(W + o * cols, X + t * cols, cols); });
}

void scalar_rows_bf16(const uint16_t* W, size_t rows, size_t cols, const float* X, size_t T, float* Y,
                      ThreadPool* pool) {
  for_rows(rows, T, Y, pool, [&](size_t t, size_t o) {
    float y;
    scalar::matmul_bf16(W + o * cols, 1, cols, X + t * cols, 1, &y);
    return y;
  });
}

void scalar_rows_mxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const float* X,
                       size_t T, float* Y, ThreadPool* pool) {
  for_rows(rows, T, Y, pool, [&](size_t t, size_t o) {
    float y;
    scalar::matmul_mxfp4(packed + o * (cols / 2), scales + o * (cols / kMxfp4Group), 1, cols, X + t * cols, 1, &y);
    return y;
  });
}

void scalar_rows_i8(const int8_t* q, const uint16_t* scales, size_t rows, size_t cols, const float* X, size_t T,
                    float* Y, ThreadPool* pool) {
  for_rows(rows, T, Y, pool, [&](size_t t, size_t o) {
    float y;
    scalar::matmul_i8(q + o * cols, scales + o, 1, cols, X + t * cols, 1, &y);
    return y;
  });
}

}  // namespace deltafin::kernels
