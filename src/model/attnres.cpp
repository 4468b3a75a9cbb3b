#include "model/attnres.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "model/layer_ops.h"

namespace deltafin {

void depth_mix(const std::vector<const float*>& anchor_values, const std::vector<const float*>& anchor_keys,
               const float* current, const float* c, size_t n, float eps, float* key_scratch, float* out) {
  const size_t N = anchor_values.size() + 1;
  float scores[64];
  ops::rms_norm(current, nullptr, n, eps, key_scratch);
  float mx = -INFINITY;
  for (size_t i = 0; i < N; ++i) {
    const float* key = i + 1 < N ? anchor_keys[i] : key_scratch;
    scores[i] = kernels::dot_f32(key, c, n);
    mx = std::max(mx, scores[i]);
  }
  float sum = 0.0f;
  for (size_t i = 0; i < N; ++i) {
    scores[i] = std::exp(scores[i] - mx);
    sum = sum + scores[i];
  }
  std::fill(out, out + n, 0.0f);
  for (size_t i = 0; i < N; ++i) {
    const float a = scores[i] / sum;
    const float* v = i + 1 < N ? anchor_values[i] : current;
    for (size_t d = 0; d < n; ++d) out[d] = out[d] + a * v[d];
  }
}

}  // namespace deltafin
