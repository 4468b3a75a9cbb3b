#include "model/matrix_ops.h"

#include "kernels/matmul.h"

namespace deltafin::ops {

namespace {
kernels::MatmulJob job_of(const Matrix& m, size_t row0, size_t nrows, float* Y) {
  using kernels::WeightFormat;
  const size_t c = size_t(m.cols);
  if (m.dtype == DType::BF16) return {WeightFormat::kBf16, m.bf16() + row0 * c, nullptr, nrows, Y};
  if (m.dtype == DType::I8) return {WeightFormat::kI8, m.i8() + row0 * c, m.row_scales + row0, nrows, Y};
  if (m.dtype == DType::F8_E4M3) {
    // Block scales go with whole 128-row bands: a slice must start on one.
    const size_t band = row0 / kFp8Block, scale_cols = (c + kFp8Block - 1) / kFp8Block;
    return {WeightFormat::kFp8Block, static_cast<const uint8_t*>(m.data) + row0 * c,
            m.block_scales + band * scale_cols, nrows, Y};
  }
  return {WeightFormat::kF32, m.f32() + row0 * c, nullptr, nrows, Y};
}
}  // namespace

void matmul_rows(const Matrix& m, size_t row0, size_t nrows, const float* X, size_t T, float* Y, ThreadPool* pool) {
  const kernels::MatmulJob job = job_of(m, row0, nrows, Y);
  kernels::matmul_group(&job, 1, size_t(m.cols), X, T, pool);
}

void matmul(const Matrix& m, const float* X, size_t T, float* Y, ThreadPool* pool) {
  matmul_rows(m, 0, size_t(m.rows), X, T, Y, pool);
}

void matmul_group(std::initializer_list<std::pair<const Matrix*, float*>> mats, const float* X, size_t T,
                  ThreadPool* pool) {
  kernels::MatmulJob jobs[8];
  size_t n = 0, cols = 0;
  for (const auto& [m, Y] : mats) {
    if (n == 8 || (n > 0 && size_t(m->cols) != cols)) {  // not one group: flush
      kernels::matmul_group(jobs, n, cols, X, T, pool);
      n = 0;
    }
    cols = size_t(m->cols);
    jobs[n++] = job_of(*m, 0, size_t(m->rows), Y);
  }
  if (n) kernels::matmul_group(jobs, n, cols, X, T, pool);
}

}  // namespace deltafin::ops
