// Small fp32 building blocks shared by the layers: activations, norms and the
// softmax. Every reduction has a fixed order that does not depend on how many
// rows are in flight. No model types here (the ops layer knows no graph).
#pragma once
#include <cmath>
#include <cstddef>

namespace deltafin::ops {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x * sigmoid(x); }

// out[i] = SiTU(g[i], u[i]) = [b*tanh(g/b)*sigmoid(g)] * [lb*tanh(u/lb)] for
// i < n, in the elementwise order of K3's reference implementation, with the
// model's own exp and tanh (kernels/activation.h). out may alias g.
void situ_rows(const float* g, const float* u, size_t n, float beta, float linear_beta, float* out);

// out[i] = SiLU(g[i]) * u[i] for i < n (the SiLU-gated MLP). out may alias g.
void silu_glu_rows(const float* g, const float* u, size_t n, float* out);

// out = w ⊙ (x * rsqrt(mean(x²) + eps)); w == nullptr gives RMS0. out may alias x.
void rms_norm(const float* x, const float* w, size_t n, float eps, float* out);

// x * rsqrt(Σx² + 1e-6) * scale, in place (KDA's q/k normalisation).
void l2_normalize(float* x, size_t n, float scale);

// The softmax's numerator in place: s[i] = exp(s[i] - max(s)); returns
// Σ s[i] summed in index order. Weight i is then s[i] / sum.
float softmax_exp(float* s, size_t n);

// out = Σ_i (s[i] / sum) · v_i, i in order, where v_i is `values[i]` (n
// vectors of `dim`): the weighted sum after softmax_exp (out zeroed first).
void softmax_mix(const float* s, float sum, size_t n, const float* const* values, size_t dim, float* out);

}  // namespace deltafin::ops
