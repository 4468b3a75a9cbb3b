// Row-int8: the explicit, lossy spine format (docs/design/store-and-read-engine.md, "Row-int8 spine", codec
// row-i8/f16-scale). One int8 per weight, one IEEE-half scale per row:
//   amax  = max |w| over the row (fp32 widening of BF16 is exact)
//   scale = amax == 0 ? 1 : amax / 127                       (fp32)
//   q[j]  = clamp(round_half_to_even(w[j] / scale), -127, 127)
//   stored scale = fp16(scale); the weight used is q[j] * float(fp16(scale)).
// q * scale is exact in fp32 (7-bit times 11-bit significands), so kernels can
// treat it like any other exact widening (kernels/matmul.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/result.h"

namespace deltafin {

// Quantizes `rows` BF16 rows of `cols`. Fails, naming `what` and the row, on a
// non-finite weight or a row whose scale does not fit a normal-or-subnormal
// half (|w| above about 8.3e6, or a nonzero max below about 4e-6).
Status quantize_rows_int8(const uint16_t* bf16, size_t rows, size_t cols, int8_t* q, uint16_t* scales_f16,
                          const std::string& what);

// The name of the F16 [rows] scale tensor stored next to an int8 matrix.
inline std::string row_int8_scale_name(const std::string& matrix_name) { return matrix_name + ".row_scale"; }

}  // namespace deltafin
