// Element types of the published checkpoint and their exact conversions.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace deltafin {

enum class DType : uint8_t { BF16, F16, F32, U8, I8, I32, I64, F64, BOOL, F8_E4M3 };

std::optional<DType> dtype_from_name(std::string_view safetensors_name);
std::string_view dtype_name(DType t);
size_t dtype_size(DType t);

// BF16 -> fp32 widening is exact: the 16 bits become the top half.
inline float bf16_to_f32(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// fp32 -> BF16, round to nearest even (NaN stays NaN). Used by writers/tests.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// IEEE half (fp16) <-> fp32. Widening is exact; narrowing rounds to nearest
// even, overflows to infinity and keeps NaN a NaN. Used for row-int8 scales.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// MXFP4 (OCP MX, E2M1 elements, E8M0 group scale over 32 inputs).
// Element code 0..15: sign in bit 3, magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6.
inline constexpr float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
inline constexpr int kMxfp4Group = 32;
inline constexpr uint8_t kE8M0Invalid = 255;  // OCP NaN encoding: rejected at load

// 2^(s-127) exactly, for s in 0..254 (s=0 gives the subnormal-free 2^-127
// which is a float subnormal; exact as well).
float e8m0_to_f32(uint8_t s);

// FP8 E4M3 ("e4m3fn", as the Hub's FP8 checkpoints store weights): bias 7,
// no infinities, 0x7F/0xFF are NaN, largest finite 448. Widening is exact.
float e4m3_to_f32(uint8_t code);
// fp32 -> E4M3, round to nearest even; beyond 448 saturates to +-448 (the
// quantiser scales a block so it never needs to); NaN stays NaN. Writers/tests.
uint8_t f32_to_e4m3(float f);
inline bool e4m3_is_nan(uint8_t code) { return (code & 0x7F) == 0x7F; }
// The Hub's FP8 block: weight_scale_inv holds one fp32 per 128 x 128 block.
inline constexpr int kFp8Block = 128;

}  // namespace deltafin
