// Per-target code for activation.h (activation.cpp includes it through
// foreach_target.h). exp and tanh run on double lanes and round once to fp32;
// the fp32 steps between them are single IEEE operations, as in a scalar loop.
// A tail shorter than a vector is copied into a padded block and runs the same
// lane code, so an element's bits never depend on where it sits in a batch.
#if defined(DELTAFIN_KERNELS_ACTIVATION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DELTAFIN_KERNELS_ACTIVATION_INL_H_
#undef DELTAFIN_KERNELS_ACTIVATION_INL_H_
#else
#define DELTAFIN_KERNELS_ACTIVATION_INL_H_
#endif

#include <algorithm>
#include <cstddef>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace deltafin::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DD = hn::ScalableTag<double>;
using DF = hn::Rebind<float, DD>;  // as many fp32 lanes as DD has doubles
using VF = hn::Vec<DF>;

// Highway's double Exp is valid up to +706 and does not carry NaN through, so
// the input is clamped to +-120 first (exp(120) still rounds to fp32 infinity,
// exp(-120) to zero) and a NaN passed on as it came.
HWY_INLINE VF ExpF(VF x) {
  const DD dd;
  const DF df;
  const auto xd = hn::Min(hn::Max(hn::PromoteTo(dd, x), hn::Set(dd, -120.0)), hn::Set(dd, 120.0));
  return hn::IfThenElse(hn::IsNaN(x), x, hn::DemoteTo(df, hn::Exp(dd, xd)));
}

HWY_INLINE VF TanhF(VF x) {
  const DD dd;
  const DF df;
  return hn::DemoteTo(df, hn::Tanh(dd, hn::PromoteTo(dd, x)));
}

HWY_INLINE VF SituF(VF g, VF u, VF beta, VF lbeta) {
  const DF df;
  const VF one = hn::Set(df, 1.0f);
  VF t = hn::Div(g, beta);
  t = TanhF(t);
  t = hn::Mul(t, beta);
  const VF sig = hn::Div(one, hn::Add(one, ExpF(hn::Neg(g))));
  t = hn::Mul(t, sig);
  VF w = hn::Div(u, lbeta);
  w = TanhF(w);
  w = hn::Mul(w, lbeta);
  return hn::Mul(t, w);
}

void SituRows(const float* g, const float* u, size_t n, float beta, float linear_beta, float* out) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const VF vb = hn::Set(df, beta), vl = hn::Set(df, linear_beta);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(SituF(hn::LoadU(df, g + i), hn::LoadU(df, u + i), vb, vl), df, out + i);
  if (i < n) {
    HWY_ALIGN float bg[hn::MaxLanes(df)] = {}, bu[hn::MaxLanes(df)] = {}, bo[hn::MaxLanes(df)];
    std::copy(g + i, g + n, bg);
    std::copy(u + i, u + n, bu);
    hn::Store(SituF(hn::Load(df, bg), hn::Load(df, bu), vb, vl), df, bo);
    std::copy(bo, bo + (n - i), out + i);
  }
}

template <VF (*F)(VF)>
HWY_INLINE void Elementwise(const float* x, float* y, size_t n) {
  const DF df;
  const size_t L = hn::Lanes(df);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(F(hn::LoadU(df, x + i)), df, y + i);
  if (i < n) {
    HWY_ALIGN float bx[hn::MaxLanes(df)] = {}, by[hn::MaxLanes(df)];
    std::copy(x + i, x + n, bx);
    hn::Store(F(hn::Load(df, bx)), df, by);
    std::copy(by, by + (n - i), y + i);
  }
}

void ExpRows(const float* x, float* y, size_t n) { Elementwise<ExpF>(x, y, n); }
void TanhRows(const float* x, float* y, size_t n) { Elementwise<TanhF>(x, y, n); }

}  // namespace HWY_NAMESPACE
}  // namespace deltafin::kernels
HWY_AFTER_NAMESPACE();

#endif  // include guard
