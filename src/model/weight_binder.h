// Binds spine tensors by name into Matrix views and fp32 vectors, checking
// dtype and shape against the config; shared by the family files
// (src/model/families/).
#pragma once
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/weights.h"

namespace deltafin {

struct Binder {
  const Checkpoint& ck;
  bool check_values = true;  // false: names, dtypes and shapes only (scales not read)
  size_t int8_matrices = 0;

  // BF16; row-int8 (I8 plus its F16 [rows] scale tensor) when `int8_ok`; or
  // FP8 e4m3 with its F32 128 x 128 block scales (`<name>_scale_inv`).
  Result<Matrix> matrix(const std::string& name, int rows, int cols, bool int8_ok = true);
  // A small tensor widened to fp32; `shape` is checked exactly, dtype must be `dtype`.
  Result<std::vector<float>> vec(const std::string& name, DType dtype, const std::vector<int64_t>& shape);
};

// FP8 block scales of `scale_name` for a [rows, cols] weight: F32
// [ceil(rows/128), ceil(cols/128)], each finite and > 0.
Result<const float*> fp8_block_scales(const Checkpoint& ck, const std::string& scale_name, int rows, int cols,
                                      bool check_values = true);

}  // namespace deltafin
