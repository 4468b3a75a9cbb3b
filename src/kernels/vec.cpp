// Dispatch for the exact elementwise operations (vec.h).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/vec-inl.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/vec-inl.h"

#if HWY_ONCE
#include "kernels/vec.h"

namespace deltafin::kernels {

HWY_EXPORT(Axpy);
HWY_EXPORT(Add);
HWY_EXPORT(KdaStep);

void axpy(float a, const float* x, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(Axpy)(a, x, y, n); }
void add(const float* x, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(Add)(x, y, n); }
void kda_step(float* S, size_t D, const float* decay, const float* k, const float* v, const float* q, float beta,
              float* u, float* y) {
  HWY_DYNAMIC_DISPATCH(KdaStep)(S, D, decay, k, v, q, beta, u, y);
}

namespace scalar {
void kda_step(float* S, size_t D, const float* decay, const float* k, const float* v, const float* q, float beta,
              float* u, float* y) {
  for (size_t j = 0; j < D; ++j) u[j] = 0.0f;
  for (size_t i = 0; i < D; ++i) {
    float* row = S + i * D;
    for (size_t j = 0; j < D; ++j) {
      row[j] = row[j] * decay[i];
      u[j] = u[j] + k[i] * row[j];
    }
  }
  for (size_t j = 0; j < D; ++j) u[j] = v[j] - u[j];
  for (size_t j = 0; j < D; ++j) y[j] = 0.0f;
  for (size_t i = 0; i < D; ++i) {
    float* row = S + i * D;
    const float bk = beta * k[i], qi = q[i];
    for (size_t j = 0; j < D; ++j) {
      row[j] = row[j] + bk * u[j];
      y[j] = y[j] + qi * row[j];
    }
  }
}
}  // namespace scalar

}  // namespace deltafin::kernels
#endif  // HWY_ONCE
