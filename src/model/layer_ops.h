// Small fp32 building blocks shared by the layers. Every reduction has a fixed
// order that does not depend on how many rows are in flight.
#pragma once
#include <cmath>
#include <cstddef>

#include "core/thread_pool.h"
#include "model/weights.h"

namespace deltafin::ops {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x * sigmoid(x); }

// SiTU(g, u) = [b*tanh(g/b)*sigmoid(g)] * [lb*tanh(u/lb)], evaluated in the
// spec's elementwise order (spec §2.1).
inline float situ(float g, float u, float beta, float linear_beta) {
  float t = g / beta;
  t = std::tanh(t);
  t = t * beta;
  t = t * sigmoid(g);
  float w = u / linear_beta;
  w = std::tanh(w);
  w = w * linear_beta;
  return t * w;
}

// out = w ⊙ (x * rsqrt(mean(x²) + eps)); w == nullptr gives RMS0. out may alias x.
void rms_norm(const float* x, const float* w, size_t n, float eps, float* out);

// Y[T][rows] = X[T][cols] · Mᵀ for a BF16, row-int8 or F32 spine matrix.
void matmul(const Matrix& m, const float* X, size_t T, float* Y, ThreadPool* pool);

// Y[T][rows] for rows [row0, row0+nrows) of m only.
void matmul_rows(const Matrix& m, size_t row0, size_t nrows, const float* X, size_t T, float* Y, ThreadPool* pool);

}  // namespace deltafin::ops
