// The routed and dense FFN's activation, SiTU, with the model's own exp and
// tanh. Both are evaluated in double precision (Highway's vector Exp and
// Tanh, errors of a few double ulps) and rounded once to fp32, so each is
// the correctly rounded fp32 result except where the true value lies within
// about 2^-50 of a rounding boundary (docs/design/kernels.md, "SiTU's exp and
// tanh", gives the measured counts). The result does not depend on the host's
// libm, nor on the vector width: every element runs the same lane code, a
// tail included, so batch invariance holds bit for bit.
#pragma once
#include <cstddef>

namespace deltafin::kernels {

// out[i] = SiTU(g[i], u[i]) in K3's elementwise order (fp32 steps):
//   t = tanh(g / beta) * beta * sigmoid(g),  sigmoid(g) = 1 / (1 + exp(-g))
//   w = tanh(u / linear_beta) * linear_beta;  out = t * w
// out may alias g or u.
void situ_rows(const float* g, const float* u, size_t n, float beta, float linear_beta, float* out);

// The exp and tanh SiTU uses, elementwise (y may alias x); for tests and the
// accuracy sweep (tools/kernels/activation_ulps.cpp).
void exp_f32(const float* x, float* y, size_t n);
void tanh_f32(const float* x, float* y, size_t n);

}  // namespace deltafin::kernels
