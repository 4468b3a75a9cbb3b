// Per-target FMA loop for fma_peak.cpp (foreach_target.h re-includes this file).
#if defined(DELTAFIN_KERNELS_FMA_PEAK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DELTAFIN_KERNELS_FMA_PEAK_INL_H_
#undef DELTAFIN_KERNELS_FMA_PEAK_INL_H_
#else
#define DELTAFIN_KERNELS_FMA_PEAK_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace deltafin::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Enough independent chains to cover the FMA latency (4 cycles) on two pipes.
constexpr int kFmaChains = 16;

uint64_t FmaBurst(size_t iters, float* sink) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  V acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = hn::Set(d, 1.0f + 1e-3f * float(i));
  // 1 - 2^-20 keeps the values bounded (no overflow, no subnormals).
  const V a = hn::Set(d, 0.99999905f), b = hn::Set(d, 1e-7f);
  for (size_t it = 0; it < iters; ++it)
    for (int i = 0; i < kFmaChains; ++i) acc[i] = hn::MulAdd(acc[i], a, b);
  V s = acc[0];
  for (int i = 1; i < kFmaChains; ++i) s = hn::Add(s, acc[i]);
  *sink += hn::GetLane(hn::SumOfLanes(d, s));
  return uint64_t(iters) * kFmaChains * hn::Lanes(d) * 2;
}

}  // namespace HWY_NAMESPACE
}  // namespace deltafin::kernels
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
