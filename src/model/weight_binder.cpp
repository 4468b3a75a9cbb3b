#include "model/weight_binder.h"

#include <cmath>
#include <cstring>

#include "core/row_int8.h"

namespace deltafin {

Result<const float*> fp8_block_scales(const Checkpoint& ck, const std::string& scale_name, int rows, int cols,
                                      bool check_values) {
  const int64_t br = (rows + kFp8Block - 1) / kFp8Block, bc = (cols + kFp8Block - 1) / kFp8Block;
  DF_ASSIGN(const TensorInfo* s, ck.require(scale_name, DType::F32, {br, bc}));
  if (reinterpret_cast<uintptr_t>(s->data) % alignof(float) != 0)
    return error("{}: tensor '{}': F32 data at an unaligned byte offset", *s->file, scale_name);
  const float* sc = reinterpret_cast<const float*>(s->data);
  for (int64_t i = 0; check_values && i < br * bc; ++i) {
    float f;
    std::memcpy(&f, sc + i, 4);
    if (!std::isfinite(f) || f <= 0.0f)
      return error("{}: tensor '{}': block ({}, {}) scale {} (FP8 block scales must be finite and positive)", *s->file,
                   scale_name, i / bc, i % bc, f);
  }
  return sc;
}

Result<Matrix> Binder::matrix(const std::string& name, int rows, int cols, bool int8_ok) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  const TensorInfo* found = ck.find(name);
  if (int8_ok && found && found->dtype == DType::I8) {
    DF_ASSIGN(const TensorInfo* t, ck.require(name, DType::I8, {rows, cols}));
    const std::string sn = row_int8_scale_name(name);
    DF_ASSIGN(const TensorInfo* s, ck.require(sn, DType::F16, {rows}));
    if (reinterpret_cast<uintptr_t>(s->data) % alignof(uint16_t) != 0)
      return error("{}: tensor '{}': F16 data at an odd byte offset", *s->file, sn);
    const uint16_t* sc = reinterpret_cast<const uint16_t*>(s->data);
    for (int r = 0; check_values && r < rows; ++r) {
      uint16_t h;
      std::memcpy(&h, sc + r, 2);
      const float f = f16_to_f32(h);
      if (!std::isfinite(f) || f <= 0.0f)
        return error("{}: tensor '{}': row {} scale {} (must be finite and positive)", *s->file, sn, r, f);
    }
    m.dtype = DType::I8;
    m.data = t->data;
    m.row_scales = sc;
    m.name = &t->name;
    ++int8_matrices;
    return m;
  }
  if (found && found->dtype == DType::F8_E4M3) {
    DF_ASSIGN(const TensorInfo* t, ck.require(name, DType::F8_E4M3, {rows, cols}));
    DF_ASSIGN(m.block_scales, fp8_block_scales(ck, name + "_scale_inv", rows, cols, check_values));
    m.dtype = DType::F8_E4M3;
    m.data = t->data;
    m.name = &t->name;
    return m;
  }
  DF_ASSIGN(const TensorInfo* t, ck.require(name, DType::BF16, {rows, cols}));
  m.dtype = DType::BF16;
  m.data = t->data;
  m.name = &t->name;
  return m;
}

Result<std::vector<float>> Binder::vec(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  DF_ASSIGN(const TensorInfo* t, ck.require(name, dtype, shape));
  std::vector<float> out(t->numel());
  if (dtype == DType::BF16) {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t b;
      std::memcpy(&b, t->data + 2 * i, 2);
      out[i] = bf16_to_f32(b);
    }
  } else {
    std::memcpy(out.data(), t->data, out.size() * 4);
  }
  return out;
}

}  // namespace deltafin
