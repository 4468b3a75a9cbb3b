// FP8 block weights (the Hub's e4m3 + 128 x 128 weight_scale_inv) through the
// F32 kernel: a band of rows is decoded to fp32 -- each weight the one
// rounded product the contract in matmul.h defines -- and multiplied by the
// F32 path, whose reduction order is the contract's. So every value is what
// a native FP8 kernel under the same contract would give, at the cost of a
// decode per call (docs/design/kernels.md).
#include <algorithm>
#include <array>
#include <vector>

#include "core/dtype.h"
#include "kernels/matmul.h"

namespace deltafin::kernels {

namespace {
// e4m3 code -> fp32, exact (NaN codes are refused at load).
const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[size_t(c)] = e4m3_to_f32(uint8_t(c));
    return t;
  }();
  return table;
}

void decode_rows(const uint8_t* codes, const float* scales, size_t r0, size_t r1, size_t cols, float* out) {
  const auto& lut = e4m3_table();
  const size_t scale_cols = (cols + kFp8Block - 1) / kFp8Block;
  for (size_t o = r0; o < r1; ++o) {
    const uint8_t* w = codes + o * cols;
    const float* s = scales + (o / kFp8Block) * scale_cols;
    float* d = out + (o - r0) * cols;
    for (size_t i = 0; i < cols; ++i) d[i] = lut[w[i]] * s[i / kFp8Block];
  }
}

// One block row at a time bounds the decoded copy (128 x cols fp32).
constexpr size_t kBand = kFp8Block;
}  // namespace

void matmul_fp8_block(const uint8_t* codes, const float* scales, size_t rows, size_t cols, const float* X, size_t T,
                      float* Y, ThreadPool* pool) {
  // Per thread: experts run concurrently on the pool's threads, each with its own buffers.
  thread_local std::vector<float> band, band_y;
  band.resize(kBand * cols);
  band_y.resize(kBand * T);
  float* decoded = band.data();  // the lambda below runs on pool threads: no thread_local inside

  for (size_t r0 = 0; r0 < rows; r0 += kBand) {
    const size_t n = std::min(kBand, rows - r0);
    if (pool && n >= 32)
      pool->parallel_for(n, 8, [&](size_t b, size_t e) { decode_rows(codes, scales, r0 + b, r0 + e, cols, decoded + b * cols); });
    else
      decode_rows(codes, scales, r0, r0 + n, cols, decoded);
    if (n == rows) {  // the whole matrix in one band: write Y in place
      matmul_f32(decoded, n, cols, X, T, Y, pool);
      return;
    }
    matmul_f32(decoded, n, cols, X, T, band_y.data(), pool);
    for (size_t t = 0; t < T; ++t) std::copy(band_y.data() + t * n, band_y.data() + (t + 1) * n, Y + t * rows + r0);
  }
}

}  // namespace deltafin::kernels
