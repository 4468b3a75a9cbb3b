#include "model/expert_source.h"

#include <cmath>
#include <cstring>

#include "model/families/families.h"

#include "model/weights.h"

namespace deltafin {

Status check_mxfp4_scales(const TensorInfo& t) {
  // memchr is the C library's vector scan: the first use of an expert pays
  // a few microseconds, not a byte loop over its scales.
  const void* bad = std::memchr(t.data, kE8M0Invalid, t.nbytes);
  if (bad)
    return error("{}: tensor '{}': MXFP4 scale byte 255 (NaN encoding) at byte {}", *t.file, t.name,
                 static_cast<const uint8_t*>(bad) - t.data);
  return {};
}

Status check_fp8_block(const TensorInfo& w, const TensorInfo& s) {
  for (const uint8_t nan : {uint8_t(0x7F), uint8_t(0xFF)})
    if (const void* bad = std::memchr(w.data, nan, w.nbytes))
      return error("{}: tensor '{}': FP8 NaN code at byte {}", *w.file, w.name, static_cast<const uint8_t*>(bad) - w.data);
  for (size_t i = 0; i < s.numel(); ++i) {
    float f;
    std::memcpy(&f, s.data + 4 * i, 4);
    if (!std::isfinite(f) || f <= 0.0f)
      return error("{}: tensor '{}': block scale {} is {} (FP8 block scales must be finite and positive)", *s.file,
                   s.name, i, f);
  }
  return {};
}

Result<std::unique_ptr<CheckpointExpertSource>> CheckpointExpertSource::create(const Checkpoint& ck,
                                                                               const ModelConfig& cfg) {
  auto src = std::unique_ptr<CheckpointExpertSource>(new CheckpointExpertSource());
  src->cfg_ = cfg;
  const int E = cfg.moe.num_experts;
  const int64_t I = cfg.moe.expert_inter, In = cfg.expert_in();
  src->entries_.resize(size_t(cfg.num_layers) * size_t(E));
  const FamilyEntry& family = family_of(cfg);
  for (int l = 0; l < cfg.num_layers; ++l) {
    if (cfg.ffn[size_t(l)] != FfnKind::MoE) continue;
    for (int e = 0; e < E; ++e) {
      Entry& en = src->entries_[size_t(l) * size_t(E) + size_t(e)];
      const ExpertTensorNames names = family.expert_names(cfg, l, e);
      for (int p = 0; p < 3; ++p) {  // gate, up, down -> w1, w3, w2
        const int slot = p == 0 ? 0 : p == 1 ? 4 : 2;
        const int64_t rows = p == 2 ? In : I, cols = p == 2 ? I : In;
        switch (cfg.moe.format) {
          case ExpertFormat::Mxfp4: {
            DF_ASSIGN(en.tensors[slot], ck.require(names.weight[p], DType::U8, {rows, cols / 2}));
            DF_ASSIGN(en.tensors[slot + 1], ck.require(names.scale[p], DType::U8, {rows, cols / 32}));
            break;
          }
          case ExpertFormat::Bf16: {
            DF_ASSIGN(en.tensors[slot], ck.require(names.weight[p], DType::BF16, {rows, cols}));
            break;
          }
          case ExpertFormat::Fp8Block: {
            const int64_t b = kFp8Block;
            DF_ASSIGN(en.tensors[slot], ck.require(names.weight[p], DType::F8_E4M3, {rows, cols}));
            DF_ASSIGN(en.tensors[slot + 1],
                      ck.require(names.scale[p], DType::F32, {(rows + b - 1) / b, (cols + b - 1) / b}));
            if (reinterpret_cast<uintptr_t>(en.tensors[slot + 1]->data) % alignof(float))
              return error("{}: tensor '{}': F32 data at an unaligned byte offset", *en.tensors[slot + 1]->file,
                           names.scale[p]);
            break;
          }
        }
      }
    }
  }
  return src;
}

Status ExpertSource::acquire(int layer, std::span<const int> experts, std::span<ExpertWeights> out) {
  DF_TRY(begin(layer, experts, out));
  for (size_t i = 0; i < experts.size(); ++i) DF_TRY(wait(i));
  return {};
}

Status CheckpointExpertSource::begin(int layer, std::span<const int> experts, std::span<ExpertWeights> out) {
  const int E = cfg_.moe.num_experts;
  for (size_t i = 0; i < experts.size(); ++i) {
    const int e = experts[i];
    if (layer < 0 || layer >= cfg_.num_layers || cfg_.ffn[layer] != FfnKind::MoE || e < 0 || e >= E)
      return error("expert {} of layer {} does not exist", e, layer);
    Entry& en = entries_[size_t(layer) * E + e];
    if (!en.scales_checked) {
      for (int p = 0; p < 6; p += 2) {
        if (cfg_.moe.format == ExpertFormat::Mxfp4) DF_TRY(check_mxfp4_scales(*en.tensors[p + 1]));
        if (cfg_.moe.format == ExpertFormat::Fp8Block) DF_TRY(check_fp8_block(*en.tensors[p], *en.tensors[p + 1]));
      }
      en.scales_checked = true;
    }
    auto bytes = [&](int slot) { return en.tensors[slot] ? en.tensors[slot]->data : nullptr; };
    out[i].w1 = {bytes(0), bytes(1)};
    out[i].w2 = {bytes(2), bytes(3)};
    out[i].w3 = {bytes(4), bytes(5)};
    stats_.experts_acquired++;
    for (auto* t : en.tensors)
      if (t) stats_.bytes_touched += t->nbytes;
  }
  return {};
}

}  // namespace deltafin
