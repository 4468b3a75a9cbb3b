// Dispatch for the FMA peak loop (same targets as the matrix kernels).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/fma_peak-inl.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/fma_peak-inl.h"

#if HWY_ONCE
#include "kernels/fma_peak.h"

namespace deltafin::kernels {

HWY_EXPORT(FmaBurst);

uint64_t fma_burst(size_t iters, float* sink) { return HWY_DYNAMIC_DISPATCH(FmaBurst)(iters, sink); }

}  // namespace deltafin::kernels
#endif  // HWY_ONCE
