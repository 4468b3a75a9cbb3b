#include "model/expert_source.h"

#include <cstring>

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

Result<std::unique_ptr<CheckpointExpertSource>> CheckpointExpertSource::create(const Checkpoint& ck,
                                                                               const ModelConfig& cfg) {
  auto src = std::unique_ptr<CheckpointExpertSource>(new CheckpointExpertSource());
  src->cfg_ = cfg;
  const int E = cfg.moe.num_experts, I = cfg.moe.expert_inter, Lt = cfg.moe.latent;
  src->entries_.resize(size_t(cfg.num_layers) * E);
  static const char* kParts[3] = {"w1", "w2", "w3"};
  for (int l = 0; l < cfg.num_layers; ++l) {
    if (cfg.ffn[l] != FfnKind::MoE) continue;
    for (int e = 0; e < E; ++e) {
      Entry& en = src->entries_[size_t(l) * E + e];
      for (int p = 0; p < 3; ++p) {
        const int rows = p == 1 ? Lt : I, cols = p == 1 ? I : Lt;
        DF_ASSIGN(en.tensors[2 * p],
                  ck.require(expert_tensor_name(l, e, kParts[p], "weight_packed"), DType::U8, {rows, cols / 2}));
        DF_ASSIGN(en.tensors[2 * p + 1],
                  ck.require(expert_tensor_name(l, e, kParts[p], "weight_scale"), DType::U8, {rows, cols / 32}));
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
      for (int p = 1; p < 6; p += 2) DF_TRY(check_mxfp4_scales(*en.tensors[p]));
      en.scales_checked = true;
    }
    out[i].w1 = {en.tensors[0]->data, en.tensors[1]->data};
    out[i].w2 = {en.tensors[2]->data, en.tensors[3]->data};
    out[i].w3 = {en.tensors[4]->data, en.tensors[5]->data};
    stats_.experts_acquired++;
    for (auto* t : en.tensors) stats_.bytes_touched += t->nbytes;
  }
  return {};
}

}  // namespace deltafin
