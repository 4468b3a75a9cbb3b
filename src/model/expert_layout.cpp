#include "model/expert_layout.h"

#include <cmath>
#include <cstring>

#include "core/dtype.h"

namespace deltafin {

ExpertLayout expert_layout(const ModelConfig& cfg) {
  const uint64_t I = uint64_t(cfg.moe.expert_inter), In = uint64_t(cfg.expert_in()), w = I * In;
  uint64_t weight = 0, scales = 0;
  switch (cfg.moe.format) {
    case ExpertFormat::Mxfp4: weight = w / 2, scales = w / kMxfp4Group; break;
    case ExpertFormat::Bf16: weight = w * 2, scales = 0; break;
    case ExpertFormat::Fp8Block: {
      const uint64_t b = kFp8Block;
      weight = w, scales = 4 * ((I + b - 1) / b) * ((In + b - 1) / b);  // the same count for [I, In] and [In, I]
      break;
    }
  }
  ExpertLayout l;
  for (int k = 0; k < 6; ++k) {
    l.offset[k] = l.total;
    l.bytes[k] = k % 2 ? scales : weight;
    l.total += l.bytes[k];
  }
  return l;
}

ExpertWeights expert_views(const ExpertLayout& l, const uint8_t* base) {
  auto at = [&](int k) { return l.bytes[k] ? base + l.offset[k] : nullptr; };
  ExpertWeights w;
  w.w1 = {at(0), at(1)};
  w.w2 = {at(2), at(3)};
  w.w3 = {at(4), at(5)};
  return w;
}

Status check_expert_payload(const ModelConfig& cfg, const ExpertLayout& l, const uint8_t* base, int layer,
                            int expert) {
  static const char* kNames[3] = {"w1", "w2", "w3"};
  for (int p = 0; p < 3; ++p) {
    const uint8_t* w = base + l.offset[2 * p];
    const uint8_t* s = base + l.offset[2 * p + 1];
    if (cfg.moe.format == ExpertFormat::Mxfp4) {
      if (const void* bad = std::memchr(s, kE8M0Invalid, l.bytes[2 * p + 1]))
        return error("layer {} expert {}: {} scales: MXFP4 scale byte 255 (NaN encoding) at byte {}", layer, expert,
                     kNames[p], static_cast<const uint8_t*>(bad) - s);
    } else if (cfg.moe.format == ExpertFormat::Fp8Block) {
      for (const uint8_t nan : {uint8_t(0x7F), uint8_t(0xFF)})
        if (const void* bad = std::memchr(w, nan, l.bytes[2 * p]))
          return error("layer {} expert {}: {}: FP8 NaN code at byte {}", layer, expert, kNames[p],
                       static_cast<const uint8_t*>(bad) - w);
      for (uint64_t i = 0; i < l.bytes[2 * p + 1] / 4; ++i) {
        float f;
        std::memcpy(&f, s + 4 * i, 4);
        if (!std::isfinite(f) || f <= 0.0f)
          return error("layer {} expert {}: {} block scale {} is {} (FP8 block scales must be finite and positive)",
                       layer, expert, kNames[p], i, f);
      }
    }
  }
  return {};
}

std::string_view expert_format_name(ExpertFormat f) {
  switch (f) {
    case ExpertFormat::Mxfp4: return "mxfp4";
    case ExpertFormat::Bf16: return "bf16";
    case ExpertFormat::Fp8Block: return "fp8_block";
  }
  return "?";
}

Result<ExpertFormat> expert_format_from_name(std::string_view n) {
  if (n == "mxfp4") return ExpertFormat::Mxfp4;
  if (n == "bf16") return ExpertFormat::Bf16;
  if (n == "fp8_block") return ExpertFormat::Fp8Block;
  return error("expert format '{}' is not known (mxfp4, bf16, fp8_block)", n);
}

}  // namespace deltafin
