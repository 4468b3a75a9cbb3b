// Elementwise fp32 operations that keep each element's scalar arithmetic:
// y[i] = y[i] + a * x[i] is a rounded multiply, then a rounded add (never an
// FMA), element by element, so the vector code gives the scalar loop's bits.
// They are what the layers use for residual adds, attention-weighted sums,
// the MoE combine and the KDA recurrence.
#pragma once
#include <cstddef>

namespace deltafin::kernels {

// y[i] = y[i] + a * x[i]
void axpy(float a, const float* x, float* y, size_t n);
// y[i] = y[i] + x[i]
void add(const float* x, float* y, size_t n);

// One step of the KDA delta rule for one head (S is [D][D], key-major):
//   u = 0; for i: for j: S[i][j] = S[i][j] * decay[i]; u[j] = u[j] + k[i] * S[i][j]
//   u[j] = v[j] - u[j]
//   y = 0; for i: for j: S[i][j] = S[i][j] + (beta * k[i]) * u[j]; y[j] = y[j] + q[i] * S[i][j]
// u and y are [D] outputs (u is scratch).
void kda_step(float* S, size_t D, const float* decay, const float* k, const float* v, const float* q, float beta,
              float* u, float* y);

namespace scalar {
void kda_step(float* S, size_t D, const float* decay, const float* k, const float* v, const float* q, float beta,
              float* u, float* y);
}  // namespace scalar

}  // namespace deltafin::kernels
