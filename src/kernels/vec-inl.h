// Per-target code for vec.h (vec.cpp includes it through foreach_target.h).
// Every operation is one rounded multiply and/or add per element, as in the
// scalar loops (no FMA), so any vector width gives the same bits.
#if defined(DELTAFIN_KERNELS_VEC_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DELTAFIN_KERNELS_VEC_INL_H_
#undef DELTAFIN_KERNELS_VEC_INL_H_
#else
#define DELTAFIN_KERNELS_VEC_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace deltafin::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DV = hn::ScalableTag<float>;

void Axpy(float a, const float* x, float* y, size_t n) {
  const DV d;
  const size_t L = hn::Lanes(d);
  const auto va = hn::Set(d, a);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Add(hn::LoadU(d, y + i), hn::Mul(va, hn::LoadU(d, x + i))), d, y + i);
  for (; i < n; ++i) y[i] = y[i] + a * x[i];
}

void Add(const float* x, float* y, size_t n) {
  const DV d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Add(hn::LoadU(d, y + i), hn::LoadU(d, x + i)), d, y + i);
  for (; i < n; ++i) y[i] = y[i] + x[i];
}

void KdaStep(float* S, size_t D, const float* decay, const float* k, const float* v, const float* q, float beta,
             float* u, float* y) {
  const DV d;
  const size_t L = hn::Lanes(d);
  const size_t Dv = D / L * L;  // vector part of each row; the rest is scalar
  for (size_t j = 0; j < D; ++j) u[j] = 0.0f;
  for (size_t i = 0; i < D; ++i) {
    float* row = S + i * D;
    const float di = decay[i], ki = k[i];
    const auto vd = hn::Set(d, di), vk = hn::Set(d, ki);
    size_t j = 0;
    for (; j < Dv; j += L) {
      const auto r = hn::Mul(hn::LoadU(d, row + j), vd);
      hn::StoreU(r, d, row + j);
      hn::StoreU(hn::Add(hn::LoadU(d, u + j), hn::Mul(vk, r)), d, u + j);
    }
    for (; j < D; ++j) {
      row[j] = row[j] * di;
      u[j] = u[j] + ki * row[j];
    }
  }
  for (size_t j = 0; j < D; ++j) u[j] = v[j] - u[j];
  for (size_t j = 0; j < D; ++j) y[j] = 0.0f;
  for (size_t i = 0; i < D; ++i) {
    float* row = S + i * D;
    const float bk = beta * k[i], qi = q[i];
    const auto vb = hn::Set(d, bk), vq = hn::Set(d, qi);
    size_t j = 0;
    for (; j < Dv; j += L) {
      const auto r = hn::Add(hn::LoadU(d, row + j), hn::Mul(vb, hn::LoadU(d, u + j)));
      hn::StoreU(r, d, row + j);
      hn::StoreU(hn::Add(hn::LoadU(d, y + j), hn::Mul(vq, r)), d, y + j);
    }
    for (; j < D; ++j) {
      row[j] = row[j] + bk * u[j];
      y[j] = y[j] + qi * row[j];
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace deltafin::kernels
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
