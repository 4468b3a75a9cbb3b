// Dispatching entry points: Highway compiles matmul-inl.h once per target and
// picks the best one this CPU supports at the first call.
//
// SSSE3/SSE4 have no fused multiply-add, so they are not compiled; a CPU
// without AVX2 gets the static SCALAR target, which runs the scalar contract.
// SVE is left out so aarch64 uses NEON (fixed 4 lanes; the SVE path would
// only be the scalar fallback). AVX3_DL adds nothing these kernels use.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul-inl.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/matmul-inl.h"

#if HWY_ONCE
namespace deltafin::kernels {

HWY_EXPORT(MatmulF32);
HWY_EXPORT(MatmulBf16);
HWY_EXPORT(MatmulMxfp4);
HWY_EXPORT(MatmulI8);
HWY_EXPORT(DotF32);
HWY_EXPORT(MatmulGroup);
HWY_EXPORT(TargetName);
HWY_EXPORT(UsesSimd);

void matmul_f32(const float* W, size_t rows, size_t cols, const float* X, size_t T, float* Y, ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(MatmulF32)(W, rows, cols, X, T, Y, pool);
}

void matmul_bf16(const uint16_t* W, size_t rows, size_t cols, const float* X, size_t T, float* Y,
                 ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(MatmulBf16)(W, rows, cols, X, T, Y, pool);
}

void matmul_mxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const float* X,
                  size_t T, float* Y, ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(MatmulMxfp4)(packed, scales, rows, cols, X, T, Y, pool);
}

void matmul_i8(const int8_t* q, const uint16_t* scales_f16, size_t rows, size_t cols, const float* X, size_t T,
               float* Y, ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(MatmulI8)(q, scales_f16, rows, cols, X, T, Y, pool);
}

float dot_f32(const float* a, const float* b, size_t n) { return HWY_DYNAMIC_DISPATCH(DotF32)(a, b, n); }

void matmul_group(const MatmulJob* jobs, size_t n_jobs, size_t cols, const float* X, size_t T, ThreadPool* pool) {
  for (size_t j = 0; j < n_jobs; ++j)
    if (jobs[j].format == WeightFormat::kFp8Block) {
      // FP8 runs as its decoded F32 rows (matmul_fp8.cpp), one product at a time.
      for (size_t i = 0; i < n_jobs; ++i) {
        const MatmulJob& m = jobs[i];
        if (m.format == WeightFormat::kFp8Block)
          matmul_fp8_block(static_cast<const uint8_t*>(m.w), static_cast<const float*>(m.scales), m.rows, cols, X, T,
                           m.Y, pool);
        else
          matmul_group(&m, 1, cols, X, T, pool);
      }
      return;
    }
  for (size_t j = 0; j < n_jobs; ++j)
    if (jobs[j].format == WeightFormat::kMxfp4 && cols % kLanes != 0) {
      // The SIMD decoder needs whole groups: such a group runs one product at
      // a time (MXFP4 through the scalar contract).
      for (size_t i = 0; i < n_jobs; ++i) {
        const MatmulJob& m = jobs[i];
        if (m.format == WeightFormat::kMxfp4)
          scalar_rows_mxfp4(static_cast<const uint8_t*>(m.w), static_cast<const uint8_t*>(m.scales), m.rows, cols, X,
                            T, m.Y, pool);
        else
          HWY_DYNAMIC_DISPATCH(MatmulGroup)(&m, 1, cols, X, T, pool);
      }
      return;
    }
  HWY_DYNAMIC_DISPATCH(MatmulGroup)(jobs, n_jobs, cols, X, T, pool);
}

std::vector<int64_t> kernel_targets() { return hwy::SupportedAndGeneratedTargets(); }
const char* kernel_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }
bool kernel_target_is_simd() { return HWY_DYNAMIC_DISPATCH(UsesSimd)(); }

}  // namespace deltafin::kernels
#endif  // HWY_ONCE
