// Dispatch for SiTU and its exp and tanh (activation.h).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/activation-inl.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/activation-inl.h"

#if HWY_ONCE
#include "kernels/activation.h"

namespace deltafin::kernels {

HWY_EXPORT(SituRows);
HWY_EXPORT(ExpRows);
HWY_EXPORT(TanhRows);

void situ_rows(const float* g, const float* u, size_t n, float beta, float linear_beta, float* out) {
  HWY_DYNAMIC_DISPATCH(SituRows)(g, u, n, beta, linear_beta, out);
}
void exp_f32(const float* x, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(ExpRows)(x, y, n); }
void tanh_f32(const float* x, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(TanhRows)(x, y, n); }

}  // namespace deltafin::kernels
#endif  // HWY_ONCE
