#include "kernels/ops.h"

#include <algorithm>

#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "kernels/vec.h"

namespace deltafin::ops {

void situ_rows(const float* g, const float* u, size_t n, float beta, float linear_beta, float* out) {
  kernels::situ_rows(g, u, n, beta, linear_beta, out);
}

void silu_glu_rows(const float* g, const float* u, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = silu(g[i]) * u[i];
}

void rms_norm(const float* x, const float* w, size_t n, float eps, float* out) {
  const float ms = kernels::dot_f32(x, x, n) / float(n);
  const float inv = 1.0f / std::sqrt(ms + eps);
  if (w) {
    for (size_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * inv);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  }
}

void l2_normalize(float* x, size_t n, float scale) {
  float ss = 0.0f;
  for (size_t i = 0; i < n; ++i) ss = ss + x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + 1e-6f);
  for (size_t i = 0; i < n; ++i) x[i] = (x[i] * inv) * scale;
}

float softmax_exp(float* s, size_t n) {
  float mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, s[i]);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    s[i] = std::exp(s[i] - mx);
    sum = sum + s[i];
  }
  return sum;
}

void softmax_mix(const float* s, float sum, size_t n, const float* const* values, size_t dim, float* out) {
  std::fill(out, out + dim, 0.0f);
  for (size_t i = 0; i < n; ++i) kernels::axpy(s[i] / sum, values[i], out, dim);
}

}  // namespace deltafin::ops
