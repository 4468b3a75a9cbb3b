#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace deltafin {

std::optional<DType> dtype_from_name(std::string_view n) {
  if (n == "BF16") return DType::BF16;
  if (n == "F16") return DType::F16;
  if (n == "F32") return DType::F32;
  if (n == "U8") return DType::U8;
  if (n == "I8") return DType::I8;
  if (n == "I32") return DType::I32;
  if (n == "I64") return DType::I64;
  if (n == "F64") return DType::F64;
  if (n == "BOOL") return DType::BOOL;
  if (n == "F8_E4M3") return DType::F8_E4M3;
  return std::nullopt;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::F32: return "F32";
    case DType::U8: return "U8";
    case DType::I8: return "I8";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::F64: return "F64";
    case DType::BOOL: return "BOOL";
    case DType::F8_E4M3: return "F8_E4M3";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::BF16: case DType::F16: return 2;
    case DType::F32: case DType::I32: return 4;
    case DType::I64: case DType::F64: return 8;
    case DType::U8: case DType::I8: case DType::BOOL: case DType::F8_E4M3: return 1;
  }
  return 0;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  uint32_t u;
  if (exp == 0x1F) {
    u = sign | 0x7F800000u | (man << 13);  // inf / NaN (payload kept)
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);  // rebias 15 -> 127
  } else {
    const float f = std::ldexp(float(man), -24);  // subnormal (or zero): exact in fp32
    std::memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint16_t(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // NaN stays NaN
  if (a >= 0x47800000u) {                                                       // >= 65536: past the last rounding step
    return uint16_t(sign | 0x7C00u);
  }
  if (a >= 0x38800000u) {  // normal half range (>= 2^-14)
    uint32_t r = a - (112u << 23);          // rebias exponent
    r += 0xFFFu + ((r >> 13) & 1u);         // round to nearest even on the dropped 13 bits
    if (r >= (31u << 23)) return uint16_t(sign | 0x7C00u);
    return uint16_t(sign | (r >> 13));
  }
  // Subnormal half (or zero): value / 2^-24 rounded to nearest even. The
  // scaling by a power of two is exact, nearbyint uses the default rounding.
  const float scaled = std::ldexp(std::fabs(f), 24);
  return uint16_t(sign | uint16_t(std::nearbyint(scaled)));  // 1024 rounds up into the smallest normal
}

float e8m0_to_f32(uint8_t s) { return std::ldexp(1.0f, int(s) - 127); }

float e4m3_to_f32(uint8_t code) {
  const float sign = code & 0x80 ? -1.0f : 1.0f;
  const int exp = (code >> 3) & 0xF, man = code & 0x7;
  if (exp == 0xF && man == 0x7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(float(man), -9);  // subnormal: man/8 * 2^-6
  return sign * std::ldexp(float(8 + man), exp - 10);      // (1 + man/8) * 2^(exp-7)
}

uint8_t f32_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7E;
  // Every E4M3 value is a multiple of 2^-9; within a binade the step is
  // 2^(e-3). Round |f| to that step, nearest even, then encode.
  int e;
  std::frexp(a, &e);                 // a = m * 2^e, m in [0.5, 1)
  const int step_exp = std::max(e - 1 - 3, -9);
  const float q = std::nearbyint(std::ldexp(a, -step_exp));  // default mode: ties to even
  const float v = std::ldexp(q, step_exp);
  if (v >= 448.0f) return sign | 0x7E;
  if (v == 0.0f) return sign;
  int ve;
  std::frexp(v, &ve);
  const int exp = ve - 1 + 7;  // biased exponent of v
  if (exp <= 0) return uint8_t(sign | uint8_t(std::lround(std::ldexp(v, 9))));  // subnormal
  const int man = int(std::lround(std::ldexp(v, -(ve - 1) + 3))) - 8;
  return uint8_t(sign | (exp << 3) | man);
}

}  // namespace deltafin
