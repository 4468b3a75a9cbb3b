#include "model/attnres.h"

#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace deltafin {

void depth_mix(const AnchorRow& a, const float* current, const float* c, size_t dim, float eps, float* key_scratch,
               float* out) {
  const size_t N = a.count + 1;
  float scores[kMaxAnchors + 1];
  const float* values[kMaxAnchors + 1];
  ops::rms_norm(current, nullptr, dim, eps, key_scratch);
  for (size_t i = 0; i < N; ++i) {
    const float* key = i < a.count ? a.keys + i * dim : key_scratch;
    scores[i] = kernels::dot_f32(key, c, dim);
    values[i] = i < a.count ? a.values + i * dim : current;
  }
  const float sum = ops::softmax_exp(scores, N);
  ops::softmax_mix(scores, sum, N, values, dim, out);
}

}  // namespace deltafin
