#include "model/weights.h"

#include <cmath>
#include <cstring>

#include "core/row_int8.h"
#include "model/families/families.h"

namespace deltafin {

std::string layer_prefix(int layer) { return fmt::format("language_model.model.layers.{}.", layer); }

std::string expert_tensor_name(int layer, int expert, const char* part, const char* kind) {
  return fmt::format("language_model.model.layers.{}.block_sparse_moe.experts.{}.{}.{}", layer, expert, part, kind);
}

void Matrix::row_f32(size_t r, float* out) const {
  const size_t n = size_t(cols);
  if (dtype == DType::I8) {
    const int8_t* q = i8() + r * n;
    const float s = f16_to_f32(row_scales[r]);
    for (size_t c = 0; c < n; ++c) out[c] = float(q[c]) * s;
  } else if (dtype == DType::BF16) {
    const uint16_t* w = bf16() + r * n;
    for (size_t c = 0; c < n; ++c) out[c] = bf16_to_f32(w[c]);
  } else if (dtype == DType::F8_E4M3) {
    const uint8_t* q = static_cast<const uint8_t*>(data) + r * n;
    const float* s = block_scales + (r / kFp8Block) * ((n + kFp8Block - 1) / kFp8Block);
    for (size_t c = 0; c < n; ++c) out[c] = e4m3_to_f32(q[c]) * s[c / kFp8Block];
  } else {
    std::memcpy(out, f32() + r * n, n * sizeof(float));
  }
}

Result<ModelWeights> ModelWeights::bind(const Checkpoint& ck, const ModelConfig& c, bool check_values) {
  return family_of(c).bind(ck, c, check_values);
}

}  // namespace deltafin
