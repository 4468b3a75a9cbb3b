#include "core/row_int8.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"

namespace deltafin {

Status quantize_rows_int8(const uint16_t* w, size_t rows, size_t cols, int8_t* q, uint16_t* scales,
                          const std::string& what) {
  for (size_t r = 0; r < rows; ++r) {
    const uint16_t* row = w + r * cols;
    float amax = 0.0f;
    for (size_t j = 0; j < cols; ++j) {
      const float v = bf16_to_f32(row[j]);
      if (!std::isfinite(v)) return error("{}: row {} column {}: non-finite weight {}", what, r, j, v);
      amax = std::max(amax, std::fabs(v));
    }
    const float scale = amax == 0.0f ? 1.0f : amax / 127.0f;
    const uint16_t half = f32_to_f16(scale);
    const float stored = f16_to_f32(half);
    if (!std::isfinite(stored) || stored == 0.0f)
      return error("{}: row {}: max |w| {} gives a row-int8 scale {} that fp16 cannot hold", what, r, amax, scale);
    scales[r] = half;
    int8_t* out = q + r * cols;
    for (size_t j = 0; j < cols; ++j) {
      // nearbyint rounds half to even under the default rounding mode.
      const float v = std::nearbyint(bf16_to_f32(row[j]) / scale);
      out[j] = int8_t(std::clamp(v, -127.0f, 127.0f));
    }
  }
  return {};
}

}  // namespace deltafin
