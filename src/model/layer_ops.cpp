#include "model/layer_ops.h"

#include "kernels/matmul.h"

namespace deltafin::ops {

void rms_norm(const float* x, const float* w, size_t n, float eps, float* out) {
  const float ms = kernels::dot_f32(x, x, n) / float(n);
  const float inv = 1.0f / std::sqrt(ms + eps);
  if (w) {
    for (size_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * inv);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  }
}

void matmul_rows(const Matrix& m, size_t row0, size_t nrows, const float* X, size_t T, float* Y, ThreadPool* pool) {
  if (m.dtype == DType::BF16)
    kernels::matmul_bf16(m.bf16() + row0 * m.cols, nrows, m.cols, X, T, Y, pool);
  else if (m.dtype == DType::I8)
    kernels::matmul_i8(m.i8() + row0 * m.cols, m.row_scales + row0, nrows, m.cols, X, T, Y, pool);
  else
    kernels::matmul_f32(m.f32() + row0 * m.cols, nrows, m.cols, X, T, Y, pool);
}

void matmul(const Matrix& m, const float* X, size_t T, float* Y, ThreadPool* pool) {
  matmul_rows(m, 0, m.rows, X, T, Y, pool);
}

}  // namespace deltafin::ops
